-- snapshot_rows: what the next run needs of this one (pipeline.diff.SNAPSHOT_COLUMNS), from
-- every planned part, with each row's final shard number. A new shard planned in a
-- section's later plan slice carries a provisional number in its part (pipeline.plan);
-- `renumbered` maps it to the final one: one row per such shard (section,
-- planned_shard, shard), unique in the plan, usually few or none.
-- Reads `planned` and `renumbered`. Parameters: none.
SELECT p.url, p.section, coalesce(r.shard, p.shard)::INTEGER AS shard, p.fingerprint,
       p.lastmod, p.first_seen, p.last_changed
FROM planned p
LEFT JOIN renumbered r ON p.section = r.section AND p.shard = r.planned_shard;
