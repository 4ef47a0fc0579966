-- normalize_inventory: one row per input row, its URL normalised or a reject reason;
-- pipeline.load streams it to normalized.parquet (it is never held in memory whole).
-- Reads the view `inventory_typed` (url, lastmod, changefreq, priority, content_hash,
-- row_id), built by pipeline.load from code constants after the schema check.
-- Parameters: $site_prefix (scheme://host/path/ every published URL starts with),
-- $clean_regex (URLs that need no normalisation), $iri_regex (URLs whose path
-- holds only unreserved characters, "/" and non-ASCII: encoded here segment by
-- segment, the commonest dirty case), $max_len (longest <loc>).
-- Other rows go to the Python UDF check_url (pipeline/urls.py, the reference
-- the two fast paths agree with), which returns the normalised URL or '!reason'.
WITH checked AS (
    SELECT
        *,
        CASE
            WHEN url IS NOT NULL
                 AND starts_with(url, $site_prefix)
                 AND length(url) <= $max_len
                 AND regexp_full_match(url, $clean_regex)
            THEN url
            WHEN starts_with(url, $site_prefix) AND regexp_full_match(url, $iri_regex)
            THEN $site_prefix || array_to_string(list_transform(
                     string_split(substr(url, length($site_prefix) + 1), '/'),
                     lambda seg: url_encode(seg)), '/')
            ELSE check_url(url, $site_prefix)
        END AS encoded_url
    FROM inventory_typed
),
checked_length AS (
    SELECT
        *,
        CASE WHEN length(encoded_url) > $max_len THEN '!too_long' ELSE encoded_url END
            AS checked_url
    FROM checked
)
SELECT
    row_id,
    -- kept only where it differs from the URL published (rejected or normalised rows)
    CASE WHEN checked_url IS DISTINCT FROM url THEN url END AS original_url,
    CASE WHEN NOT starts_with(checked_url, '!') THEN checked_url END AS url,
    CASE WHEN starts_with(checked_url, '!') THEN substr(checked_url, 2) END AS reason,
    -- the path segments that name the row's section (slugged once per distinct value, by
    -- section_slugs): cut here, where the row is read anyway; meaningless on a reject
    raw_section(checked_url, $site_prefix, $section_depth) AS raw_section,
    lastmod,
    lastmod_raw_invalid,
    changefreq,
    changefreq_invalid,
    priority,
    priority_invalid,
    content_hash,
    ext_xml,
    images_dropped,
    videos_dropped,
    alternates_dropped,
    news_name,
    news_language,
    news_date,
    news_title
FROM checked_length;
