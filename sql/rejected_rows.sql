-- rejected_rows: the rows of one group of load's files that load rejected, with their
-- reason code and the original URL as it came in (the duplicates among them are
-- duplicate_rejects'). One scan of `normalized`, which reads only the rejected rows'
-- columns; pipeline.load writes them per group, and the load task puts the groups' and
-- the duplicates' together, in row order (rejects.parquet).
-- Reads `normalized`. Parameters: none.
SELECT row_id, reason, coalesce(original_url, url) AS url, lastmod, changefreq, priority
FROM normalized
WHERE reason IS NOT NULL;
