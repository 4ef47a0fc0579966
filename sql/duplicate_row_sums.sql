-- duplicate_row_sums: the duplicates' share of row_sums_by_section's sums (rows that passed
-- the checks but repeat a URL whose other row publishes, sql/dedupe_rows.sql), by the same
-- path segments, and the same sums of their hashes hashed once more: a section's identity
-- sums its duplicates apart from the rows that publish (pipeline.unchanged), so that
-- another of a repeated URL's rows publishing changes it. Few rows: their row ids only are
-- looked up among the normalised rows.
-- Reads `normalized` and `duplicate_rows`. Parameters: none.
SELECT
    raw_section,
    count(*) AS rows,
    coalesce(sum(_input_row_hash::HUGEINT), 0) AS a,
    coalesce(sum(hash(_input_row_hash)::HUGEINT), 0) AS b,
    coalesce(sum(hash(_input_row_hash, 'duplicate')::HUGEINT), 0) AS tagged_a,
    coalesce(sum(hash(hash(_input_row_hash, 'duplicate'))::HUGEINT), 0) AS tagged_b
FROM normalized
WHERE row_id IN (SELECT row_id FROM duplicate_rows)
GROUP BY ALL;
