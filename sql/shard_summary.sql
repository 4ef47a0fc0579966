-- shard_summary: one row per shard: URL count, body bytes, newest lastmod, and a
-- digest of its exact lines (the shard's content identity; part of its key),
-- and which extension namespaces its entries use (declared only where used).
-- Reads `planned`. Parameters: none.
SELECT
    section,
    shard,
    count(*) AS urls,
    sum(line_bytes)::BIGINT AS body_bytes,
    max(lastmod) AS lastmod,
    -- Order-free (no sort): a shard's lines are unique and their order is fixed by
    -- their set, so count, bytes and the XOR of their MD5s identify its content.
    md5(concat_ws('|', count(*), sum(line_bytes), bit_xor(md5_number(line)))) AS digest,
    count(*) FILTER (WHERE status <> 'unchanged') AS changed_rows,
    bool_or(contains(line, '<image:image>')) AS uses_image,
    bool_or(contains(line, '<video:video>')) AS uses_video,
    bool_or(contains(line, '<news:news>')) AS uses_news,
    bool_or(contains(line, '<xhtml:link ')) AS uses_xhtml
FROM planned
GROUP BY section, shard
ORDER BY section, shard;
