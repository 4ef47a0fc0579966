-- first_run_sections: a first run's diffed rows per section, in the one pass its diff
-- makes over them (they are not written, pipeline.diffed.DiffedView): the rows, the
-- smallest and largest URL (prepare's section counts and new_section_stats), and the
-- diff's counts of clamped lastmods and news articles.
-- Reads `diffed`. Parameters: none.
SELECT
    section,
    count(*) AS urls,
    min(url) AS min_url,
    max(url) AS max_url,
    count(*) FILTER (WHERE lastmod_clamped) AS lastmod_clamped,
    count(*) FILTER (WHERE is_news) AS news_articles
FROM diffed
GROUP BY section
ORDER BY section;
