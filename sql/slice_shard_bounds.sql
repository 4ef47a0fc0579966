-- slice_shard_bounds: the last generation's shards (previous_shard_bounds, written once
-- by the plan's prepare as plan-bounds.parquet) of one plan slice's sections, as the
-- table `shard_bounds` that assigned_rows reads. Small: one row per shard.
-- Reads `bounds_all`. Parameters: $sections (VARCHAR[]: the slice's sections).
CREATE OR REPLACE TABLE shard_bounds AS
SELECT section, shard, lower, upper, urls
FROM bounds_all
WHERE list_contains($sections, section);
