-- shard_summary: one row per shard: URL count, body bytes, newest lastmod, and a
-- digest of its exact lines in order (the shard's content identity; part of its key),
-- and which extension namespaces its entries use (declared only where used).
-- Reads `planned`. Parameters: none.
SELECT
    section,
    shard,
    count(*) AS urls,
    sum(line_bytes)::BIGINT AS body_bytes,
    max(lastmod) AS lastmod,
    md5(string_agg(md5(line), '' ORDER BY url)) AS digest,
    count(*) FILTER (WHERE status <> 'unchanged') AS changed_rows,
    bool_or(contains(line, '<image:image>')) AS uses_image,
    bool_or(contains(line, '<video:video>')) AS uses_video,
    bool_or(contains(line, '<news:news>')) AS uses_news,
    bool_or(contains(line, '<xhtml:link ')) AS uses_xhtml
FROM planned
GROUP BY section, shard
ORDER BY section, shard;
