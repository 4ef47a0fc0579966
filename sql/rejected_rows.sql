-- rejected_rows: every input row that will not be published, with its reason code
-- and the original URL as it came in. Reads `classified`. Parameters: none.
SELECT row_id, reason, coalesce(original_url, url) AS url, lastmod, changefreq, priority
FROM classified
WHERE reason IS NOT NULL;
