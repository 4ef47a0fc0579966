-- removed_rows: URLs of the last snapshot that this run no longer publishes.
-- Reads `previous_rows` and `diffed`. Parameters: none.
SELECT p.url, p.section, p.lastmod
FROM previous_rows p
ANTI JOIN diffed d USING (url);
