-- valid_rows: the rows that will be published, with their section.
-- Reads `classified` and `section_slugs` (section_slugs.sql). The section is the first
-- section-depth path segments below the site path (`raw_section`, cut by
-- normalize_inventory), taken only when the path goes on below them (so /about is in
-- 'root' and /product/42 in 'product'), as slugged once per distinct value.
-- Parameters: none.
SELECT
    c.url,
    coalesce(s.section, 'root') AS section,
    c.lastmod,
    c.changefreq,
    c.priority,
    c.content_hash,
    c.ext_xml,
    c.news_name,
    c.news_language,
    c.news_date,
    c.news_title,
    c.url_hash
FROM classified c
LEFT JOIN section_slugs s ON c.raw_section = s.raw_section
WHERE c.reason IS NULL;
