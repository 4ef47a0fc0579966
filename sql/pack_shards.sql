-- pack_shards: rows grouped into plan groups (shard_groups, made by pipeline.plan),
-- and, inside a group to repack, split into sub-shards that respect the fill limits.
-- Splitting: with rows in URL order, a row goes to count bucket rn / fill_urls and
-- byte bucket (bytes up to and including it - 1) / fill_bytes; each distinct pair is
-- one sub-shard. fill_bytes is the byte budget less the longest line, so a
-- sub-shard never exceeds the budget though a line may straddle a bucket edge.
-- Reads `assigned` and `shard_groups` (section, base_shard, group_id, repack,
-- fill_urls, fill_bytes). Parameters: none.
CREATE OR REPLACE TABLE packed AS
WITH grouped AS (
    SELECT a.*, g.group_id, g.repack, g.fill_urls, g.fill_bytes
    FROM assigned a
    JOIN shard_groups g
      ON a.section = g.section AND a.base_shard IS NOT DISTINCT FROM g.base_shard
),
to_split AS (
    SELECT
        *,
        (row_number() OVER w - 1) // fill_urls AS count_bucket,
        (sum(line_bytes) OVER w - 1) // fill_bytes AS byte_bucket
    FROM grouped
    WHERE repack
    WINDOW w AS (PARTITION BY group_id ORDER BY url ROWS UNBOUNDED PRECEDING)
)
SELECT * EXCLUDE (count_bucket, byte_bucket, repack, fill_urls, fill_bytes),
       dense_rank() OVER (PARTITION BY group_id ORDER BY count_bucket, byte_bucket) - 1 AS sub
FROM to_split
UNION ALL
SELECT * EXCLUDE (repack, fill_urls, fill_bytes), 0 AS sub
FROM grouped
WHERE NOT repack;
