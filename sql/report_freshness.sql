-- report_freshness: per section of one generation's snapshot, its URLs, the newest lastmod
-- and how many URLs changed (their lastmod) in the 24 hours and the 7 days up to the
-- generation's time. Reads `report_snapshot` (section, lastmod: the snapshot's rows).
-- Parameters: $at (the generation's time).
SELECT section,
       count(*) AS urls,
       strftime(max(lastmod)::TIMESTAMPTZ, '%Y-%m-%dT%H:%M:%SZ') AS newest,
       count(*) FILTER (WHERE lastmod::TIMESTAMPTZ > $at::TIMESTAMPTZ - INTERVAL 1 DAY)
           AS changed_24h,
       count(*) FILTER (WHERE lastmod::TIMESTAMPTZ > $at::TIMESTAMPTZ - INTERVAL 7 DAY)
           AS changed_7d
FROM report_snapshot
GROUP BY section
ORDER BY urls DESC, section;
