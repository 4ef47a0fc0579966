"""The baseline: the simplest correct pure-Python sitemap writer, for comparison.

Reads the inventory Parquet with pyarrow (`iter_batches`, no pre-buffering),
and for every row, in a plain Python loop: keeps only http(s) URLs on the site,
percent-encodes non-ASCII (`urllib.parse.quote`), drops duplicates (a `set` of
the URLs seen), entity-escapes `<loc>` (`xml.sax.saxutils.escape` plus both
quotes), and appends `<url><loc>..</loc><lastmod>..</lastmod>...</url>` to the
open `gzip.open(..., "wt")` file of the URL's section (its first path segment),
rolling to a new file at 50,000 URLs or 50 MiB uncompressed. Then writes one
`sitemap_index.xml` listing every file. No state, no diff, no atomic publish:
the floor a real pipeline is measured against.

Run by bench/run.py in a subprocess; prints a JSON summary on stdout.

    python bench/baseline.py --inventory inv.parquet --out DIR [--limit N] [--gzip-level 6]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from pathlib import Path
from urllib.parse import quote
from xml.sax.saxutils import escape

import pyarrow.parquet as pq

MAX_URLS = 50_000
MAX_BYTES = 52_428_800
HEADER = ('<?xml version="1.0" encoding="UTF-8"?>\n'
          '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n')
FOOTER = "</urlset>\n"
ENTITIES = {"'": "&apos;", '"': "&quot;"}
# Everything ASCII that may appear in a URL stays as written; the rest becomes %XX.
SAFE = "/:?#[]@!$&'()*+,;=%-._~"
_NAME = re.compile(r"[^a-z0-9]+")


class Section:
    """The current file of one section."""

    def __init__(self, out: Path, name: str, level: int) -> None:
        self.out, self.name, self.level = out, name, level
        self.files: list[str] = []
        self.f = None
        self.urls = 0
        self.bytes = 0

    def write(self, line: str) -> None:
        n = len(line.encode()) if not line.isascii() else len(line)
        if self.f is None or self.urls >= MAX_URLS or \
                self.bytes + n + len(FOOTER) > MAX_BYTES:
            self._roll()
        self.f.write(line)
        self.urls += 1
        self.bytes += n

    def _roll(self) -> None:
        self.close()
        name = f"{self.name}-{len(self.files) + 1:05d}.xml.gz"
        self.files.append(name)
        self.f = gzip.open(self.out / name, "wt", encoding="utf-8", compresslevel=self.level)
        self.f.write(HEADER)
        self.urls, self.bytes = 0, len(HEADER)

    def close(self) -> None:
        if self.f is not None:
            self.f.write(FOOTER)
            self.f.close()
            self.f = None


def section_name(path: str) -> str:
    """First path segment, as a file-name-safe word ('root' for top-level pages)."""
    segs = path.split("?", 1)[0].split("/")
    if len(segs) < 2:
        return "root"
    return _NAME.sub("-", segs[0].lower()).strip("-")[:40] or "root"


def build(inventory: str, out: Path, site: str, limit: int | None, level: int) -> dict:
    started = time.monotonic()
    prefix = site.rstrip("/") + "/"
    (out / "sitemaps").mkdir(parents=True, exist_ok=True)
    sections: dict[str, Section] = {}
    seen: set[str] = set()
    rows = written = 0
    pf = pq.ParquetFile(inventory, pre_buffer=False)
    cols = [c for c in ("url", "lastmod", "changefreq", "priority") if c in pf.schema_arrow.names]
    for batch in pf.iter_batches(batch_size=65_536, columns=cols):
        if limit is not None and rows >= limit:
            break
        if limit is not None and rows + batch.num_rows > limit:
            batch = batch.slice(0, limit - rows)
        rows += batch.num_rows
        data = batch.to_pydict()
        n = batch.num_rows
        for url, lastmod, changefreq, priority in zip(
                data["url"], data.get("lastmod", [None] * n), data.get("changefreq", [None] * n),
                data.get("priority", [None] * n), strict=True):
            if not url or not url.startswith(prefix) or len(url) > 2048:
                continue
            if not url.isascii():
                url = quote(url, safe=SAFE)
                if len(url) > 2048:
                    continue
            if url in seen:
                continue
            seen.add(url)
            line = "<url><loc>" + escape(url, ENTITIES) + "</loc>"
            if isinstance(lastmod, str):  # a W3C datetime string, as the inventory gives it
                line += "<lastmod>" + escape(lastmod.strip()) + "</lastmod>"
            elif lastmod is not None:
                line += "<lastmod>" + lastmod.strftime("%Y-%m-%dT%H:%M:%SZ") + "</lastmod>"
            if changefreq in ("always", "hourly", "daily", "weekly", "monthly", "yearly", "never"):
                line += "<changefreq>" + changefreq + "</changefreq>"
            if priority is not None and 0.0 <= priority <= 1.0:
                line += "<priority>" + (f"{priority:.3f}".rstrip("0").rstrip(".")) + "</priority>"
            line += "</url>\n"
            name = section_name(url[len(prefix):])
            sec = sections.get(name)
            if sec is None:
                sec = sections[name] = Section(out / "sitemaps", name, level)
            sec.write(line)
            written += 1
    files = []
    for sec in sections.values():
        sec.close()
        files += sec.files
    if len(files) > 50_000:
        raise SystemExit("more than 50,000 sitemaps: one index is not enough")
    index = ['<?xml version="1.0" encoding="UTF-8"?>\n'
             '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n']
    index += [f"<sitemap><loc>{escape(prefix + 'sitemaps/' + f, ENTITIES)}</loc></sitemap>\n"
              for f in sorted(files)]
    index.append("</sitemapindex>\n")
    (out / "sitemap_index.xml").write_text("".join(index), encoding="utf-8")
    gz = sum((out / "sitemaps" / f).stat().st_size for f in files)
    return {"input_rows": rows, "urls": written, "files": len(files), "gzip_bytes": gz,
            "gzip_level": level, "seconds": round(time.monotonic() - started, 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inventory", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--site-url", default="https://www.example.com/")
    p.add_argument("--limit", type=int, help="read only the first N rows (a sample)")
    p.add_argument("--gzip-level", type=int, default=6,
                   help="zlib level (default 6, zlib's own default; gzip.open's default is 9)")
    args = p.parse_args(argv)
    print(json.dumps(build(args.inventory, args.out, args.site_url, args.limit, args.gzip_level)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
