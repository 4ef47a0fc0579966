-- previous_partition: the last snapshot's rows whose URL falls in diff partition
-- $partition of $partitions: hash(url) % $partitions = $partition, the same cut as
-- current_partition, so the rows a partition finds removed are exactly its own.
-- Without the sections load found unchanged, as current_partition.
-- diff makes it the view `previous_rows`. Reads `previous_all` (the snapshot).
-- Parameters: $partition (0 .. $partitions - 1), $partitions (at least 1),
-- $unchanged_sections (VARCHAR[]).
SELECT *
FROM previous_all
WHERE NOT list_contains($unchanged_sections, section)
  AND hash(url) % $partitions::UBIGINT = $partition::UBIGINT;
