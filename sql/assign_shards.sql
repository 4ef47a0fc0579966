-- assign_shards: every row to publish, the byte length of its <url> line (url_line),
-- and its base shard: the shard of the last generation whose URL range holds it
-- (stable boundaries). A URL published before in the same section keeps its shard
-- (diff_rows gives it as prev_shard); only a new URL of an existing section is
-- placed by range: a shard covers the URLs from its smallest up to the next
-- shard's smallest, and URLs below a section's first shard go to that first shard
-- (an ASOF join, on the few new rows only). A new section has no base shard.
-- The line itself is rendered again in file order (planned_rows), so the sorts
-- in between carry narrow rows.
-- Reads `diffed` (one plan slice's rows) and `shard_bounds` (previous_shard_bounds:
-- the last generation's shards, computed once per plan, not once per slice).
-- Parameters: $format ('xml', or 'txt': a line is the URL alone).
CREATE OR REPLACE TABLE assigned AS
WITH bounds AS (
    SELECT section, shard, lower
    FROM shard_bounds
),
firsts AS (
    SELECT section, arg_min(shard, lower) AS first_shard
    FROM bounds
    GROUP BY section
),
new_in_known_section AS (
    SELECT d.url, coalesce(b.shard, f.first_shard) AS base_shard
    FROM (SELECT url, section FROM diffed
          WHERE prev_shard IS NULL AND section IN (SELECT section FROM firsts)) d
    ASOF LEFT JOIN bounds b ON d.section = b.section AND d.url >= b.lower
    JOIN firsts f ON d.section = f.section
)
SELECT
    d.url,
    d.section,
    d.lastmod,
    d.changefreq,
    d.priority,
    d.ext,
    strlen(CASE WHEN $format = 'txt' THEN d.url || chr(10)
                ELSE url_line(d.url, d.lastmod, d.changefreq, d.priority, d.ext) END
    ) AS line_bytes,
    coalesce(d.prev_shard, n.base_shard) AS base_shard,
    d.fingerprint,
    d.first_seen,
    d.last_changed,
    d.status
FROM diffed d
LEFT JOIN new_in_known_section n ON d.prev_shard IS NULL AND d.url = n.url;
