-- dedupe_rows: marks every normalised URL but one as a duplicate.
-- Reads `normalized`. Rule: of the rows with the same normalised URL, the one
-- with the newest lastmod is kept (rows without lastmod count as oldest), ties
-- go to the row that came first in the inventory.
-- Parameters: none.
CREATE OR REPLACE TABLE classified AS
SELECT
    * EXCLUDE (reason),
    CASE
        WHEN reason IS NOT NULL THEN reason
        WHEN row_number() OVER (
                 PARTITION BY url ORDER BY lastmod DESC NULLS LAST, row_id
             ) > 1 THEN 'duplicate'
    END AS reason
FROM normalized;
