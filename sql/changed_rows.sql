-- changed_rows: what this run adds, changes and removes, for feeds and IndexNow.
-- Reads `diffed` and `previous_rows`. Parameters: none.
SELECT url, status AS change, lastmod
FROM diffed
WHERE status <> 'unchanged'
UNION ALL
SELECT url, 'removed' AS change, NULL::TIMESTAMPTZ AS lastmod
FROM (SELECT url FROM previous_rows ANTI JOIN diffed USING (url));
