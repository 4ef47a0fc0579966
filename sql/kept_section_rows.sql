-- kept_section_rows: the live snapshot's rows of the sections a run left out as unchanged
-- (pipeline.unchanged): their rows, shards and times are those of the live generation, so
-- the new snapshot takes them as they are, with each section as the code the snapshot's
-- writer takes (pipeline.snapshot), not as text.
-- Reads `previous_rows` (the live snapshot) and `kept_sections` (section, section_code).
-- Parameters: none.
SELECT p.url, k.section_code, p.shard, p.fingerprint, p.lastmod, p.first_seen,
       p.last_changed
FROM previous_rows p
JOIN kept_sections k ON p.section = k.section;
