-- classified_counts: every count load reports, and the sums of its input rows' hashes, in
-- one scan of `classified`, by reject reason (reason NULL: the rows to publish; duplicate:
-- rows that passed the checks but repeat a URL whose other row publishes,
-- sql/dedupe_rows.sql) and by the path segments that name the row's section:
-- - the rows, and for the rows to publish the optional fields dropped because they were not
--   valid (the row is published without them): an unparseable lastmod, an unknown
--   changefreq, a priority outside 0..1, images past 1,000 per URL, videos missing a
--   required field, hreflang alternates that do not list the URL itself, tags Google no
--   longer uses left out (deprecated_tags, pipeline.extensions); and how many rows gave a
--   lastmod at all;
-- - two sums of the hashes of the input rows (the column pipeline.unchanged.ROW_HASH_COLUMN,
--   NULL when load was not asked for them): of the hashes, and of a hash of each. Their
--   totals are the numbers of the input's identity (pipeline.unchanged.row_sums); by
--   section (pipeline.unchanged.sums_by_section) the rows that passed the checks make the
--   sections' identities, their duplicates summed apart: the same sums of their hashes
--   hashed once more, so that another of a repeated URL's rows publishing changes them;
-- - the newest lastmod (a lastmod after either run's time is clamped to it, which changes
--   the row);
-- - on a first run, the smallest and largest URL (the diff's stats of each section, which it
--   then need not take in a pass of its own: 10M rows, 0.3 s here against 0.9 s there); on
--   other runs `bounded_url` is a NULL constant, which costs nothing.
-- One scan instead of three (the counts, the sums, the duplicates' sums): over 10M rows
-- 0.67-0.96 s instead of 0.83-1.07 s.
-- Reads `counted`: `classified` with `bounded_url`, its URL on a first run, else NULL
-- (pipeline.load). Parameters: none.
SELECT
    reason,
    raw_section,
    count(*) AS rows,
    count(*) FILTER (WHERE lastmod IS NOT NULL OR lastmod_raw_invalid) AS lastmod_given,
    count(*) FILTER (WHERE lastmod_raw_invalid) AS lastmod_invalid,
    count(*) FILTER (WHERE changefreq_invalid) AS changefreq_invalid,
    count(*) FILTER (WHERE priority_invalid) AS priority_invalid,
    coalesce(sum(images_dropped), 0)::BIGINT AS images_dropped,
    coalesce(sum(videos_dropped), 0)::BIGINT AS videos_dropped,
    coalesce(sum(alternates_dropped), 0)::BIGINT AS alternates_without_self,
    coalesce(sum(deprecated_tags), 0)::BIGINT AS deprecated_tags,
    coalesce(sum(_input_row_hash::HUGEINT), 0) AS hash_sum,
    coalesce(sum(hash(_input_row_hash)::HUGEINT), 0) AS hash_hash_sum,
    coalesce(sum(hash(_input_row_hash, 'duplicate')::HUGEINT)
             FILTER (WHERE reason = 'duplicate'), 0) AS tagged_hash_sum,
    coalesce(sum(hash(hash(_input_row_hash, 'duplicate'))::HUGEINT)
             FILTER (WHERE reason = 'duplicate'), 0) AS tagged_hash_hash_sum,
    max(lastmod) AS newest,
    min(bounded_url) AS min_url,
    max(bounded_url) AS max_url
FROM counted
GROUP BY reason, raw_section
ORDER BY reason NULLS FIRST, raw_section;
