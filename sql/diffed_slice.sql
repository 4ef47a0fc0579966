-- diffed_slice: the rows of one plan slice: whole sections, or one section's URLs
-- in [$lo, $hi). plan makes it the view `diffed` that assigned_rows reads, so
-- that each slice is planned on its own. Reads `diffed_all`.
-- Parameters: $sections (VARCHAR[]), $lo and $hi (VARCHAR, NULL for unbounded).
SELECT *
FROM diffed_all
WHERE list_contains($sections, section)
  AND ($lo::VARCHAR IS NULL OR url >= $lo::VARCHAR)
  AND ($hi::VARCHAR IS NULL OR url < $hi::VARCHAR);
