"""`sitemaps validate`: check a published output the way a crawler would, offline.

Reads the live manifest of `--out` and checks every file it lists against the
vendored XSDs (`pipeline/schemas/`, no network), the protocol's limits
(`pipeline.limits`), the index references (every sitemap listed exactly once,
by the manifest's public URL) and the manifest's sizes and sha256s. Problems are
collected, not raised, so a user sees the first few of them at once.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import manifest as manifest_model
from pipeline import storage
from pipeline.extensions import NAMESPACES
from pipeline.layout import LIVE_MANIFEST_KEY, ROBOTS_KEY
from pipeline.limits import (
    MAX_BYTES_PER_SITEMAP,
    MAX_IMAGES_PER_URL,
    MAX_SITEMAPS_PER_INDEX,
    MAX_URL_LENGTH,
    MAX_URLS_PER_NEWS_SITEMAP,
    MAX_URLS_PER_SITEMAP,
)
from pipeline.manifest import IndexEntry, SitemapEntry
from pipeline.settings import public_url_problem
from pipeline.sitemap_xml import SITEMAP_NS

log = logging.getLogger(__name__)

#: The vendored XSDs (schemas/README.md says where each comes from); shipped as package data.
SCHEMAS = Path(__file__).resolve().parent / "schemas"
#: `sitemap.xsd` for a plain <urlset>; `all.xsd` (imports the extensions) when it uses any;
#: `siteindex.xsd` for a <sitemapindex>.
SITEMAP_XSD, ALL_XSD, INDEX_XSD = "sitemap.xsd", "all.xsd", "siteindex.xsd"
SM = SITEMAP_NS
XHTML, IMAGE, NEWS = NAMESPACES["xhtml"], NAMESPACES["image"], NAMESPACES["news"]
#: Problems listed before validation stops (a broken output would list thousands).
DEFAULT_MAX_PROBLEMS = 20

_schemas: dict[str, Any] = {}


def schema(name: str) -> Any:
    """The XMLSchema of a vendored XSD, parsed once; its imports resolve in SCHEMAS, offline."""
    from lxml import etree

    if name not in _schemas:
        parser = etree.XMLParser(no_network=True, resolve_entities=False)
        _schemas[name] = etree.XMLSchema(etree.parse(str(SCHEMAS / name), parser))
    return _schemas[name]


class _TooMany(Exception):
    """Enough problems collected: stop reading."""


@dataclass
class Validation:
    """What validate found: the problems (empty when the output is valid) and what it read."""

    out: str
    generation: str | None = None
    indexes: int = 0
    sitemaps: int = 0
    urls: int = 0
    problems: list[str] = field(default_factory=list)
    truncated: bool = False
    max_problems: int = DEFAULT_MAX_PROBLEMS

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, text: str) -> None:
        self.problems.append(text)
        if len(self.problems) >= self.max_problems:
            self.truncated = True
            raise _TooMany

    def as_dict(self) -> dict[str, Any]:
        return {"out": self.out, "generation": self.generation, "ok": self.ok,
                "indexes": self.indexes, "sitemaps": self.sitemaps, "urls": self.urls,
                "problems": self.problems, "truncated": self.truncated}


def validate(out_uri: str, max_problems: int = DEFAULT_MAX_PROBLEMS) -> Validation:
    """Check every live file of `out_uri`; returns the first `max_problems` problems."""
    result = Validation(out_uri, max_problems=max_problems)
    out = storage.open_storage(out_uri)
    try:
        try:
            _validate(out, result)
        except (KeyError, TypeError, AttributeError) as exc:  # an entry lacks a field
            result.problem(f"{LIVE_MANIFEST_KEY} is not a pipeline manifest: "
                           f"{type(exc).__name__} {exc}")
    except _TooMany:
        pass
    log.info("validate: %s: %d problem(s) in %d sitemaps, %d index file(s)", out_uri,
             len(result.problems), result.sitemaps, result.indexes)
    return result


def _validate(out: storage.Storage, v: Validation) -> None:
    raw = out.read_bytes_or_none(LIVE_MANIFEST_KEY)
    if raw is None:
        v.problem(f"no generation at {out.root} (no {LIVE_MANIFEST_KEY})")
        return
    try:
        m = manifest_model.loads(raw)
        v.generation = m["generation"]
        public = m["public_url"].rstrip("/") + "/"
        site = m["site_url"]
        indexes, sitemaps = m["indexes"], m["sitemaps"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        v.problem(f"{LIVE_MANIFEST_KEY} is not a pipeline manifest: {exc}")
        return
    problem = public_url_problem(m["public_url"])
    if problem:
        v.problem(f"{LIVE_MANIFEST_KEY}: its public_url {problem}")
    entries = {s["url"]: s for s in sitemaps}
    listed = _check_indexes(out, v, indexes, public)
    if sorted(listed) != sorted(entries):
        missing = sorted(set(entries) - set(listed))[:3]
        extra = sorted(set(listed) - set(entries))[:3]
        v.problem(f"the indexes and the manifest disagree: {len(listed):,} listed, "
                  f"{len(entries):,} in the manifest (not listed: {missing}, not in the "
                  f"manifest or listed twice: {extra})")
    _check_robots(out, v, indexes)
    urls = 0
    for entry in sitemaps:
        urls += _check_sitemap(out, v, entry, public, site)
        v.sitemaps += 1
    v.urls = urls
    published = m.get("counts", {}).get("published")
    if published is not None and published != urls:
        v.problem(f"{LIVE_MANIFEST_KEY} counts {published:,} published URLs, the sitemaps "
                  f"hold {urls:,}")


def _parse(v: Validation, key: str, raw: bytes) -> Any:
    from lxml import etree

    try:
        return etree.fromstring(raw, etree.XMLParser(no_network=True, resolve_entities=False,
                                                     huge_tree=True))
    except etree.XMLSyntaxError as exc:
        v.problem(f"{key}: not well-formed XML: {exc}")
        return None


def _schema_problem(v: Validation, key: str, xsd: str, doc: Any) -> None:
    s = schema(xsd)
    if not s.validate(doc):
        first = s.error_log[0]
        v.problem(f"{key}: not valid against {xsd}: line {first.line}: {first.message}")


def _check_indexes(out: storage.Storage, v: Validation, indexes: list[IndexEntry],
                   public: str) -> list[str]:
    listed: list[str] = []
    index_urls = {i.get("url") for i in indexes}
    for index in indexes:
        key = index["key"]
        raw = out.read_bytes_or_none(key)
        v.indexes += 1
        if raw is None:
            v.problem(f"{key}: the root index is missing")
            continue
        if out.read_bytes_or_none(index["generation_key"]) != raw:
            v.problem(f"{key}: differs from the generation's copy {index['generation_key']} "
                      "(the root index lags the manifest; the next run repairs it)")
        if index.get("url") != public + key:
            v.problem(f"{key}: the manifest gives its URL as {index.get('url')}, not "
                      f"{public + key}")
        doc = _parse(v, key, raw)
        if doc is None:
            continue
        _schema_problem(v, key, INDEX_XSD, doc)
        locs = [e.text or "" for e in doc.iterfind(f"{{{SM}}}sitemap/{{{SM}}}loc")]
        if not 0 < len(locs) <= MAX_SITEMAPS_PER_INDEX:
            v.problem(f"{key}: lists {len(locs):,} sitemaps (1..{MAX_SITEMAPS_PER_INDEX:,})")
        if len(locs) != index.get("sitemaps", len(locs)):
            v.problem(f"{key}: lists {len(locs):,} sitemaps, the manifest says "
                      f"{index.get('sitemaps')}")
        for loc in locs:
            if not _absolute_http(loc):
                v.problem(f"{key}: lists {loc!r}, not an absolute http(s) URL")
            elif loc in index_urls:
                v.problem(f"{key}: lists the index {loc} (an index never lists an index)")
            elif not loc.startswith(public):
                v.problem(f"{key}: lists {loc}, outside the index's folder {public}")
        listed += locs
    return listed


def _absolute_http(url: str) -> bool:
    """Whether `url` is an absolute http(s) URL with a host and no whitespace."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and bool(parts.hostname)
            and not any(c.isspace() for c in url))


def _check_robots(out: storage.Storage, v: Validation, indexes: list[IndexEntry]) -> None:
    raw = out.read_bytes_or_none(ROBOTS_KEY)
    if raw is None:
        v.problem(f"{ROBOTS_KEY} is missing")
        return
    lines = {ln.strip() for ln in raw.decode("utf-8", "replace").splitlines()}
    for index in indexes:
        if f"Sitemap: {index.get('url')}" not in lines:
            v.problem(f"{ROBOTS_KEY} does not list the root index {index.get('url')}")


def _check_sitemap(out: storage.Storage, v: Validation, entry: SitemapEntry, public: str,
                   site: str) -> int:
    """Checks one sitemap file against its manifest entry; returns its URL count."""
    key = entry["key"]
    if entry["url"] != public + key:
        v.problem(f"{key}: the manifest gives its URL as {entry['url']}, not {public + key}")
    gz = out.read_bytes_or_none(key)
    if gz is None:
        v.problem(f"{key}: listed in the manifest but missing")
        return 0
    if hashlib.sha256(gz).hexdigest() != entry.get("sha256"):
        v.problem(f"{key}: sha256 {hashlib.sha256(gz).hexdigest()} is not the manifest's "
                  f"{entry.get('sha256')}")
    if len(gz) != entry.get("gzip_bytes"):
        v.problem(f"{key}: {len(gz):,} gzipped bytes, the manifest says {entry.get('gzip_bytes')}")
    if out.headers(key).content_encoding:
        v.problem(f"{key}: stored with Content-Encoding (clients would unzip it silently)")
    try:
        raw = gzip.decompress(gz)
    except (OSError, EOFError) as exc:
        v.problem(f"{key}: not gzip: {exc}")
        return 0
    if len(raw) > MAX_BYTES_PER_SITEMAP:
        v.problem(f"{key}: {len(raw):,} bytes uncompressed, over the limit of "
                  f"{MAX_BYTES_PER_SITEMAP:,}")
    if len(raw) != entry.get("bytes"):
        v.problem(f"{key}: {len(raw):,} bytes uncompressed, the manifest says {entry.get('bytes')}")
    locs = list(_txt_locs(raw) if key.endswith(".txt.gz") else _xml_locs(v, key, raw))
    if not 0 < len(locs) <= MAX_URLS_PER_SITEMAP:
        v.problem(f"{key}: {len(locs):,} URLs (1..{MAX_URLS_PER_SITEMAP:,})")
    if len(locs) != entry.get("urls"):
        v.problem(f"{key}: {len(locs):,} URLs, the manifest says {entry.get('urls')}")
    for loc in locs:
        if len(loc) > MAX_URL_LENGTH:
            v.problem(f"{key}: a <loc> of {len(loc):,} characters (at most {MAX_URL_LENGTH:,})")
        if not loc.startswith(site):
            v.problem(f"{key}: {loc} is not on the site {site}")
    return len(locs)


def _txt_locs(raw: bytes) -> Iterator[str]:
    return (line for line in raw.decode("utf-8").split("\n") if line)


def _xml_locs(v: Validation, key: str, raw: bytes) -> Iterator[str]:
    from lxml import etree

    doc = _parse(v, key, raw)
    if doc is None:
        return iter(())
    used = {etree.QName(e).namespace for e in doc.iter() if isinstance(e.tag, str)} - {SM}
    for url in doc.iterfind(f"{{{SM}}}url"):  # no XSD for xhtml:link: Google's rules
        links = url.findall(f"{{{XHTML}}}link")
        if not links:
            continue
        loc = url.findtext(f"{{{SM}}}loc")
        if not all(lk.get("rel") == "alternate" and lk.get("hreflang") and lk.get("href")
                   for lk in links):
            v.problem(f"{key}: {loc}: an xhtml:link without rel=alternate, hreflang and href")
        if loc not in {lk.get("href") for lk in links}:
            v.problem(f"{key}: {loc}: its hreflang alternates do not list itself")
        for lk in links:
            url.remove(lk)
    _schema_problem(v, key, ALL_XSD if used - {XHTML} else SITEMAP_XSD, doc)
    news = 0
    for url in doc.iterfind(f"{{{SM}}}url"):
        images = len(url.findall(f"{{{IMAGE}}}image"))
        if images > MAX_IMAGES_PER_URL:
            v.problem(f"{key}: {images:,} images for one URL (at most {MAX_IMAGES_PER_URL:,})")
        news += url.find(f"{{{NEWS}}}news") is not None
    if news > MAX_URLS_PER_NEWS_SITEMAP:
        v.problem(f"{key}: {news:,} news URLs (at most {MAX_URLS_PER_NEWS_SITEMAP:,})")
    return (e.text or "" for e in doc.iterfind(f"{{{SM}}}url/{{{SM}}}loc"))
