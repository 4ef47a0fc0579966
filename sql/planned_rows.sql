-- planned_rows: the rows of every plan group that is written this run, in file order:
-- by group (groups are numbered in section order), then by URL. A group that is
-- repacked is cut into shards afterwards, at row positions (pipeline.plan), so each
-- shard is a run of consecutive rows of the part; a group kept as it is, is one shard.
-- Groups whose shard is already published unchanged (`reused`) are left out: render
-- skips them and the snapshot takes their rows from the diff (reused_rows).
-- The sort carries as little as it can, since moving its rows costs more than comparing
-- them: each URL without the prefix all URLs of its group share (the first g.skip
-- characters, $prefixes[group_id + 1], put back after the sort), the fields the line is
-- made of and the state's; the section ($sections[group_id + 1]) and the line's measures
-- (url_line.sql) are computed after it. 10M URLs: 7.3 s instead of 10.5 s here. A first
-- run's rows were all first seen and changed at its time ($first_run_time): the sort
-- carries NULL for those three columns, which are put back after it (10M URLs: plan
-- 0.3-0.4 s faster); it carries the changefreq as an ENUM of the values load lets through
-- (pipeline.limits.CHANGEFREQ_VALUES), one byte instead of a 16-byte string (0.2-0.3 s),
-- and writes it so (the part holds its text, which every reader sees; its measures are
-- taken of the text): 10M rows' write 0.2 s of CPU less than the text's;
-- and NULL for `ext` when no row has extension XML ($ext_empty), '' again after it (the
-- part then leaves the column out: pipeline.plan; render puts '' back).
-- Reads `assigned` and `shard_groups` (section, base_shard, group_id, reused, skip, made by
-- pipeline.plan; group_id of the narrowest integer type, which the sort's key begins
-- with) and the type `planned_section` (sql/planned_section_type.sql, of $sections).
-- Parameters: $prefixes and $sections (VARCHAR[], by group_id + 1), $format and
-- $ns_markers (as assigned_rows), $first_run_time (TIMESTAMPTZ; NULL but on a first run),
-- $ext_empty (BOOLEAN: every row's ext is '').
WITH sorted AS (
    SELECT
        g.group_id,
        -- The URLs of a group share their first g.skip characters: comparing what follows
        -- orders them the same, and much faster (DuckDB's sort keys begin with a string's
        -- prefix; a short string is held inline).
        substr(a.url, g.skip + 1) AS url_rest,
        a.lastmod,
        a.changefreq::ENUM('always', 'hourly', 'daily', 'weekly', 'monthly', 'yearly', 'never')
            AS changefreq_code,
        a.priority,
        CASE WHEN NOT $ext_empty THEN a.ext END AS ext_or_null,
        a.fingerprint,
        CASE WHEN $first_run_time IS NULL THEN a.changed END AS changed_or_null,
        CASE WHEN $first_run_time IS NULL THEN a.first_seen END AS first_seen_or_null,
        CASE WHEN $first_run_time IS NULL THEN a.last_changed END AS last_changed_or_null
    FROM assigned a
    JOIN shard_groups g
      ON a.section = g.section AND a.base_shard IS NOT DISTINCT FROM g.base_shard
    WHERE NOT g.reused
    ORDER BY g.group_id, url_rest
),
-- A projection of the sorted rows keeps their order.
whole AS (
    SELECT
        *,
        $prefixes[group_id::INTEGER + 1] || url_rest AS url,
        changefreq_code::VARCHAR AS changefreq_text,
        coalesce(ext_or_null, '') AS ext,
        coalesce(changed_or_null, $first_run_time IS NOT NULL) AS changed,
        coalesce(first_seen_or_null, $first_run_time::TIMESTAMPTZ) AS first_seen,
        coalesce(last_changed_or_null, $first_run_time::TIMESTAMPTZ) AS last_changed
    FROM sorted
)
SELECT
    group_id,
    ($sections::planned_section[])[group_id::INTEGER + 1] AS section,
    url,
    lastmod,
    changefreq_code AS changefreq,
    priority,
    ext,
    line_bytes($format, url, lastmod, changefreq_text, priority, ext) AS line_bytes,
    line_hash($format, url, lastmod, changefreq_text, priority, ext) AS row_hash,
    line_namespaces($format, ext, $ns_markers) AS ns,
    changed,
    fingerprint,
    first_seen,
    last_changed
FROM whole;
