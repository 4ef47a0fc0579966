-- planned_rows: the rows of every plan group that is written this run, in file order:
-- by group (groups are numbered in section order), then by URL. A group that is
-- repacked is cut into shards afterwards, at row positions (pipeline.plan), so each
-- shard is a run of consecutive rows of the part; a group kept as it is, is one shard.
-- Groups whose shard is already published unchanged (`reused`) are left out: render
-- skips them and the snapshot takes their rows from the diff (reused_rows).
-- Reads `assigned` and `shard_groups` (section, base_shard, group_id, reused, skip, made by
-- pipeline.plan). Parameters: none.
SELECT
    g.group_id,
    a.section,
    a.url,
    a.lastmod,
    a.changefreq,
    a.priority,
    a.ext,
    a.line_bytes,
    a.row_hash,
    a.ns,
    a.changed,
    a.fingerprint,
    a.first_seen,
    a.last_changed
FROM assigned a
JOIN shard_groups g
  ON a.section = g.section AND a.base_shard IS NOT DISTINCT FROM g.base_shard
WHERE NOT g.reused
-- The URLs of a group share their first g.skip characters: comparing what follows them
-- orders them the same, and much faster (DuckDB's sort keys begin with a string's prefix).
ORDER BY g.group_id, substr(a.url, g.skip + 1);
