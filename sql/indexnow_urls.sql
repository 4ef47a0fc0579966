-- indexnow_urls: the URLs of one generation to submit to IndexNow, each once, sorted.
-- Added, changed and removed URLs all count: IndexNow tells a search engine to
-- re-crawl, and a removed URL's new answer (404/410) is news too.
-- Reads `generation_changes` (url, change, lastmod). Parameters: none.
SELECT DISTINCT url
FROM generation_changes
WHERE change IN ('added', 'changed', 'removed') AND url IS NOT NULL
ORDER BY url;
