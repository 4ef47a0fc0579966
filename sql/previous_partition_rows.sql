-- previous_partition_rows: how many rows of the live generation's snapshot fall in each
-- of $partitions diff partitions, by the cut of previous_partition. One scan of the URLs
-- for every partition: a partition whose diffed rows match as many snapshot rows removes
-- none, and skips removed_rows' anti-join (pipeline.diff).
-- Reads `previous_all` (the snapshot). Parameters: $partitions (at least 1).
SELECT hash(url) % $partitions::UBIGINT AS partition, count(*) AS rows
FROM previous_all
GROUP BY ALL;
