-- section_counts: rows to publish per section (a cheap aggregate, no sort of the
-- rows), for choosing the plan's slices. Reads `diffed_all`. Parameters: none.
SELECT section, count(*) AS urls
FROM diffed_all
GROUP BY section
ORDER BY section;
