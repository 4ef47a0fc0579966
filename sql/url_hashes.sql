-- url_hashes: the 64-bit hash of every normalised URL (normalize_inventory's url_hash) of
-- one group of load's partitions, in dedupe pass $pass of $passes; pipeline.load sorts
-- each pass in numpy to find the hashes that repeat (dedupe_rows).
-- Reads `dedupe_group` (the group's rows: whole partitions, so every copy of a URL is in
-- it). Rule: a pass takes (url_hash // $split) % $passes = $pass, the hash above the part
-- that chose the diff partition (url_hash % $split), so that the passes over one
-- partition share its rows evenly; rejects (no url_hash) are in no pass.
-- Parameters: $pass (0 .. $passes - 1), $passes (at least 1), $split (load's diff
-- partitions, 1 when not cut by them).
SELECT url_hash
FROM dedupe_group
WHERE (url_hash // $split::UBIGINT) % $passes::UBIGINT = $pass::UBIGINT;
