-- realistic_inventory: $urls rows of a large shop's inventory for the benchmark (bench/inventory.py;
-- its word lists in bench/realistic_macros.sql). Longer, deeper, dirtier URLs than
-- sql/demo_inventory.sql, all on $site: catalogue paths (section / subcategory / [group /]
-- slug-id), dated news (/news/YYYY/MM/DD/slug-id), user pages (/u/name), root-level pages; one
-- section of about 30%, a tail of about 20; about 8% of URLs with `&` or `'`, 4% raw UTF-8, 5%
-- percent-encoded slugs, some query strings, 1% long slugs (a tail to 300+ characters); lastmod
-- as W3C strings over eleven years (some date-only, some null), changefreq and priority (some
-- null); about 2.5% of rows the pipeline rejects (duplicate, off_site, not_http, too_long,
-- illegal_char, bad_percent_encoding, empty).
-- Every choice is a hash of (src, $seed, tag): vectorised, no random(); with insertion order
-- preserved, the same Parquet for the same $seed and $urls. A duplicate row (1%) takes the URL
-- of a row `src` up to 1,000 rows earlier; every other row is its own `src`.
-- The row numbers come from the table inv_ids (i: 0 .. $urls - 1; bench/inventory.py creates
-- it): a table is scanned on every thread, range() on one (2M rows, the query alone: 0.9 s
-- against 1.9 s of wall time on 2 cores).
-- Parameters: $seed, $site (no trailing slash, e.g. https://www.example.com).
WITH
picks AS (
    -- three hashes a row, cut into independent fields (a hash is most of a row's cost)
    SELECT
        src,
        ha % 10000 AS kind,                 -- reject kinds (1.5%), page types
        (ha >> 14) % 1000 AS flavour,       -- UTF-8 / percent / apostrophe slug
        (ha >> 24) % 1000 AS query,
        (ha >> 34) % 1000 AS len,
        (ha >> 44) % 1000 AS lm,
        -- the catalogue's section: u^3.2 over 18, so that the first ('products') holds about
        -- 41% of the catalogue (30% of all rows) and the last about 2%
        least(17, floor(18 * pow((hb % 1000000) / 1e6, 3.2)))::BIGINT AS k,
        -- last modified up to eleven years before 2026-12-01, most of them recently
        TIMESTAMP '2026-12-01 00:00:00'
            - to_seconds((pow(((hb >> 20) % 1000000) / 1e6, 2) * 11 * 365 * 86400)::BIGINT) AS ts,
        hw                                  -- 63 bits for the words
    FROM (
        SELECT src, (hash(src, $seed, 'a') >> 1)::BIGINT AS ha,
               (hash(src, $seed, 'b') >> 1)::BIGINT AS hb,
               (hash(src, $seed, 'w') >> 1)::BIGINT AS hw
        FROM (
            SELECT CASE WHEN hd % 1000 < 10 THEN greatest(0, i - 1 - (hd >> 10) % 1000)
                        ELSE i END AS src
            FROM (SELECT i, (hash(i, $seed, 'dup') >> 1)::BIGINT AS hd FROM inv_ids)
        )
    )
),
slugs AS (
    SELECT
        *,
        -- 2 to 6 words; 1% of 14-40 words (the tail of long URLs)
        concat(
            inv_word(hw), '-', inv_word(hw >> 6),
            CASE WHEN len % 5 >= 1 THEN '-' || inv_word(hw >> 12) END,
            CASE WHEN len % 5 >= 2 THEN '-' || inv_word(hw >> 18) END,
            CASE WHEN len % 5 >= 3 THEN '-' || inv_word(hw >> 24) END,
            CASE WHEN len % 5 >= 4 THEN '-' || inv_word(hw >> 30) END,
            CASE WHEN len >= 990
                 THEN repeat('-' || inv_word(hw >> 36) || '-' || inv_word(hw >> 42),
                             (6 + len % 14)::BIGINT) END,
            CASE WHEN flavour < 42 THEN '-' || inv_utf8(hw >> 50)
                 WHEN flavour < 95 THEN '-' || inv_percent(hw >> 50)
                 WHEN flavour < 125 THEN '-' || inv_apostrophe(hw >> 50) END,
            '-', src) AS slug,
        CASE WHEN query < 55 THEN concat('?color=', inv_word(hw >> 44), '&size=', (hw >> 56) % 12)
             WHEN query < 75 THEN concat('?page=', 2 + (hw >> 44) % 30) END AS qs
    FROM picks
),
urls AS (
    SELECT
        *,
        CASE
            -- rejects (1.5%; the duplicates are another 1%)
            WHEN kind < 50 THEN concat('https://shop.example.net/products/', slug)    -- off_site
            WHEN kind < 70 THEN concat('https://example.com/products/', slug)         -- off_site
            WHEN kind < 95 THEN concat('ftp://www.example.com/files/', slug)          -- not_http
            WHEN kind < 105 THEN concat('mailto:help-', src, '@example.com')          -- not_http
            WHEN kind < 120 THEN concat($site, '/search?q=', repeat('filter-', 300), src) -- too_long
            WHEN kind < 130 THEN concat($site, '/products/', slug, chr(9), 'x')       -- illegal_char
            WHEN kind < 142 THEN concat($site, '/deals/', slug, '-100%-off')          -- bad_percent
            WHEN kind < 150 THEN CASE WHEN kind % 2 = 1 THEN '  ' END                 -- empty
            -- root-level pages (10%)
            WHEN kind < 1150 THEN concat($site, '/', inv_root(hw >> 40), '-', slug, qs)
            -- dated news (9%)
            WHEN kind < 2050 THEN concat($site, '/news/', strftime(ts, '%Y/%m/%d'), '/', slug, qs)
            -- user pages (6%)
            WHEN kind < 2650 THEN concat($site, '/u/', inv_word(hw >> 30), '_',
                                         inv_word(hw >> 36), src, qs)
            -- the catalogue (73.5%): 'products' or one of the tail
            WHEN k = 0 THEN concat($site, '/products/', inv_sub(hw >> 20), '/', slug, qs)
            ELSE concat($site, '/', inv_section(k), '/', inv_sub(hw >> 20),
                        CASE WHEN (hw >> 26) % 3 = 0 THEN '/' || inv_group(hw >> 28) END,
                        '/', slug, qs)
        END AS url
    FROM slugs
)
SELECT
    url,
    CASE WHEN lm < 120 THEN NULL                                        -- no lastmod (12%)
         WHEN lm < 300 THEN strftime(ts, '%Y-%m-%d')                    -- date only (18%)
         WHEN lm < 900 THEN strftime(ts, '%Y-%m-%dT%H:%M:%SZ')
         ELSE strftime(ts, '%Y-%m-%dT%H:%M:%S') || '+01:00' END AS lastmod,
    CASE WHEN lm % 10 < 4 THEN NULL ELSE inv_changefreq(hw >> 12) END AS changefreq,
    CASE WHEN lm % 7 < 3 THEN NULL
         ELSE round(((hw >> 16) % 10 + 1) / 10.0, 1) END AS priority
FROM urls
