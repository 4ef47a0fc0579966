-- dedupe_rows: every normalised URL of one group of load's partitions but one, as a
-- duplicate; pipeline.load.find_duplicates keeps them in `duplicate_rows`, group by group.
-- Reads `dedupe_group` (the group's rows: whole partitions, so every copy of a URL is in
-- it) and `repeated_url_hashes` (url_hash: the 64-bit hashes of its URLs that occur more
-- than once, found by pipeline.load from url_hashes: a sort of integers, far cheaper than
-- an aggregate of every URL). Rule: of the rows with the same normalised URL, the one
-- with the newest lastmod is kept (rows without lastmod count as oldest); ties go to the
-- row of the smallest hash of its normalised content (every column but its row id and its
-- raw row's hash), then, for rows of one content, to the first (smallest row id). Not by
-- position: the input's identity (pipeline.unchanged) is the same for the same rows in any
-- order, so a rule by position could publish another row for an input the unchanged skip
-- calls the same. Only the rows of a repeated hash are ranked; the result is one row per
-- duplicate with all its columns: those its reject gives (duplicate_rejects) and those load
-- counts (classified_counts: pipeline.load.combine_groups moves them out of the rows to
-- publish). Duplicates are few; they are kept in a table for the run.
-- Parameters: none.
WITH candidates AS (
    SELECT *
    FROM dedupe_group
    WHERE url_hash IN (SELECT url_hash FROM repeated_url_hashes)
)
SELECT * EXCLUDE (rank)
FROM (
    SELECT *,
           row_number() OVER (
               PARTITION BY url ORDER BY lastmod DESC NULLS LAST,
               hash(*COLUMNS(lambda c: c NOT IN ('row_id', '_input_row_hash'))),
               row_id) AS rank
    FROM candidates
)
WHERE rank > 1;
