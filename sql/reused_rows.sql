-- reused_rows: the snapshot rows of the shards that a run keeps as they are published
-- (plan left their rows out of the planned parts): each row with the base shard that
-- assigned_rows gives it, which is the shard's number, and its section as the code the
-- snapshot's writer takes (pipeline.snapshot), not as text.
-- Reads `assigned` (assigned_rows over every diffed row and the last generation's shard
-- bounds) and `reused_shards` (section, shard, section_code; one row a shard).
-- Parameters: none.
SELECT a.url, r.section_code, a.base_shard::INTEGER AS shard, a.fingerprint, a.lastmod,
       a.first_seen, a.last_changed
FROM assigned a
JOIN reused_shards r ON a.section = r.section AND a.base_shard = r.shard;
