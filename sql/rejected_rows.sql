-- rejected_rows: the rows of one group of load's files that load rejected, with their
-- reason code, the original URL as it came in and the reject's detail: the value that
-- caused it, `name=value` (the duplicates among them are duplicate_rejects'). The detail
-- of a gate reason is normalize_inventory's gate_detail (the gate columns are not
-- written); of a URL reason pipeline.urls.reject_detail's, the UDF url_reject_detail,
-- called for these rows only (the scheme of not_http, the encoded length of too_long, the
-- host of off_site, ...); NULL when the value is the URL itself. winner_row_id and
-- winner_lastmod are a duplicate's (NULL here). One scan of `normalized`, which reads only
-- the rejected rows' columns; pipeline.load writes them per group, and the load task puts
-- the groups' and the duplicates' together, in row order (rejects.parquet).
-- Reads `normalized`. Parameters: $site_prefix (the site every published URL is under).
SELECT row_id, reason, coalesce(original_url, url) AS url, lastmod, changefreq, priority,
       coalesce(gate_detail,
                CASE WHEN reason IN ('not_http', 'illegal_char', 'bad_percent_encoding',
                                     'too_long', 'off_site')
                     THEN url_reject_detail(reason, coalesce(original_url, url), $site_prefix)
                END) AS detail,
       NULL::BIGINT AS winner_row_id,
       NULL::TIMESTAMPTZ AS winner_lastmod
FROM normalized
WHERE reason IS NOT NULL;
