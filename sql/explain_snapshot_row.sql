-- explain_snapshot_row: the snapshot row of one normalised URL, if published, for
-- `sitemaps explain`. The section and shard come from the snapshot footer's shard
-- bounds (the shard whose URL range holds the URL): the snapshot keeps statistics of
-- those columns, not of the URL, so filtering on them is what lets the Parquet reader skip
-- every row group but the shard's.
-- Reads `snapshot_rows` (pipeline.snapshot.register_snapshot). Parameters: $url, $section,
-- $shard.
SELECT url, section, shard, lastmod, first_seen, last_changed
FROM snapshot_rows
WHERE section = $section AND shard = $shard AND url = $url;
