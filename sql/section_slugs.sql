-- section_slugs: the table `section_slugs` (raw_section, section): each distinct run of the
-- first path segments that name a section (raw_section, cut by normalize_inventory; a
-- site has few) made safe for a file name once: lowercase letters, digits and '-', at
-- most 40 characters. valid_rows joins it back, so no row pays for the slug and no
-- inventory-sized intermediate is built.
-- Reads `section_names` (raw_section): the diff's, its normalised rows without a reason
-- (not `classified`: they hold every valid row, and the duplicates among them add at most
-- a slug no row uses, and it skips a join with the duplicates in each diff partition);
-- load's, the path segments of its counts (pipeline.load.section_slugs: no row read).
-- Parameters: none.
CREATE OR REPLACE TABLE section_slugs AS
SELECT
    raw_section,
    coalesce(nullif(left(trim(regexp_replace(
        strip_accents(lower(url_decode(raw_section))),
        '[^a-z0-9]+', '-', 'g'), '-'), 40), ''), 'root') AS section
FROM (
    SELECT DISTINCT raw_section
    FROM section_names
)
WHERE raw_section <> '';  -- '': no section, 'root' (valid_rows)
