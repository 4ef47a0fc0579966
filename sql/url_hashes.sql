-- url_hashes: the 64-bit hash of every normalised URL in dedupe pass $pass of $passes
-- (hash % $passes = $pass, so each pass holds about 1/$passes of them); pipeline.load
-- sorts each pass in numpy to find the hashes that repeat (dedupe_rows).
-- Reads `normalized`. Parameters: $pass (0 .. $passes - 1), $passes (at least 1).
SELECT hash(url) AS url_hash
FROM normalized
WHERE url IS NOT NULL AND hash(url) % $passes::UBIGINT = $pass::UBIGINT;
