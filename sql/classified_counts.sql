-- classified_counts: every count load reports, in one scan of `classified` (one scan
-- instead of three), by reject reason (NULL: the rows to publish; duplicate: rows whose URL
-- another row publishes) and by the path segments that name the row's section: the rows,
-- the optional fields dropped as invalid, how many rows gave a lastmod, the newest lastmod,
-- two sums of the input rows' hashes (the input's and each section's identity,
-- pipeline.unchanged; duplicates summed apart), and on a first run each section's smallest
-- and largest URL, so the diff needs no pass of its own.
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
    coalesce(sum(extension_fields_invalid), 0)::BIGINT AS extension_fields_invalid,
    coalesce(sum(news_dropped), 0)::BIGINT AS news_dropped,
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
