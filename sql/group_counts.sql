-- group_counts: every group of the plan (a base shard of assigned_rows, or a new section's
-- rows) with its URL count and whether plan may write it: it has added or changed rows,
-- it lost rows (its count is not the last generation's), or it is a new section's. A group
-- that is none of these holds the rows, so the lines and the key, of a published shard:
-- plan keeps it without sorting or writing its rows, and prepare sizes an incremental
-- run's slices by the rows of the other groups. Only counts: no line is measured.
-- Reads `assigned` (over every diffed row) and `shard_bounds`. Parameters: none.
WITH groups AS (
    SELECT section, base_shard, count(*) AS urls, count(*) FILTER (WHERE changed) AS changed
    FROM assigned
    GROUP BY section, base_shard
)
SELECT
    g.section,
    g.base_shard,
    g.urls,
    g.base_shard IS NULL OR g.changed > 0 OR b.urls IS DISTINCT FROM g.urls AS touched
FROM groups g
LEFT JOIN shard_bounds b ON g.section = b.section AND g.base_shard = b.shard
ORDER BY g.section, g.base_shard;
