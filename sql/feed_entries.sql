-- feed_entries: the entries of the recent-changes feed, newest change first.
-- Reads `feed_changes` (url, change, lastmod, gen_rank: 0 for the newest generation,
-- 1 for the one before, ...) and `feed_generations` (gen_rank, created).
-- A URL changed in several generations appears once, as of its newest change; a URL
-- whose newest change is its removal does not appear at all. `updated` is the URL's
-- lastmod in W3C datetime (UTC), or its generation's time when it has none.
-- Parameters: $limit (entries returned at most).
WITH newest AS (
    SELECT url, change, lastmod, gen_rank
    FROM feed_changes
    QUALIFY row_number() OVER (PARTITION BY url
                               ORDER BY gen_rank, lastmod DESC NULLS LAST) = 1
)
SELECT n.url, n.change,
       strftime(coalesce(n.lastmod, g.created), '%Y-%m-%dT%H:%M:%SZ') AS updated
FROM newest AS n
JOIN feed_generations AS g USING (gen_rank)
WHERE n.change IN ('added', 'changed')
ORDER BY n.gen_rank, coalesce(n.lastmod, g.created) DESC, n.url
LIMIT $limit;
