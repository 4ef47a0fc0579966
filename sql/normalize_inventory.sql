-- normalize_inventory: one row per input row, its URL normalised or a reject reason;
-- pipeline.load streams it to normalized.parquet (it is never held in memory whole).
-- Reads the view `inventory_typed` (url, lastmod, changefreq, priority, content_hash,
-- row_id, the indexability columns http_status, canonical_url, noindex, redirect_to, the
-- extensions), built by pipeline.load from code constants after the schema check; the
-- macro normalized_url (normalize_macros.sql) holds the URL rules.
-- Parameters: $site_prefix (scheme://host/path/ every published URL starts with),
-- $clean_regex (URLs that need no normalisation), $iri_regex (URLs whose path
-- holds only unreserved characters, "/" and non-ASCII: encoded here segment by
-- segment, the commonest dirty case), $max_len (longest <loc>), $max_line_bytes (the
-- longest <url> line any file can hold; NULL for plain-text sitemaps, which carry no
-- extensions) and $ext_budget (extension bytes below which no line can be that long).
-- Indexability gate: a valid URL whose http_status is not 200, that redirects, is noindex
-- or names another (normalised) URL as canonical is rejected as not_200, redirect,
-- noindex or not_canonical, in that order; a bad URL keeps its own reason. Such a row's
-- gate_detail is the gate column's value that rejected it (http_status=404,
-- redirect_to=..., noindex=true, canonical_url=... as given): the gate columns are not
-- written, so the rejects' detail (rejected_rows.sql) comes from here; NULL on every other
-- row. A row left
-- whose <url> line (with its extensions' XML) no sitemap file can hold is rejected as
-- too_large. A row with a string that is not UTF-8 (invalid_utf8, set by
-- pipeline.load.clean_utf8) is rejected first.
WITH checked AS (
    SELECT
        *,
        normalized_url(url, $site_prefix, $clean_regex, $iri_regex, $max_len) AS encoded_url,
        -- a canonical URL given as the URL itself needs no work; another one is normalised
        -- by the same rules before it is compared
        CASE
            WHEN canonical_url IS NULL OR trim(canonical_url) = '' THEN NULL
            WHEN canonical_url = url THEN '='
            ELSE normalized_url(canonical_url, $site_prefix, $clean_regex, $iri_regex, $max_len)
        END AS canonical_checked
    FROM inventory_typed
),
checked_length AS (
    SELECT
        *,
        CASE WHEN length(encoded_url) > $max_len THEN '!too_long' ELSE encoded_url END
            AS valid_url,
        -- the news element the diff may add (NULL without a valid article)
        CASE WHEN news_name IS NOT NULL AND news_language IS NOT NULL AND news_date IS NOT NULL
                  AND news_title IS NOT NULL
             THEN news_element(news_name, news_language, news_date, news_title)
        END AS news_bytes_xml
    FROM checked
),
-- the indexability gate: a valid URL the site itself says is not to be indexed
gated AS (
    SELECT
        *,
        CASE
            WHEN invalid_utf8 THEN '!invalid_utf8'
            WHEN starts_with(valid_url, '!') THEN valid_url
            WHEN http_status <> 200 THEN '!not_200'
            WHEN redirect_to IS NOT NULL AND trim(redirect_to) <> '' THEN '!redirect'
            WHEN noindex THEN '!noindex'
            WHEN canonical_checked <> '=' AND canonical_checked <> valid_url THEN '!not_canonical'
            WHEN line_too_large(valid_url, changefreq, priority, ext_xml, news_bytes_xml,
                                strlen(ext_xml) + coalesce(strlen(news_bytes_xml), 0),
                                $ext_budget, $max_line_bytes) THEN '!too_large'
            ELSE valid_url
        END AS checked_url
    FROM checked_length
)
SELECT
    row_id,
    -- kept only where it differs from the URL published (rejected or normalised rows)
    CASE WHEN checked_url IS DISTINCT FROM url THEN url END AS original_url,
    CASE WHEN NOT starts_with(checked_url, '!') THEN checked_url END AS url,
    -- hash(url), written once: dedupe's passes and the diff's join read these 8 bytes,
    -- not the URL's text
    CASE WHEN NOT starts_with(checked_url, '!') THEN hash(checked_url) END AS url_hash,
    CASE WHEN starts_with(checked_url, '!') THEN substr(checked_url, 2) END AS reason,
    CASE checked_url
        WHEN '!not_200' THEN reject_detail('http_status', http_status)
        WHEN '!redirect' THEN reject_detail('redirect_to', redirect_to)
        WHEN '!noindex' THEN 'noindex=true'
        WHEN '!not_canonical' THEN reject_detail('canonical_url', canonical_url)
    END AS gate_detail,
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
    -- the extensions' columns as load made them (pipeline.extensions.extension_columns:
    -- ext_xml, a drop counter per extension, deprecated_tags, the news fields): every
    -- column of inventory_typed and of the steps above that is not named here
    * EXCLUDE (url, row_id, invalid_utf8, lastmod, lastmod_raw_invalid, changefreq,
               changefreq_invalid, priority, priority_invalid, content_hash, http_status,
               canonical_url, noindex, redirect_to, encoded_url, canonical_checked, valid_url,
               checked_url, news_bytes_xml)
FROM gated;
