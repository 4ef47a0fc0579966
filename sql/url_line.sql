-- url_line: the macros that render one <url> entry of a sitemap, newline included.
-- Used twice: by assign_shards for its exact byte length, by planned_rows for the file.
-- <loc> is escaped only where needed: after normalisation only & and ' can occur,
-- the other three are escaped anyway as a guard. lastmod is UTC to the second.
-- ext is the entry's extension XML (images, videos, hreflang links, news), '' if none.
CREATE OR REPLACE MACRO xml_escape(s) AS
    CASE
        WHEN contains(s, '&') OR contains(s, '''') OR contains(s, '<')
             OR contains(s, '>') OR contains(s, '"')
        THEN replace(replace(replace(replace(replace(s,
                 '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), '''', '&apos;'), '"', '&quot;')
        ELSE s
    END;
CREATE OR REPLACE MACRO w3c_time(t) AS strftime(t, '%Y-%m-%dT%H:%M:%SZ');
CREATE OR REPLACE MACRO url_line(url, lastmod, changefreq, priority, ext) AS
    '<url><loc>' || xml_escape(url) || '</loc>'
    || coalesce('<lastmod>' || w3c_time(lastmod) || '</lastmod>', '')
    || coalesce('<changefreq>' || changefreq || '</changefreq>', '')
    || coalesce('<priority>' || rtrim(rtrim(printf('%.3f', priority), '0'), '.')
                || '</priority>', '')
    || coalesce(ext, '')
    || '</url>' || chr(10);
