-- planned_rows: every row with its final shard number, in file order.
-- Reads `packed` and `shard_numbers` (group_id, sub, shard, made by pipeline.plan).
-- Parameters: $format ('xml' or 'txt', as in assign_shards).
SELECT p.section, n.shard, p.url, p.lastmod,
       CASE WHEN $format = 'txt' THEN p.url || chr(10)
            ELSE url_line(p.url, p.lastmod, p.changefreq, p.priority, p.ext) END AS line, p.line_bytes, p.fingerprint,
       p.first_seen, p.last_changed, p.status
FROM packed p
JOIN shard_numbers n USING (group_id, sub)
ORDER BY p.section, n.shard, p.url;
