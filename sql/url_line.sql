-- url_line: the macro that renders one <url> entry of a sitemap, newline included.
-- Used twice: by assign_shards for its exact byte length, by planned_rows for the file.
-- <loc> is escaped only where needed: after normalisation only & and ' can occur,
-- the other three are escaped anyway as a guard. lastmod is UTC to the second.
CREATE OR REPLACE MACRO url_line(url, lastmod, changefreq, priority) AS
    '<url><loc>'
    || CASE
           WHEN contains(url, '&') OR contains(url, '''') OR contains(url, '<')
                OR contains(url, '>') OR contains(url, '"')
           THEN replace(replace(replace(replace(replace(url,
                    '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), '''', '&apos;'), '"', '&quot;')
           ELSE url
       END
    || '</loc>'
    || coalesce('<lastmod>' || strftime(lastmod, '%Y-%m-%dT%H:%M:%SZ') || '</lastmod>', '')
    || coalesce('<changefreq>' || changefreq || '</changefreq>', '')
    || coalesce('<priority>' || rtrim(rtrim(printf('%.3f', priority), '0'), '.')
                || '</priority>', '')
    || '</url>' || chr(10);
