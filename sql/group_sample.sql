-- group_sample: one group's sample of its valid URLs for plan's cuts (a first run): about
-- one row in $every, chosen as sql/sample_urls.sql chooses them (by a hash of the URL, so the
-- same rows whatever the cut into groups and threads), with the path segments their section
-- is named from. A URL's duplicates have its URL and segments: DISTINCT keeps it once, as
-- the deduplicated rows hold it. Reads `normalized`. Parameters: $every (BIGINT >= 1).
SELECT DISTINCT raw_section, url
FROM normalized
WHERE reason IS NULL AND hash(url) % $every = 0;
