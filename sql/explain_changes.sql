-- explain_changes: what one generation's run did to one normalised URL (added, changed,
-- removed; no row: unchanged or never there), for `sitemaps explain`.
-- Reads `changes` (a generation's changes.parquet: url, change, lastmod). Parameters: $url.
SELECT change, lastmod
FROM changes
WHERE url = $url;
