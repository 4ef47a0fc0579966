-- dedupe_rows: marks every normalised URL but one as a duplicate.
-- Reads `normalized`. Rule: of the rows with the same normalised URL, the one
-- with the newest lastmod is kept (rows without lastmod count as oldest), ties
-- go to the row that came first in the inventory. Only URLs that occur more
-- than once are ranked (a hash aggregate finds them), which keeps this cheap.
-- Parameters: none.
CREATE OR REPLACE TABLE classified AS
WITH repeated AS (
    SELECT url FROM normalized WHERE url IS NOT NULL GROUP BY url HAVING count(*) > 1
),
losers AS (
    SELECT row_id
    FROM (
        SELECT row_id, row_number() OVER (
                   PARTITION BY url ORDER BY lastmod DESC NULLS LAST, row_id) AS rank
        FROM normalized SEMI JOIN repeated USING (url)
    )
    WHERE rank > 1
)
SELECT
    n.* EXCLUDE (reason),
    CASE
        WHEN n.reason IS NOT NULL THEN n.reason
        WHEN l.row_id IS NOT NULL THEN 'duplicate'
    END AS reason
FROM normalized n
LEFT JOIN losers l USING (row_id);
