-- duplicate_rejects: the duplicates one dedupe part found (dedupe_rows keeps them with
-- all their columns) as rejected rows, in rejected_rows' columns: reason 'duplicate', the
-- original URL as it came in, the row it lost to (winner_row_id, winner_lastmod) and as
-- detail the tie rule that made that one win (dedupe_rows' won_by: 'newer lastmod',
-- 'same lastmod, smaller content hash' or 'same lastmod and content, first row').
-- Reads `duplicate_rows`. Parameters: none.
SELECT row_id, 'duplicate' AS reason, coalesce(original_url, url) AS url, lastmod, changefreq,
       priority, won_by AS detail, winner_row_id::BIGINT AS winner_row_id,
       winner_lastmod::TIMESTAMPTZ AS winner_lastmod
FROM duplicate_rows;
