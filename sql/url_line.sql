-- url_line: the macros that render one <url> entry of a sitemap, newline included, and
-- the one that cuts a URL's section (raw_section, at the end).
-- render builds each line once, from the planned rows; plan budgets bytes with
-- url_line_bytes (below), which must agree with it to the byte.
-- <loc> is escaped only where needed, and only & and ' (loc_escape). lastmod is UTC to
-- the second. ext is the entry's extension XML (images, videos, hreflang links, news), ''
-- if none.
CREATE OR REPLACE MACRO xml_escape(s) AS
    CASE
        WHEN contains(s, '&') OR contains(s, '''') OR contains(s, '<')
             OR contains(s, '>') OR contains(s, '"')
        THEN replace(replace(replace(replace(replace(s,
                 '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), '''', '&apos;'), '"', '&quot;')
        ELSE s
    END;
-- loc_escape: a published URL as <loc> text. Load's normalisation percent-encodes every
-- character but A-Z a-z 0-9 - . _ ~ ! $ & ' ( ) * + , ; = : @ / ? % (pipeline.urls; its
-- SQL fast paths allow no other; tests/unit/test_urls.py checks that no <, > or " is
-- left), so & and ' are the only ones to escape: two scans of a URL instead of
-- xml_escape's five, on every line plan budgets and render writes.
CREATE OR REPLACE MACRO loc_escape(u) AS
    CASE
        WHEN contains(u, '&') OR contains(u, '''')
        THEN replace(replace(u, '&', '&amp;'), '''', '&apos;')
        ELSE u
    END;
-- w3c_time: a time in W3C datetime, UTC. Formatted as a plain TIMESTAMP of the same instant
-- (the connection's zone is UTC): strftime of a TIMESTAMPTZ goes through ICU's calendar,
-- twice the cost, on every rendered line.
CREATE OR REPLACE MACRO w3c_time(t) AS
    strftime(make_timestamp(epoch_us(t::TIMESTAMPTZ)), '%Y-%m-%dT%H:%M:%SZ');
-- utc_second: a TIMESTAMPTZ truncated to the second (floor, also before 1970), the value
-- date_trunc('second', t) gives, by integer arithmetic: date_trunc on a TIMESTAMPTZ goes
-- through ICU, which costs more per row.
CREATE OR REPLACE MACRO utc_second(t) AS
    to_timestamp((epoch_us(t::TIMESTAMPTZ)
        - ((epoch_us(t::TIMESTAMPTZ) % 1000000) + 1000000) % 1000000) // 1000000);
-- priority_text: p to the thousandth, without trailing zeros. printf is slow per value
-- (about 240 ns), so the tenths, by far the commonest priorities, and 0 are looked up
-- first. A tenth here is the double that its literal is, exactly; anything else is
-- printed, -0.0 too ('-0').
CREATE OR REPLACE MACRO priority_printed(p) AS rtrim(rtrim(printf('%.3f', p), '0'), '.');
CREATE OR REPLACE MACRO priority_text(p) AS
    CASE
        WHEN p IS NULL THEN NULL
        WHEN p = 0.5 THEN '0.5' WHEN p = 1.0 THEN '1' WHEN p = 0.8 THEN '0.8'
        WHEN p = 0.6 THEN '0.6' WHEN p = 0.7 THEN '0.7' WHEN p = 0.9 THEN '0.9'
        WHEN p = 0.4 THEN '0.4' WHEN p = 0.3 THEN '0.3' WHEN p = 0.2 THEN '0.2'
        WHEN p = 0.1 THEN '0.1'
        WHEN p = 0 AND NOT signbit(p) THEN '0'
        ELSE priority_printed(p)
    END;
-- One concat of every piece (concat skips NULLs; a piece that is absent is NULL, its tags
-- with it): a chain of || copied the growing line once per piece, 30% more CPU.
CREATE OR REPLACE MACRO url_line(url, lastmod, changefreq, priority, ext) AS
    concat('<url><loc>', loc_escape(url), '</loc>',
           CASE WHEN lastmod IS NOT NULL THEN '<lastmod>' END, w3c_time(lastmod),
           CASE WHEN lastmod IS NOT NULL THEN '</lastmod>' END,
           CASE WHEN changefreq IS NOT NULL THEN '<changefreq>' END, changefreq,
           CASE WHEN changefreq IS NOT NULL THEN '</changefreq>' END,
           CASE WHEN priority IS NOT NULL THEN '<priority>' END, priority_text(priority),
           CASE WHEN priority IS NOT NULL THEN '</priority>' END,
           ext, '</url>' || chr(10));
-- url_line_bytes: strlen(url_line(...)) without building the line: plan budgets bytes with
-- it, render builds the line once and checks the file's size against the plan.
-- A lastmod of a year outside 1000..9999 is measured by rendering it (never in practice).
CREATE OR REPLACE MACRO loc_escaped_bytes(u) AS
    CASE
        WHEN contains(u, '&') OR contains(u, '''')
        THEN strlen(loc_escape(u))
        ELSE strlen(u)
    END;
-- priority_bytes: strlen(priority_text(p)) without printf. A
-- priority of 0-1 prints as '0', '1', '0.d', '0.dd' or '0.ddd': the digits of p rounded to
-- thousandths, m, less its trailing zeros. round(p * 1000) is that m unless p * 1000 lies
-- within a rounding error of a half (or p is -0.0, or out of 0-1): those are printed.
CREATE OR REPLACE MACRO priority_bytes(p) AS
    CASE
        WHEN p IS NULL THEN NULL
        WHEN NOT (p > 0 AND p <= 1) OR abs(p * 1000 - floor(p * 1000) - 0.5) < 1e-6
            THEN strlen(priority_text(p))
        WHEN round(p * 1000) % 1000 = 0 THEN 1
        WHEN round(p * 1000) % 100 = 0 THEN 3
        WHEN round(p * 1000) % 10 = 0 THEN 4
        ELSE 5
    END;
CREATE OR REPLACE MACRO url_line_bytes(url, lastmod, changefreq, priority, ext) AS
    -- '<url><loc>' 10, '</loc>' 6, '</url>' and the newline 7
    23 + loc_escaped_bytes(url)
    -- '<lastmod>' 9, the 20-character time, '</lastmod>' 10
    + CASE WHEN lastmod IS NULL THEN 0
           WHEN lastmod >= TIMESTAMPTZ '1000-01-01 00:00:00+00'
                AND lastmod < TIMESTAMPTZ '10000-01-01 00:00:00+00' THEN 39
           ELSE 19 + strlen(w3c_time(lastmod)) END
    -- '<changefreq>' 12, '</changefreq>' 13
    + CASE WHEN changefreq IS NULL THEN 0 ELSE 25 + strlen(changefreq) END
    -- '<priority>' 10, '</priority>' 11
    + CASE WHEN priority IS NULL THEN 0 ELSE 21 + priority_bytes(priority) END
    + coalesce(strlen(ext), 0);
-- The three measures plan takes of a row's line, by output format ('xml', or 'txt': a line is
-- the URL alone): its bytes, a hash of what it is made of (a shard's content identity is
-- its count, bytes and the XOR of these, with no line rendered), and the extension
-- namespaces it uses, as bit flags: bit i when ext holds markers[i + 1]
-- (pipeline.extensions.NAMESPACE_MARKERS: 1 image, 2 video, 4 news, 8 xhtml).
CREATE OR REPLACE MACRO line_bytes(fmt, url, lastmod, changefreq, priority, ext) AS
    CASE WHEN fmt = 'txt' THEN strlen(url) + 1
         ELSE url_line_bytes(url, lastmod, changefreq, priority, ext) END;
CREATE OR REPLACE MACRO line_hash(fmt, url, lastmod, changefreq, priority, ext) AS
    CASE WHEN fmt = 'txt' THEN hash(url) ELSE hash(url, lastmod, changefreq, priority, ext) END;
CREATE OR REPLACE MACRO line_namespaces(fmt, ext, markers) AS
    CASE WHEN fmt = 'txt' OR ext = '' THEN 0
         ELSE list_sum(list_transform(markers,
                  lambda marker, i: contains(ext, marker)::INTEGER << (i - 1))) END;
-- raw_section: the first `depth` path segments below the site prefix, each with its '/',
-- when the path goes on below them ('' otherwise, and for a row that is a reject code):
-- /product/42 gives 'product/', /about and /?q=a/b give ''. One regexp_extract that names
-- `url` once: a macro that named it in several CASE branches made DuckDB evaluate the
-- whole normalisation once per mention. The pattern matches the prefix itself, quoted
-- (\Q...\E; a normalised prefix has no backslash), instead of cutting it off with
-- substr, which counts characters (slower).
CREATE OR REPLACE MACRO raw_section(url, site_prefix, depth) AS
    regexp_extract(url, '^\Q' || site_prefix || '\E((?:[^/?]*/){' || depth || '})', 1);
-- xml_text: an extension's text field as XML character data: the characters XML 1.0
-- forbids (C0 controls but tab, newline and carriage return; U+FFFE, U+FFFF) removed, then
-- escaped. One control character would make a whole file unparseable.
CREATE OR REPLACE MACRO xml_text(s) AS
    xml_escape(CASE
        WHEN regexp_matches(s, '[\x00-\x08\x0b\x0c\x0e-\x1f\x{fffe}\x{ffff}]')
        THEN regexp_replace(s, '[\x00-\x08\x0b\x0c\x0e-\x1f\x{fffe}\x{ffff}]', '', 'g')
        ELSE s
    END);
-- ext_url: an extension's URL (image, video, hreflang) when it is an absolute http(s) URL
-- with a host, no whitespace, control or unsafe characters and at most 2,048 characters;
-- NULL otherwise (javascript:, data:, relative, broken), so the element is left out.
CREATE OR REPLACE MACRO ext_url(u) AS
    CASE
        WHEN strlen(u) <= 2048
             AND regexp_full_match(u, 'https?://[^\s/?#<>"{}|\\^`\x00-\x1f\x7f@]+(?:[/?#][^\s<>"{}|\\^`\x00-\x1f\x7f]*)?')
        THEN u
    END;

-- news_element: a row's <news:news> (the diff adds it to an article of the last two days).
CREATE OR REPLACE MACRO news_element(name, language, published, title) AS
    '<news:news><news:publication><news:name>' || xml_text(name)
    || '</news:name><news:language>' || xml_text(language)
    || '</news:language></news:publication><news:publication_date>'
    || w3c_time(published) || '</news:publication_date><news:title>'
    || xml_text(title) || '</news:title></news:news>';
-- line_too_large: whether a row's <url> line cannot fit in any sitemap file, being over
-- max_line_bytes (the file's byte limit less its largest header and footer), measured with
-- a lastmod (the diff gives every line one) and its news element if it has one. Load rejects
-- such a row (too_large); only a row with extension XML or news can be one (a <loc> is at
-- most 2,048 characters): `ext_bytes` (strlen of both) over `ext_budget` is checked first.
CREATE OR REPLACE MACRO line_too_large(url, changefreq, priority, ext_xml, news_xml, ext_bytes,
                                       ext_budget, max_line_bytes) AS
    ext_bytes > ext_budget
    AND url_line_bytes(url, TIMESTAMPTZ '2000-01-01 00:00:00+00', changefreq, priority,
                       coalesce(ext_xml, '') || coalesce(news_xml, '')) > max_line_bytes;
