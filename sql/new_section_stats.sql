-- new_section_stats: group_stats for a first run, where every group is a new section's
-- rows (no base shard) and is repacked: per section, its URL count and its smallest and
-- largest URL (the prefix planned_rows' sort skips), in group_stats' columns. No line is
-- measured here: a repacked group needs only its longest line, which plan reads from the
-- part planned_rows writes, so each row's line bytes, hash and namespaces are computed
-- once, not twice.
-- Reads `diffed` (the slice's rows). Parameters: none.
SELECT
    section,
    NULL::INTEGER AS base_shard,
    count(*) AS urls,
    0::BIGINT AS body_bytes,
    0 AS max_line_bytes,
    0::UBIGINT AS row_hash_xor,
    NULL::TIMESTAMPTZ AS lastmod,
    0 AS ns,
    0 AS changed_rows,
    min(url) AS min_url,
    max(url) AS max_url
FROM diffed
GROUP BY section
ORDER BY section;
