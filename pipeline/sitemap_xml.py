"""The fixed XML of sitemap files and the sitemap index writer.

The `<url>` lines themselves are rendered in SQL (sql/url_line.sql);
this module holds what surrounds them, so plan (which budgets bytes) and
render (which writes them) agree to the byte.
"""

from __future__ import annotations

from collections.abc import Iterable
from xml.sax.saxutils import escape

XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
URLSET_HEADER = XML_DECLARATION + f'<urlset xmlns="{SITEMAP_NS}">\n'
URLSET_FOOTER = "</urlset>\n"


def urlset_header(namespaces: Iterable[str] = ()) -> str:
    """The file's opening, declaring only the extension namespaces it uses."""
    from pipeline.extensions import NAMESPACES

    decl = "".join(f' xmlns:{p}="{NAMESPACES[p]}"' for p in sorted(namespaces))
    return XML_DECLARATION + f'<urlset xmlns="{SITEMAP_NS}"{decl}>\n'


def max_urlset_overhead() -> int:
    """Bytes outside the <url> lines of a file that declares every namespace."""
    from pipeline.extensions import NAMESPACES

    return len(urlset_header(NAMESPACES).encode()) + len(URLSET_FOOTER.encode())
#: Bumped when the rendering or the key digest changes, so that every shard key changes
#: with it (2: the digest is made of the rows' hashes, not of the rendered lines).
FORMAT_VERSION = "2"


def sitemap_index(entries: Iterable[tuple[str, str | None]]) -> bytes:
    """A <sitemapindex> listing (loc, lastmod) pairs; lastmod may be None."""
    parts = [XML_DECLARATION, f'<sitemapindex xmlns="{SITEMAP_NS}">\n']
    for loc, lastmod in entries:
        lm = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
        parts.append(f"<sitemap><loc>{escape(loc, {chr(39): '&apos;', chr(34): '&quot;'})}</loc>"
                     f"{lm}</sitemap>\n")
    parts.append("</sitemapindex>\n")
    return "".join(parts).encode("utf-8")
