-- diff_rows: each valid row against the last published snapshot, with its truthful lastmod.
-- Reads the views `current_rows` (valid rows of this run) and `previous_rows` (the
-- live generation's snapshot; empty on a first run).
-- fingerprint: a 64-bit hash of content_hash (or, without one, of the sitemap payload:
-- url, changefreq, priority, extensions) and the inventory's own lastmod to the second,
-- so either changing counts. A snapshot written before fingerprints were hashes holds
-- md5 hex strings (previous_rows.legacy_fingerprint, pipeline.diff.register_snapshot):
-- those rows are compared by the md5 of the same payload, once, and the new snapshot
-- stores hashes.
-- lastmod: the inventory's value where given (one in the future is clamped to
-- $run_time and flagged); otherwise the time the fingerprint last changed, which
-- is $run_time for an added or changed row and the previous lastmod for an
-- unchanged one. Everything is truncated to the second.
-- News: a row whose news article was published within $news_max_age_days of
-- $run_time gets its <news:news> element and moves to the $news_section section
-- (the news sitemaps); older articles stay in their own section, without it.
-- ext: the entry's extension XML (from load) plus the news element.
-- Parameters: $run_time (TIMESTAMPTZ, the run's logical time), $news_section,
-- $news_max_age_days, $with_news (false for plain-text sitemaps, which have no news).
WITH cur AS (
    SELECT
        *,
        CASE WHEN content_hash IS NOT NULL
             THEN hash('content_hash', content_hash, utc_second(lastmod))
             ELSE hash('payload', url, changefreq, priority, ext_xml, utc_second(lastmod))
        END AS fingerprint,
        coalesce(lastmod > $run_time, false) AS lastmod_clamped,
        CASE WHEN $with_news AND news_date BETWEEN $run_time - to_days($news_max_age_days) AND $run_time
                  AND news_name IS NOT NULL AND news_language IS NOT NULL
                  AND news_title IS NOT NULL
             THEN news_element(news_name, news_language, news_date, news_title)
        END AS news_xml
    FROM current_rows
),
-- The snapshot side of the join, narrow: a URL is matched by two independent 64-bit hashes
-- (of the URL, and of it behind a prefix) instead of its text, so the hash table built on
-- the snapshot holds about 100 bytes a row and fits DuckDB's memory without spilling
-- (pipeline.diff builds on this side). Two different URLs would have to collide on both
-- hashes (odds about n^2 / 2^129) to be taken for one.
prev AS (
    SELECT
        hash(url) AS url_key,
        hash('#' || url) AS url_check,
        section,
        shard,
        fingerprint,
        legacy_fingerprint,
        lastmod,
        first_seen,
        last_changed
    FROM previous_rows
),
joined AS (
    SELECT
        c.*,
        p.url_key IS NOT NULL AS seen_before,
        p.fingerprint AS prev_fingerprint,
        CASE WHEN p.legacy_fingerprint IS NOT NULL
             THEN p.legacy_fingerprint <> md5(concat_ws('|',
                 coalesce(c.content_hash,
                          concat_ws('|', c.url, c.changefreq, c.priority::VARCHAR, c.ext_xml)),
                 strftime(c.lastmod, '%Y-%m-%dT%H:%M:%S')))
        END AS legacy_changed,
        p.lastmod AS prev_lastmod,
        p.first_seen AS prev_first_seen,
        p.last_changed AS prev_last_changed,
        CASE WHEN p.section = c.section THEN p.shard END AS prev_shard
    FROM cur c
    LEFT JOIN prev p ON c.url_hash = p.url_key AND hash('#' || c.url) = p.url_check
),
-- status is an ENUM: one byte a row to write instead of a string; the Parquet part holds
-- its text, which every reader sees (a VARCHAR).
classified AS (
    SELECT
        *,
        CASE
            WHEN NOT seen_before
                THEN 'added'::ENUM('added', 'changed', 'unchanged')
            WHEN coalesce(legacy_changed, prev_fingerprint <> fingerprint)
                THEN 'changed'::ENUM('added', 'changed', 'unchanged')
            ELSE 'unchanged'::ENUM('added', 'changed', 'unchanged')
        END AS status
    FROM joined
)
SELECT
    url,
    CASE WHEN news_xml IS NOT NULL THEN $news_section ELSE section END AS section,
    coalesce(ext_xml, '') || coalesce(news_xml, '') AS ext,
    news_xml IS NOT NULL AS is_news,
    changefreq,
    priority,
    fingerprint,
    status,
    lastmod_clamped,
    utc_second(CASE
        WHEN lastmod IS NOT NULL THEN least(lastmod, $run_time)
        WHEN status = 'unchanged' THEN prev_lastmod
        ELSE $run_time
    END) AS lastmod,
    coalesce(prev_first_seen, $run_time) AS first_seen,
    CASE WHEN status = 'unchanged' THEN prev_last_changed ELSE $run_time END AS last_changed,
    -- the shard the URL was in when it stays in the same section (news rows: range-assigned)
    CASE WHEN news_xml IS NULL THEN prev_shard END AS prev_shard
FROM classified;
