-- reject_examples: a few rejected rows of each of some reasons, the first by row id, for
-- the reject guard's error (the rows the refused run left out, as the rejects Parquet has
-- them). Reads `rejects`.
-- Parameters: $reasons (VARCHAR[]: the reasons to show), $per_reason (BIGINT >= 1).
SELECT reason, row_id, url
FROM rejects
WHERE list_contains($reasons, reason)
QUALIFY row_number() OVER (PARTITION BY reason ORDER BY row_id) <= $per_reason
ORDER BY reason, row_id;
