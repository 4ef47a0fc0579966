-- feed_entries: one generation's entries of the recent-changes feed, newest change first.
-- pipeline.notify.feed_entries asks the generations newest first, each for the entries
-- still missing, so the feed costs a top-N of each generation's changes, never a sort of
-- them all. A URL changed in several generations appears once, as of its newest change:
-- a URL that a newer generation lists (added, changed or removed) is left out here, so a
-- URL whose newest change is its removal does not appear at all. `updated` is the URL's
-- lastmod in W3C datetime (UTC), or the generation's time when it has none.
-- Reads `feed_generation` (url, change, lastmod: this generation's changes) and
-- `feed_newer` (url: every URL the newer generations changed).
-- Parameters: $created (the generation's time), $limit (entries returned at most).
SELECT url, change, w3c_time(updated) AS updated
FROM (
    SELECT c.url, c.change, coalesce(c.lastmod::TIMESTAMPTZ, $created::TIMESTAMPTZ) AS updated
    FROM feed_generation AS c
    ANTI JOIN feed_newer AS n USING (url)
    WHERE c.change IN ('added', 'changed')
    ORDER BY updated DESC, c.url
    LIMIT $limit
)
-- formatted after the top-N, for its rows only (before it, every change was formatted)
ORDER BY updated DESC, url;
