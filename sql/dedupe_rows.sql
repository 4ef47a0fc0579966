-- dedupe_rows: marks every normalised URL but one as a duplicate.
-- Reads `normalized`. Rule: of the rows with the same normalised URL, the one
-- with the newest lastmod is kept (rows without lastmod count as oldest), ties
-- go to the row that came first in the inventory. Only URLs whose 64-bit hash
-- occurs more than once are ranked (an aggregate of integers finds them, far cheaper
-- than one of strings; a hash collision only makes a candidate, the rank is by URL);
-- the result is small: one row id per duplicate.
-- Parameters: none.
CREATE OR REPLACE TABLE duplicate_rows AS
WITH repeated AS (
    SELECT hash(url) AS url_hash
    FROM normalized
    WHERE url IS NOT NULL
    GROUP BY url_hash
    HAVING count(*) > 1
),
candidates AS (
    SELECT row_id, url, lastmod
    FROM normalized
    WHERE url IS NOT NULL AND hash(url) IN (SELECT url_hash FROM repeated)
)
SELECT row_id
FROM (
    SELECT row_id, row_number() OVER (
               PARTITION BY url ORDER BY lastmod DESC NULLS LAST, row_id) AS rank
    FROM candidates
)
WHERE rank > 1;
