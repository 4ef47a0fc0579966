-- previous_shard_bounds: one row per shard of the last generation: its section,
-- number, smallest and largest URL and URL count. plan uses it to cut a section
-- into slices only where no previous shard spans the cut, to place new URLs in
-- the shard whose range holds them (assigned_rows), and to number new shards
-- after the section's highest previous number. Small: one row per shard.
-- Reads `previous_rows`. Parameters: none.
CREATE OR REPLACE TABLE shard_bounds AS
SELECT section, shard, min(url) AS lower, max(url) AS upper, count(*) AS urls
FROM previous_rows
GROUP BY section, shard;
