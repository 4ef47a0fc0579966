-- shard_summary: one row per shard: URL count, body bytes, newest lastmod, and a
-- digest of its exact lines in order (the shard's content identity; part of its key).
-- Reads `planned`. Parameters: none.
SELECT
    section,
    shard,
    count(*) AS urls,
    sum(line_bytes)::BIGINT AS body_bytes,
    max(lastmod) AS lastmod,
    md5(string_agg(md5(line), '' ORDER BY url)) AS digest,
    count(*) FILTER (WHERE status <> 'unchanged') AS changed_rows
FROM planned
GROUP BY section, shard
ORDER BY section, shard;
