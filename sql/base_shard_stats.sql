-- base_shard_stats: size of every base shard (last generation's shard, or a new
-- section's NULL) after this run's changes. Reads `assigned`. Parameters: none.
SELECT section, base_shard, count(*) AS urls, sum(line_bytes)::BIGINT AS body_bytes,
       max(line_bytes) AS max_line_bytes
FROM assigned
GROUP BY section, base_shard
ORDER BY section, base_shard NULLS LAST;
