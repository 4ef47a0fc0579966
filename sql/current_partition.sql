-- current_partition: this run's valid rows whose URL falls in diff partition
-- $partition of $partitions: url_hash (load's hash(url)) % $partitions = $partition.
-- previous_partition cuts the snapshot by the same hash, so a URL and its previous row
-- always meet in the same partition and diff_rows joins one partition at a time, exactly.
-- The sections load found unchanged ($unchanged_sections, pipeline.unchanged) are left out
-- on both sides: their rows keep their live shards and snapshot rows.
-- diff makes it the view `current_rows`. Reads `current_all` (the valid rows).
-- Parameters: $partition (0 .. $partitions - 1), $partitions (at least 1),
-- $unchanged_sections (VARCHAR[]).
SELECT *
FROM current_all
WHERE url_hash % $partitions::UBIGINT = $partition::UBIGINT
  AND NOT list_contains($unchanged_sections, section);
