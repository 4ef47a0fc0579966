-- classified_rows: the view `classified`: every normalised row with its reject reason,
-- 'duplicate' for the rows dedupe_rows found. load counts and writes the rejects from it,
-- diff reads the valid rows from it (valid_rows), so the rows are stored once, as
-- normalized.parquet, and never rewritten without their duplicates.
-- Reads `normalized` and `duplicate_rows`. Parameters: none.
CREATE OR REPLACE VIEW classified AS
SELECT
    n.* EXCLUDE (reason),
    CASE
        WHEN n.reason IS NOT NULL THEN n.reason
        WHEN d.row_id IS NOT NULL THEN 'duplicate'
    END AS reason
FROM normalized n
LEFT JOIN duplicate_rows d USING (row_id);
