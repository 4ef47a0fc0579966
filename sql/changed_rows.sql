-- changed_rows: what this run adds and changes, for feeds and IndexNow (the URLs it
-- removes are removed_rows'). Reads `diffed`. Parameters: none.
SELECT url, status AS change, lastmod
FROM diffed
WHERE status <> 'unchanged';
