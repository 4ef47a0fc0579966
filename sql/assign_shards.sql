-- assign_shards: every row to publish, the byte length of its <url> line (url_line),
-- and the shard of the last generation whose URL range holds it (stable boundaries).
-- Reads `diffed` and `previous_rows`. A shard of the last generation covers the
-- URLs from its smallest URL up to the next shard's smallest; URLs below a
-- section's first shard go to that first shard; a new section has no base shard.
-- The line itself is rendered again in file order (planned_rows), so the sorts
-- in between carry narrow rows.
-- Parameters: $format ('xml', or 'txt': a line is the URL alone).
CREATE OR REPLACE TABLE assigned AS
WITH bounds AS (
    SELECT section, shard, min(url) AS lower
    FROM previous_rows
    GROUP BY section, shard
),
firsts AS (
    SELECT section, arg_min(shard, lower) AS first_shard
    FROM bounds
    GROUP BY section
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
    coalesce(b.shard, f.first_shard) AS base_shard,
    d.fingerprint,
    d.first_seen,
    d.last_changed,
    d.status
FROM diffed d
ASOF LEFT JOIN bounds b ON d.section = b.section AND d.url >= b.lower
LEFT JOIN firsts f ON d.section = f.section;
