-- group_stats: every base shard of the slice (last generation's shard, or a new
-- section's NULL) after this run's changes: its size, longest line, newest lastmod,
-- the XOR of its rows' hashes and the namespaces it uses. plan decides from these
-- which shards to keep, merge or repack, and keeps a shard whose key (made from these
-- sums alone) is already live without reading its rows again. Every URL of a group
-- lies between its min_url and max_url, so it starts with their common prefix, which
-- the sort of planned_rows can skip.
-- Reads `assigned` (assigned_rows). Parameters: none.
SELECT
    section,
    base_shard,
    count(*) AS urls,
    sum(line_bytes)::BIGINT AS body_bytes,
    max(line_bytes) AS max_line_bytes,
    bit_xor(row_hash) AS row_hash_xor,
    max(lastmod) AS lastmod,
    bit_or(ns) AS ns,
    count(*) FILTER (WHERE changed) AS changed_rows,
    min(url) AS min_url,
    max(url) AS max_url
FROM assigned
GROUP BY section, base_shard
ORDER BY section, base_shard NULLS LAST;
