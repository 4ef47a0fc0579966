-- normalize_macros: normalized_url(u, site_prefix, clean_regex, iri_regex, max_len), the
-- URL rules of normalize_inventory, for the URL and for its canonical URL. SQL answers
-- for the URLs it can prove the answer of, the Python UDF check_url (pipeline/urls.py, the
-- reference every branch agrees with) for the rest, which returns the normalised URL or
-- '!reason':
-- 1. a clean URL under the site is kept as it is;
-- 2. one under the site whose path holds only pchars but "%", and non-ASCII (with a clean
--    query or none) gets its path's non-ASCII percent-encoded (the commonest dirty case);
-- 3. a clean URL not under the site is off_site (Python would keep it as it is, then find
--    it off the site), unless its host starts with "." or holds "..", which is bad_host;
-- 4. printable ASCII (nothing to strip, no illegal character) whose scheme is not http or
--    https is not_http, or relative when it has no scheme (RFC 3986 3.1) at all.
-- Branches 2 to 4 exist because each UDF call has a fixed cost and dirty rows are spread
-- thinly over the batches.
-- reject_detail(name, value): a reject's detail, `name=value`, the value cut to 300
-- characters (pipeline.limits.MAX_REJECT_DETAIL) so a long redirect target stays small.
-- pipeline.load creates them after registering check_url. Parameters: none (the macros').

-- iri_path_encoded: a path of iri_regex (pchars but "%", "/" and non-ASCII) with its
-- non-ASCII percent-encoded as UTF-8, as normalize_url encodes it. url_encode encodes all
-- but the unreserved characters: "%2F" and the escapes of sub-delims, ":" and "@" go back
-- to the characters they stand for (the path holds no "%" of its own to mix them up with).
CREATE OR REPLACE MACRO iri_path_encoded(path) AS
    CASE
        WHEN regexp_matches(path, '[!$&''()*+,;=:@]')
        THEN replace(replace(replace(replace(replace(replace(replace(replace(replace(
             replace(replace(replace(replace(replace(url_encode(path),
                 '%2F', '/'), '%21', '!'), '%24', '$'), '%26', '&'), '%27', ''''),
                 '%28', '('), '%29', ')'), '%2A', '*'), '%2B', '+'), '%2C', ','),
                 '%3B', ';'), '%3D', '='), '%3A', ':'), '%40', '@')
        ELSE replace(url_encode(path), '%2F', '/')
    END;

CREATE OR REPLACE MACRO normalized_url(u, site_prefix, clean_regex, iri_regex, max_len) AS
    CASE
        WHEN u IS NOT NULL
             AND starts_with(u, site_prefix)
             AND length(u) <= max_len
             AND regexp_full_match(u, clean_regex)
        THEN u
        WHEN starts_with(u, site_prefix) AND regexp_full_match(u, iri_regex)
        THEN site_prefix
             || iri_path_encoded(split_part(substr(u, length(site_prefix) + 1), '?', 1))
             || CASE WHEN contains(u, '?') THEN substr(u, strpos(u, '?')) ELSE '' END
        WHEN length(u) <= max_len
             AND regexp_full_match(u, clean_regex)
             AND NOT starts_with(split_part(u, '/', 3), '.')
             AND NOT contains(split_part(u, '/', 3), '..')
        THEN '!off_site'
        WHEN regexp_full_match(u, '[!-~]+') AND NOT regexp_matches(u, '^[Hh][Tt][Tt][Pp][Ss]?:')
        THEN CASE WHEN regexp_matches(u, '^[A-Za-z][A-Za-z0-9+.-]*:') THEN '!not_http'
                  ELSE '!relative' END
        ELSE check_url(u, site_prefix)
    END;

CREATE OR REPLACE MACRO reject_detail(name, value) AS
    name || '=' || left(CAST(value AS VARCHAR), 300);
