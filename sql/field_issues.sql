-- field_issues: counts of optional fields dropped because they were not valid
-- (the row itself is published without them). Reads `classified`. Parameters: none.
SELECT
    count(*) FILTER (WHERE lastmod_raw_invalid) AS lastmod_invalid,
    count(*) FILTER (WHERE changefreq_invalid) AS changefreq_invalid,
    count(*) FILTER (WHERE priority_invalid) AS priority_invalid
FROM classified
WHERE reason IS NULL;
