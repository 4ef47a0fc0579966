-- planned_rows: every row with its final shard number, in file order.
-- Reads `packed` and `shard_numbers` (group_id, sub, shard, made by pipeline.plan).
-- Parameters: none.
SELECT p.section, n.shard, p.url, p.lastmod,
       url_line(p.url, p.lastmod, p.changefreq, p.priority, p.ext) AS line, p.line_bytes, p.fingerprint,
       p.first_seen, p.last_changed, p.status
FROM packed p
JOIN shard_numbers n USING (group_id, sub)
ORDER BY p.section, n.shard, p.url;
