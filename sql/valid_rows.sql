-- valid_rows: the rows that will be published, with their section.
-- Reads `classified`. The section is the first $section_depth path segments
-- below the site path, taken only when the path goes on below them (so
-- /about is in 'root' and /product/42 in 'product'), made safe for a file
-- name: lowercase letters, digits and '-', at most 40 characters.
-- Parameters: $site_prefix, $section_depth.
WITH rest AS (
    SELECT
        *,
        string_split(split_part(substr(url, length($site_prefix) + 1), '?', 1), '/') AS segs
    FROM classified
    WHERE reason IS NULL
)
SELECT
    url,
    CASE
        WHEN len(segs) > $section_depth THEN coalesce(nullif(left(trim(regexp_replace(
            strip_accents(lower(url_decode(array_to_string(segs[1:$section_depth], '/')))),
            '[^a-z0-9]+', '-', 'g'), '-'), 40), ''), 'root')
        ELSE 'root'
    END AS section,
    lastmod,
    changefreq,
    priority,
    content_hash,
    ext_xml,
    news_name,
    news_language,
    news_date,
    news_title
FROM rest;
