-- field_issues: the rows of each reject reason (reason NULL: the rows to publish), and
-- for the rows to publish the optional fields dropped because they were not valid (the
-- row is published without them): an unparseable lastmod, an unknown changefreq, a
-- priority outside 0..1, images past 1,000 per URL, videos missing a required field,
-- hreflang alternates that do not list the URL itself, tags Google no longer uses left
-- out (deprecated_tags, pipeline.extensions); and how many rows gave a lastmod
-- at all. One scan of `classified` gives load every count it reports.
-- Reads `classified`. Parameters: none.
SELECT
    reason,
    count(*) AS rows,
    count(*) FILTER (WHERE lastmod IS NOT NULL OR lastmod_raw_invalid) AS lastmod_given,
    count(*) FILTER (WHERE lastmod_raw_invalid) AS lastmod_invalid,
    count(*) FILTER (WHERE changefreq_invalid) AS changefreq_invalid,
    count(*) FILTER (WHERE priority_invalid) AS priority_invalid,
    coalesce(sum(images_dropped), 0)::BIGINT AS images_dropped,
    coalesce(sum(videos_dropped), 0)::BIGINT AS videos_dropped,
    coalesce(sum(alternates_dropped), 0)::BIGINT AS alternates_without_self,
    coalesce(sum(deprecated_tags), 0)::BIGINT AS deprecated_tags
FROM classified
GROUP BY reason
ORDER BY reason NULLS FIRST;
