-- removed_rows: the snapshot rows of this diff partition that no diffed row matches: the
-- URLs this run removes, in changed_rows' columns (changes for feeds and IndexNow).
-- A removed URL is a snapshot row no diffed row matches on the two 64-bit URL hashes
-- diff_rows joins on: the same match as the diff's, and a hash table of two integers a
-- row instead of the URLs' text. pipeline.diff runs it
-- only when the partition's snapshot rows outnumber its matched rows (previous_partition_rows).
-- Reads `diffed` and `previous_rows`. Parameters: none.
SELECT url, 'removed' AS change, NULL::TIMESTAMPTZ AS lastmod
FROM previous_rows p
ANTI JOIN (SELECT hash(url) AS url_key, hash('#' || url) AS url_check FROM diffed) d
    ON hash(p.url) = d.url_key AND hash('#' || p.url) = d.url_check;
