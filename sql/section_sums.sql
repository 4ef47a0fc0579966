-- section_sums: each section's input rows, for its identity (pipeline.unchanged: a section
-- whose rows are those of the live generation is not diffed, planned or rewritten again).
-- Over the rows that publish in the section and its duplicates (which of a repeated URL's
-- rows publishes is what its rows make of it): their count and two sums of load's hash of
-- each input row, a duplicate's hashed once more, so that the rows that publish and those
-- that do not are told apart (sums, so the same rows in another order are the same input);
-- and the newest lastmod (a lastmod after either run's time is clamped to it, which
-- changes the row).
-- Reads `classified` (classified_rows, with the row hash column) and `section_slugs`.
-- Parameters: none.
SELECT
    section,
    count(*) FILTER (WHERE reason IS NULL) AS rows,
    coalesce(sum(h::HUGEINT), 0) AS a,
    coalesce(sum(hash(h)::HUGEINT), 0) AS b,
    max(lastmod) AS newest
FROM (
    SELECT
        coalesce(s.section, 'root') AS section,
        c.reason,
        CASE WHEN c.reason IS NULL THEN c._input_row_hash
             ELSE hash(c._input_row_hash, 'duplicate') END AS h,
        c.lastmod
    FROM classified c
    LEFT JOIN section_slugs s ON c.raw_section = s.raw_section
    WHERE c.reason IS NULL OR c.reason = 'duplicate'
)
GROUP BY section
ORDER BY section;
