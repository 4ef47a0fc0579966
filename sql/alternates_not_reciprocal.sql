-- alternates_not_reciprocal: how many published pages name, among their hreflang alternates,
-- another page of the inventory that does not name them back. Google ignores an annotation
-- that is not confirmed from the other page; the links are still written (Google's own
-- check), this count tells the site which sets to fix (dropped_fields).
-- Reads `classified` (the rows to publish: reason NULL) and `inventory_raw` (the
-- `alternates` column, joined by row id). Only the written sets (those that list their own
-- page) are exploded.
-- Parameters: none.
WITH pairs AS (
    SELECT c.url AS page, x.href
    FROM (SELECT _row_id AS row_id, unnest(list_transform(alternates, lambda a: a.href)) AS href
          FROM inventory_raw
          -- a set that does not list its page is not written (alternates_without_self)
          WHERE list_contains(list_transform(alternates, lambda a: a.href), url)) x
    JOIN classified c USING (row_id)
    WHERE c.reason IS NULL AND x.href IS NOT NULL AND x.href <> c.url
),
members AS (
    SELECT p.page, p.href
    FROM pairs p
    JOIN classified m ON m.url = p.href AND m.reason IS NULL
)
SELECT count(DISTINCT page)
FROM members m
WHERE NOT EXISTS (SELECT 1 FROM pairs b WHERE b.page = m.href AND b.href = m.page);
