-- section_buckets: the buckets of load's files (a first run's, cut by
-- hash(raw_section) % $buckets) that hold each section's valid rows, the section named as
-- valid_rows names it (a raw section without a slug is 'root'). A plan slice of a first
-- run reads its sections' buckets only (pipeline.diffed.DiffedView). A duplicate URL's
-- row may name one bucket more: it is read for nothing.
-- Reads `normalized` and `section_slugs`. Parameters: $buckets.
SELECT section, list(DISTINCT bucket ORDER BY bucket) AS buckets
FROM (
    SELECT coalesce(s.section, 'root') AS section,
           (hash(n.raw_section) % $buckets)::INTEGER AS bucket
    FROM (SELECT DISTINCT raw_section FROM normalized WHERE reason IS NULL) n
    LEFT JOIN section_slugs s ON n.raw_section = s.raw_section
)
GROUP BY section
ORDER BY section;
