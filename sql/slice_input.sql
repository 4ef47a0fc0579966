-- slice_input: every diffed row with the plan slice it belongs to, for splitting the
-- diffed rows once when the plan has many slices (pipeline.plan.prepare): each slice then
-- reads its own rows instead of scanning every row for them (diffed_slice: the input read
-- once per slice).
-- A slice holds whole sections, or one section's URLs in [lo, hi): the same rule as
-- diffed_slice. Reads `diffed_all` and `slice_ranges` (slice, section, lo, hi: one row per
-- section of a slice). Parameters: none.
SELECT d.*, r.slice
FROM diffed_all d
JOIN slice_ranges r
  ON d.section = r.section
 AND (r.lo IS NULL OR d.url >= r.lo)
 AND (r.hi IS NULL OR d.url < r.hi);
