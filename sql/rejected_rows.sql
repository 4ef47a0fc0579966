-- rejected_rows: every input row that will not be published, with its reason code
-- and the original URL as it came in: the rows load rejected, then the duplicates
-- (dedupe_rows), the reasons `classified` gives them. One scan of `normalized`, which
-- reads only the rejected rows' columns (a scan of `classified`, whose LEFT JOIN keeps
-- DuckDB from that, reads them all), and the duplicates as dedupe_rows keeps them, with
-- their fields (no second scan for them).
-- Reads `normalized` and `duplicate_rows`. Parameters: none.
SELECT row_id, reason, coalesce(original_url, url) AS url, lastmod, changefreq, priority
FROM normalized
WHERE reason IS NOT NULL
UNION ALL
SELECT row_id, 'duplicate' AS reason, coalesce(original_url, url) AS url, lastmod, changefreq,
       priority
FROM duplicate_rows;
