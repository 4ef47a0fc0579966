-- row_sums_by_section: load's sums of its input rows' hashes (the column
-- pipeline.unchanged.ROW_HASH_COLUMN), in one scan of every normalised row, by the path
-- segments that name the row's section and whether the row passed the checks (it
-- publishes, unless it is a duplicate): their totals are the numbers of the input's
-- identity (pipeline.unchanged.row_sums), the passing rows' the sections' identities. Per
-- group: the rows, two sums (of the hashes, and of a hash of each), the newest lastmod (a
-- lastmod after either run's time is clamped to it, which changes the row).
-- Reads `normalized`. Parameters: none.
SELECT
    raw_section,
    reason IS NULL AS passed,
    count(*) AS rows,
    coalesce(sum(_input_row_hash::HUGEINT), 0) AS a,
    coalesce(sum(hash(_input_row_hash)::HUGEINT), 0) AS b,
    max(lastmod) AS newest
FROM normalized
GROUP BY ALL;
