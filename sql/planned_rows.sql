-- planned_rows: the rows of every plan group written this run, in file order: by group
-- (numbered in section order), then by URL. Groups whose shard is already published
-- unchanged (`reused`) are left out; a repacked group is cut into shards afterwards at row
-- positions (pipeline.plan), so each shard is a run of consecutive rows of the part.
-- The sort carries as little as it can, since moving its rows costs more than comparing
-- them: the URL without its group's common prefix, the changefreq as a one-byte ENUM, NULL
-- for a first run's times and for an empty `ext`; all are put back after it.
-- Reads `assigned`, `shard_groups` (made by pipeline.plan) and the type `planned_section`.
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
