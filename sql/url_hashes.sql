-- url_hashes: the 64-bit hash of every normalised URL (normalize_inventory's url_hash) in
-- dedupe pass $pass of $passes (hash % $passes = $pass, so each pass holds about
-- 1/$passes of them); pipeline.load sorts each pass in numpy to find the hashes that
-- repeat (dedupe_rows).
-- Reads `normalized`. Parameters: $pass (0 .. $passes - 1), $passes (at least 1).
SELECT url_hash
FROM normalized
WHERE url_hash % $passes::UBIGINT = $pass::UBIGINT;
