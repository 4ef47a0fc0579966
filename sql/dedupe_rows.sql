-- dedupe_rows: marks every normalised URL but one as a duplicate.
-- Reads `normalized`. Rule: of the rows with the same normalised URL, the one
-- with the newest lastmod is kept (rows without lastmod count as oldest), ties
-- go to the row that came first in the inventory. Only URLs that occur more
-- than once are ranked (a hash aggregate finds them), which keeps this cheap;
-- `classified` is a view, so the inventory is held in memory once.
-- Parameters: none.
CREATE OR REPLACE TABLE duplicate_rows AS
WITH repeated AS (
    SELECT url FROM normalized WHERE url IS NOT NULL GROUP BY url HAVING count(*) > 1
)
SELECT row_id
FROM (
    SELECT row_id, row_number() OVER (
               PARTITION BY url ORDER BY lastmod DESC NULLS LAST, row_id) AS rank
    FROM normalized SEMI JOIN repeated USING (url)
)
WHERE rank > 1;

CREATE OR REPLACE VIEW classified AS
SELECT
    n.* EXCLUDE (reason),
    CASE
        WHEN n.reason IS NOT NULL THEN n.reason
        WHEN d.row_id IS NOT NULL THEN 'duplicate'
    END AS reason
FROM normalized n
LEFT JOIN duplicate_rows d USING (row_id);
