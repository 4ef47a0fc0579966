-- explain_rejects: a generation's rejected rows of one URL, for `sitemaps explain`: the rows
-- whose URL as it came in is the one asked about, or normalises to the same URL by load's
-- rules (normalized_url, normalize_macros.sql), so any spelling finds them. In row order.
-- Reads `rejects` (rejected_rows' columns; pipeline.explain adds the detail columns as NULL
-- to a file of an earlier version). Parameters: $raw_url (as given), $url (it
-- normalised), $site_prefix, $clean_regex, $iri_regex, $max_len (normalize_inventory's).
SELECT row_id, reason, url, lastmod, changefreq, priority, detail, winner_row_id,
       winner_lastmod
FROM rejects
WHERE url = $raw_url
   OR url = $url
   OR normalized_url(url, $site_prefix, $clean_regex, $iri_regex, $max_len) = $url
ORDER BY row_id;
