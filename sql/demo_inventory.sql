-- demo_inventory: a synthetic inventory of $urls rows for `sitemaps demo`.
-- About 20 sections of skewed sizes (section k gets a share falling with k), URLs
-- that need XML escaping (& and '), non-ASCII paths, query strings, lastmods
-- (some as strings), changefreq and priority on part of the rows, and a few
-- rows to reject (off-site, not http, duplicates). Deterministic for a given $urls.
-- Parameters: $urls, $site (e.g. https://www.example.com).
WITH sections AS (
    SELECT * FROM (VALUES
        (0, 'product'), (1, 'category'), (2, 'brand'), (3, 'blog'), (4, 'help'),
        (5, 'store'), (6, 'deal'), (7, 'guide'), (8, 'review'), (9, 'compare'),
        (10, 'gift'), (11, 'recipe'), (12, 'news'), (13, 'event'), (14, 'careers'),
        (15, 'press'), (16, 'outlet'), (17, 'video'), (18, 'lookbook'), (19, 'über-uns')
    ) t(k, name)
),
rows AS (
    SELECT
        i,
        -- squared uniform: section 0 gets about a quarter of the rows, 19 about 1%
        least(19, floor(20 * pow((hash(i, 'section') % 1000000) / 1000000.0, 2)))::INT AS k,
        hash(i, 'kind') % 1000 AS kind
    FROM range($urls) t(i)
)
SELECT
    CASE
        WHEN kind = 0 THEN 'https://elsewhere.example.org/' || s.name || '/' || i
        WHEN kind = 1 THEN 'ftp://www.example.com/files/' || i
        WHEN kind = 2 THEN $site || '/' || s.name || '/item-' || (i - 1)
        ELSE $site || '/' || s.name || '/' || CASE
            WHEN kind < 20 THEN 'café-crème-' || i
            WHEN kind < 30 THEN '日本-' || i
            WHEN kind < 60 THEN 'item-' || i || '?color=red&size=m'
            WHEN kind < 70 THEN 'o''neil-' || i
            ELSE 'item-' || i
        END
    END AS url,
    CASE WHEN kind % 3 = 0 THEN NULL
         ELSE TIMESTAMPTZ '2026-01-01 00:00:00+00'
              + to_seconds((hash(i, 'lastmod') % 28000000)::BIGINT) END AS lastmod,
    CASE WHEN kind % 4 = 0 THEN 'weekly' WHEN kind % 4 = 1 THEN 'daily' END AS changefreq,
    CASE WHEN kind % 5 = 0 THEN round((kind % 10) / 10.0, 1) END AS priority
FROM rows
JOIN sections s USING (k)
ORDER BY i;
