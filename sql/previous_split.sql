-- previous_split: the live snapshot's rows with the diff partition each falls in, by the
-- cut of previous_partition (hash(url) % $partitions), for the load step to write once cut
-- by partition (pipeline.diff.split_snapshot): each diff partition then reads its own rows
-- instead of scanning the whole snapshot; without the sections load found unchanged
-- (previous_partition). Reads `snapshot_file`.
-- Parameters: $partitions (at least 1), $unchanged_sections (VARCHAR[]).
SELECT *, hash(url) % $partitions::UBIGINT AS diff_partition
FROM snapshot_file
WHERE NOT list_contains($unchanged_sections, section);
