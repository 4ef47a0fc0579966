-- duplicate_rejects: the duplicates one dedupe part found (dedupe_rows keeps them with
-- all their columns) as rejected rows, in rejected_rows' columns: reason 'duplicate' and
-- the original URL as it came in.
-- Reads `duplicate_rows`. Parameters: none.
SELECT row_id, 'duplicate' AS reason, coalesce(original_url, url) AS url, lastmod, changefreq,
       priority
FROM duplicate_rows;
