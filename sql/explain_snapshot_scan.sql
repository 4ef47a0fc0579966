-- explain_snapshot_scan: the snapshot row of one normalised URL, if published, for
-- `sitemaps explain`, from a snapshot whose footer holds no shard bounds (an earlier
-- version's): every row group is read.
-- Reads `snapshot_rows`. Parameters: $url.
SELECT url, section, shard, lastmod, first_seen, last_changed
FROM snapshot_rows
WHERE url = $url;
