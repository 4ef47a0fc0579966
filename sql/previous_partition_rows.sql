-- previous_partition_rows: how many rows of the live generation's snapshot fall in each
-- of $partitions diff partitions, by the cut of previous_partition. One scan of the URLs
-- for every partition: a partition whose diffed rows match as many snapshot rows removes
-- none, and skips removed_rows' anti-join (pipeline.diff).
-- Without the sections load found unchanged (previous_partition).
-- Reads `previous_all` (the snapshot). Parameters: $partitions (at least 1),
-- $unchanged_sections (VARCHAR[]).
SELECT hash(url) % $partitions::UBIGINT AS partition, count(*) AS rows
FROM previous_all
WHERE NOT list_contains($unchanged_sections, section)
GROUP BY ALL;
