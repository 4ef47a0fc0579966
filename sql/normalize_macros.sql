-- normalize_macros: normalized_url(u, site_prefix, clean_regex, iri_regex, max_len), the
-- URL rules of normalize_inventory, for the URL and for its canonical URL: a URL the SQL
-- fast path proves clean is kept as it is; one whose path holds only unreserved
-- characters, "/" and non-ASCII is percent-encoded segment by segment (the commonest
-- dirty case); any other goes to the Python UDF check_url (pipeline/urls.py, the
-- reference the two fast paths agree with), which returns the normalised URL or '!reason'.
-- pipeline.load creates it after registering check_url. Parameters: none (the macro's).
CREATE OR REPLACE MACRO normalized_url(u, site_prefix, clean_regex, iri_regex, max_len) AS
    CASE
        WHEN u IS NOT NULL
             AND starts_with(u, site_prefix)
             AND length(u) <= max_len
             AND regexp_full_match(u, clean_regex)
        THEN u
        WHEN starts_with(u, site_prefix) AND regexp_full_match(u, iri_regex)
        THEN site_prefix || array_to_string(list_transform(
                 string_split(substr(u, length(site_prefix) + 1), '/'),
                 lambda seg: url_encode(seg)), '/')
        ELSE check_url(u, site_prefix)
    END;
