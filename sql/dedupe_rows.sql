-- dedupe_rows: marks every normalised URL but one as a duplicate.
-- Reads `normalized` and `repeated_url_hashes` (url_hash: the 64-bit hashes of URLs that
-- occur more than once, found by pipeline.load from url_hashes: a sort of integers,
-- far cheaper than an aggregate of every URL). Rule: of the rows with the same
-- normalised URL, the one with the newest lastmod is kept (rows without lastmod count as
-- oldest); ties go to the row of the smallest hash of its normalised content (every
-- column but its row id and its raw row's hash, which load has only when asked), then,
-- for rows of one content (either one gives the same output), to the first. Not to the
-- first row: the input's identity (pipeline.unchanged) is a sum over rows, the same for
-- the same rows in any order or file layout, so a rule by position would publish another
-- row for the same input than the live generation's, which the unchanged skip keeps.
-- Only the rows of a repeated hash are ranked (a hash collision only makes a candidate,
-- the rank is by URL); the result is small: one row per duplicate, its id and the fields
-- its reject gives (rejected_rows), taken here from the few candidates instead of in a
-- second pass over every row of `normalized` (10M rows: 0.2 s less).
-- Parameters: none.
CREATE OR REPLACE TABLE duplicate_rows AS
WITH candidates AS (
    SELECT *
    FROM normalized
    WHERE url_hash IN (SELECT url_hash FROM repeated_url_hashes)
)
SELECT row_id, url, lastmod, original_url, changefreq, priority
FROM (
    SELECT row_id, url, lastmod, original_url, changefreq, priority,
           row_number() OVER (
               PARTITION BY url ORDER BY lastmod DESC NULLS LAST,
               hash(*COLUMNS(lambda c: c NOT IN ('row_id', '_input_row_hash'))),
               row_id) AS rank
    FROM candidates
)
WHERE rank > 1;
