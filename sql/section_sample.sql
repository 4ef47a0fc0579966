-- section_sample: the groups' samples (`sample_parts`, sql/group_sample.sql) with their
-- sections named as the diff names them (`section_slugs`; no slug is 'root', as
-- sql/valid_rows.sql has it), once each, in (section, URL) order: what sql/sample_urls.sql
-- gives of a first run's diffed rows, read by prepare instead of those rows.
-- Reads `sample_parts`, `section_slugs`. Parameters: none.
SELECT DISTINCT coalesce(s.section, 'root') AS section, p.url
FROM sample_parts p
LEFT JOIN section_slugs s ON p.raw_section = s.raw_section
ORDER BY section, url;
