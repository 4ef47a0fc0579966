-- diff_counts: added, changed, unchanged and removed counts, and clamped lastmods.
-- Reads `diffed` and `changes` (changed_rows, already written: its removed rows are
-- counted there, so the snapshot is not anti-joined twice). Parameters: none.
SELECT
    count(*) FILTER (WHERE status = 'added') AS added,
    count(*) FILTER (WHERE status = 'changed') AS changed,
    count(*) FILTER (WHERE status = 'unchanged') AS unchanged,
    (SELECT count(*) FROM changes WHERE change = 'removed') AS removed,
    count(*) FILTER (WHERE lastmod_clamped) AS lastmod_clamped,
    count(*) FILTER (WHERE is_news) AS news_articles
FROM diffed;
