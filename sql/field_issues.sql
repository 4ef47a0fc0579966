-- field_issues: counts of optional fields dropped because they were not valid
-- (the row itself is published without them): an unparseable lastmod, an unknown
-- changefreq, a priority outside 0..1, images past 1,000 per URL, videos missing a
-- required field, hreflang alternates that do not list the URL itself. Reads `classified`. Parameters: none.
SELECT
    count(*) FILTER (WHERE lastmod_raw_invalid) AS lastmod_invalid,
    count(*) FILTER (WHERE changefreq_invalid) AS changefreq_invalid,
    count(*) FILTER (WHERE priority_invalid) AS priority_invalid,
    coalesce(sum(images_dropped), 0)::BIGINT AS images_dropped,
    coalesce(sum(videos_dropped), 0)::BIGINT AS videos_dropped,
    coalesce(sum(alternates_dropped), 0)::BIGINT AS alternates_without_self
FROM classified
WHERE reason IS NULL;
