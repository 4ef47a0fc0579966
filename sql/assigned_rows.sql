-- assigned_rows: every row of one plan slice with its base shard, the byte length of
-- its <url> line, a hash of the line's content and the namespaces it uses; plan makes
-- it the view `assigned` (group_stats reads its measures, planned_rows its fields).
-- base shard: the shard of the last generation whose URL range holds the row (stable
-- boundaries). A URL published before in the same section keeps its shard (diff_rows
-- gives it as prev_shard); only a new URL of an existing section is placed by range:
-- a shard covers the URLs from its smallest up to the next shard's smallest, and URLs
-- below a section's first shard go to that first shard (an ASOF join, on the few new
-- rows only: the rows with a previous shard skip even the probe of that join). A new
-- section has no base shard.
-- line_bytes, row_hash, ns: the line's measures (sql/url_line.sql: line_bytes, line_hash,
-- line_namespaces), from the fields' lengths; the line itself is built once, by render.
-- Reads `diffed` (the slice's rows) and `shard_bounds` (the last generation's shards of
-- the slice's sections). Parameters: $format ('xml', or 'txt': a line is the URL alone),
-- $ns_markers (VARCHAR[], pipeline.extensions.NAMESPACE_MARKERS).
WITH firsts AS (
    SELECT section, arg_min(shard, lower) AS first_shard
    FROM shard_bounds
    GROUP BY section
),
new_in_known_section AS (
    SELECT d.url, coalesce(b.shard, f.first_shard) AS base_shard
    FROM (SELECT url, section FROM diffed
          WHERE prev_shard IS NULL AND section IN (SELECT section FROM firsts)) d
    ASOF LEFT JOIN shard_bounds b ON d.section = b.section AND d.url >= b.lower
    JOIN firsts f ON d.section = f.section
),
placed AS (
    SELECT *, prev_shard AS base_shard
    FROM diffed
    WHERE prev_shard IS NOT NULL
    UNION ALL
    SELECT d.*, n.base_shard
    FROM diffed d
    LEFT JOIN new_in_known_section n ON d.url = n.url
    WHERE d.prev_shard IS NULL
)
SELECT
    d.url,
    d.section,
    d.lastmod,
    d.changefreq,
    d.priority,
    d.ext,
    d.fingerprint,
    d.first_seen,
    d.last_changed,
    d.status <> 'unchanged' AS changed,
    line_bytes($format, d.url, d.lastmod, d.changefreq, d.priority, d.ext) AS line_bytes,
    line_hash($format, d.url, d.lastmod, d.changefreq, d.priority, d.ext) AS row_hash,
    line_namespaces($format, d.ext, $ns_markers) AS ns,
    d.base_shard
FROM placed d;
