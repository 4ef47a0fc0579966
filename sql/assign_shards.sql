-- assign_shards: every row to publish, its rendered <url> line and its byte length,
-- and the shard of the last generation whose URL range holds it (stable boundaries).
-- Reads `diffed` and `previous_rows`. A shard of the last generation covers the
-- URLs from its smallest URL up to the next shard's smallest; URLs below a
-- section's first shard go to that first shard; a new section has no base shard.
-- <loc> is escaped only where needed: after normalisation only & and ' can occur,
-- the other three are escaped anyway as a guard.
-- Parameters: none.
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
),
lined AS (
    SELECT
        d.*,
        '<url><loc>'
        || CASE
               WHEN contains(url, '&') OR contains(url, '''') OR contains(url, '<')
                    OR contains(url, '>') OR contains(url, '"')
               THEN replace(replace(replace(replace(replace(url,
                        '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), '''', '&apos;'), '"', '&quot;')
               ELSE url
           END
        || '</loc>'
        || coalesce('<lastmod>' || strftime(lastmod, '%Y-%m-%dT%H:%M:%SZ') || '</lastmod>', '')
        || coalesce('<changefreq>' || changefreq || '</changefreq>', '')
        || coalesce('<priority>' || rtrim(rtrim(printf('%.3f', priority), '0'), '.')
                    || '</priority>', '')
        || '</url>' || chr(10) AS line
    FROM diffed d
)
SELECT
    l.url,
    l.section,
    l.lastmod,
    l.line,
    strlen(l.line) AS line_bytes,
    coalesce(b.shard, f.first_shard) AS base_shard,
    l.fingerprint,
    l.first_seen,
    l.last_changed,
    l.status
FROM lined l
ASOF LEFT JOIN bounds b ON l.section = b.section AND l.url >= b.lower
LEFT JOIN firsts f ON l.section = f.section;
