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
-- publish), and the row it lost to: winner_row_id, winner_lastmod and won_by, the tie
-- rule that decided ('newer lastmod', 'same lastmod, smaller content hash', 'same lastmod
-- and content, first row'), for explain. Duplicates are few; they are kept in a table for
-- the run. The content hash leaves out gate_detail too (NULL on every row ranked here), so
-- it is the one earlier versions ranked by.
-- Parameters: none.
WITH candidates AS (
    SELECT *,
           hash(*COLUMNS(lambda c: c NOT IN ('row_id', '_input_row_hash', 'gate_detail')))
               AS content_rank
    FROM dedupe_group
    WHERE url_hash IN (SELECT url_hash FROM repeated_url_hashes)
),
ranked AS (
    SELECT *,
           row_number() OVER by_rule AS rank,
           first_value(row_id) OVER by_rule AS winner_row_id,
           first_value(lastmod) OVER by_rule AS winner_lastmod,
           first_value(content_rank) OVER by_rule AS winner_content_rank
    FROM candidates
    WINDOW by_rule AS (PARTITION BY url ORDER BY lastmod DESC NULLS LAST, content_rank, row_id)
)
SELECT * EXCLUDE (rank, content_rank, winner_content_rank),
       CASE
           WHEN winner_lastmod IS DISTINCT FROM lastmod THEN 'newer lastmod'
           WHEN winner_content_rank <> content_rank THEN 'same lastmod, smaller content hash'
           ELSE 'same lastmod and content, first row'
       END AS won_by
FROM ranked
WHERE rank > 1;
