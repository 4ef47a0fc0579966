-- sample_urls: a deterministic sample of the URLs of large new sections, about one
-- row in $every (by a hash of the URL, so the same rows whatever the thread count),
-- sorted; plan cuts such a section at the sample's quantiles. Only the sampled
-- rows are sorted. Reads `diffed_all`.
-- Parameters: $sections (VARCHAR[]: the sections to sample), $every (BIGINT >= 1).
SELECT section, url
FROM diffed_all
WHERE list_contains($sections, section) AND hash(url) % $every = 0
ORDER BY section, url;
