-- normalize_inventory: one row per input row, its URL normalised or a reject reason.
-- Reads the view `inventory_typed` (url, lastmod, changefreq, priority, content_hash,
-- row_id), built by pipeline.load from code constants after the schema check.
-- Parameters: $site_prefix (scheme://host/path/ every published URL starts with),
-- $clean_regex (URLs that need no normalisation), $max_len (longest <loc>).
-- Rows the fast path cannot prove clean go to the Python UDF check_url, which
-- returns the normalised URL or '!reason'.
CREATE OR REPLACE TABLE normalized AS
WITH checked AS (
    SELECT
        *,
        CASE
            WHEN url IS NOT NULL
                 AND starts_with(url, $site_prefix)
                 AND length(url) <= $max_len
                 AND regexp_full_match(url, $clean_regex)
            THEN url
            ELSE check_url(url, $site_prefix)
        END AS checked_url
    FROM inventory_typed
)
SELECT
    row_id,
    url AS original_url,
    CASE WHEN NOT starts_with(checked_url, '!') THEN checked_url END AS url,
    CASE WHEN starts_with(checked_url, '!') THEN substr(checked_url, 2) END AS reason,
    lastmod,
    lastmod_raw_invalid,
    changefreq,
    changefreq_invalid,
    priority,
    priority_invalid,
    content_hash
FROM checked;
