-- valid_rows: the rows that will be published, with their section.
-- Reads `classified`. The section is the first $section_depth path segments
-- below the site path, taken only when the path goes on below them (so
-- /about is in 'root' and /product/42 in 'product'), made safe for a file
-- name: lowercase letters, digits and '-', at most 40 characters. The raw
-- segments are cut per row; the slug is made once per distinct value (a site has
-- few), and joined back.
-- Parameters: $site_prefix, $section_depth.
WITH rest AS (
    SELECT
        *,
        split_part(substr(url, length($site_prefix) + 1), '?', 1) AS path
    FROM classified
    WHERE reason IS NULL
),
keyed AS (
    SELECT
        *,
        CASE
            WHEN $section_depth = 1
            THEN CASE WHEN contains(path, '/') THEN split_part(path, '/', 1) END
            WHEN len(string_split(path, '/')) > $section_depth
            THEN array_to_string(string_split(path, '/')[1:$section_depth], '/')
        END AS raw_section
    FROM rest
),
sections AS (
    SELECT
        raw_section,
        coalesce(nullif(left(trim(regexp_replace(
            strip_accents(lower(url_decode(raw_section))),
            '[^a-z0-9]+', '-', 'g'), '-'), 40), ''), 'root') AS section
    FROM (SELECT DISTINCT raw_section FROM keyed WHERE raw_section IS NOT NULL)
)
SELECT
    k.url,
    coalesce(s.section, 'root') AS section,
    k.lastmod,
    k.changefreq,
    k.priority,
    k.content_hash,
    k.ext_xml,
    k.news_name,
    k.news_language,
    k.news_date,
    k.news_title
FROM keyed k
LEFT JOIN sections s ON k.raw_section = s.raw_section;
