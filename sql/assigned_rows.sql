-- assigned_rows: every row of one plan slice with its base shard, the byte length of
-- its <url> line, a hash of the line's content and the namespaces it uses; plan makes
-- it the view `assigned` (read twice: group_stats, then planned_rows).
-- base shard: the shard of the last generation whose URL range holds the row (stable
-- boundaries). A URL published before in the same section keeps its shard (diff_rows
-- gives it as prev_shard); only a new URL of an existing section is placed by range:
-- a shard covers the URLs from its smallest up to the next shard's smallest, and URLs
-- below a section's first shard go to that first shard (an ASOF join, on the few new
-- rows only). A new section has no base shard.
-- line_bytes: url_line_bytes, computed from the fields' lengths; the line itself is
-- built once, by render. row_hash: hash of what the line is made of, so a shard's
-- content identity (count, bytes, XOR of its rows' hashes) needs no rendered line.
-- ns: bit flags of the extension namespaces the line uses: bit i set when the line holds
-- $ns_markers[i + 1] (pipeline.extensions.EXTENSIONS: 1 image, 2 video, 4 news, 8 xhtml).
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
    CASE WHEN $format = 'txt' THEN strlen(d.url) + 1
         ELSE url_line_bytes(d.url, d.lastmod, d.changefreq, d.priority, d.ext) END AS line_bytes,
    CASE WHEN $format = 'txt' THEN hash(d.url)
         ELSE hash(d.url, d.lastmod, d.changefreq, d.priority, d.ext) END AS row_hash,
    CASE WHEN $format = 'txt' OR d.ext = '' THEN 0
         ELSE list_sum(list_transform($ns_markers,
                  lambda marker, i: contains(d.ext, marker)::INTEGER << (i - 1))) END AS ns,
    coalesce(d.prev_shard, n.base_shard) AS base_shard
FROM diffed d
LEFT JOIN new_in_known_section n ON d.prev_shard IS NULL AND d.url = n.url;
