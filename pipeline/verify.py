"""`sitemaps verify`: the served copy of the live generation, checked as a crawler sees it.

`validate` checks the files in `--out`; this checks what a web server or a CDN in front of
them answers, over HTTP(S):

- `robots.txt` at the site's root names every root index (a `Sitemap:` line with its public
  URL) and does not disallow their paths, nor the shards' (for any user agent, `*`);
- each index of the live manifest answers 200 with an XML content type, and its bytes (once
  a `Content-Encoding` the server added is undone, as a crawler does) are the generation's
  own copy in `--out`. Other bytes are a stale copy (a CDN's cache): a problem once the live
  generation has been live longer than the tolerance (`--stale-minutes`), a note before;
- a sample of the shards (every one with `--all`) answers 200 with a gzip content type, with
  no `Content-Encoding: gzip` (a `.xml.gz` gzipped again, which crawlers read as garbage),
  and bytes whose sha256 is the manifest's.

The served URLs are the manifest's public URLs, or the same paths below `--site-url` (a
staging host, a CDN's own name). Nothing is written; one problem per line, exit 1.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import re
import time
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

from pipeline import storage
from pipeline.layout import ROOT_INDEX_PATTERN
from pipeline.manifest import Manifest
from pipeline.w3c import parse_w3c

log = logging.getLogger(__name__)

#: Shards fetched when not `--all`: spread over the manifest's list, first and last included.
DEFAULT_SAMPLE = 20
#: Minutes a served root index may lag the live generation (a CDN's cache) before it counts.
DEFAULT_STALE_MINUTES = 15.0
#: Seconds each request may take.
TIMEOUT_SECONDS = 30.0
#: Seconds between two progress lines while the sitemaps are fetched.
PROGRESS_SECONDS = 10.0
#: What a gzipped sitemap may be served as (crawlers read the bytes, not the type; any of
#: these says "binary, not text").
GZIP_TYPES = ("application/gzip", "application/x-gzip", "application/octet-stream")
XML_TYPES = ("application/xml", "text/xml")
#: Read at most this much of one response: a sitemap is at most 50 MiB uncompressed.
MAX_BODY = 64 * 1024 * 1024
USER_AGENT = "sitemaps-verify (+https://www.sitemaps.org/protocol.html)"


@dataclass(frozen=True)
class Fetched:
    """One response: its status (0 when none came), lower-cased headers and body."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    error: str | None = None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def encoding(self) -> str:
        return self.headers.get("content-encoding", "").strip().lower()


def fetch(url: str, timeout: float = TIMEOUT_SECONDS) -> Fetched:
    """GET `url` as a crawler does: it accepts gzip and follows redirects; the body is kept
    as sent (a Content-Encoding is not undone here)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT,
                                                   "Accept-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return Fetched(url, response.status, _headers(response.headers),
                           response.read(MAX_BODY))
    except urllib.error.HTTPError as exc:
        return Fetched(url, exc.code, _headers(exc.headers), b"", f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return Fetched(url, 0, {}, b"", f"no answer ({reason})")


def _headers(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()} if headers else {}


def _decoded(fetched: Fetched) -> bytes | None:
    """The body with a Content-Encoding undone as a crawler undoes it; None when it cannot be."""
    if fetched.encoding in ("", "identity"):
        return fetched.body
    if fetched.encoding in ("gzip", "x-gzip"):
        try:
            return gzip.decompress(fetched.body)
        except (OSError, EOFError, zlib.error):
            return None
    return None


@dataclass
class VerifyResult:
    """What `verify` found: problems (exit 1) and notes (said, not failing)."""

    site_url: str
    generation: str | None
    checked: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"site_url": self.site_url, "generation": self.generation, "ok": self.ok,
                "checked": self.checked, "problems": self.problems, "notes": self.notes}


def served_url(url: str, site_url: str | None) -> str:
    """Where `url` (a public URL of the manifest) is fetched: the same path below the host
    of `site_url` when one is given."""
    if not site_url:
        return url
    served, public = urlsplit(site_url), urlsplit(url)
    return urlunsplit((served.scheme, served.netloc, public.path, public.query, ""))


def sample(entries: list[Any], n: int) -> list[Any]:
    """`n` entries spread evenly over `entries`, first and last included (all when fewer)."""
    if n >= len(entries):
        return list(entries)
    if n <= 1:
        return entries[:n]
    return [entries[round(i * (len(entries) - 1) / (n - 1))] for i in range(n)]


def verify(out_uri: str, site_url: str | None = None, *, shards: int | None = DEFAULT_SAMPLE,
           stale_minutes: float = DEFAULT_STALE_MINUTES, timeout: float = TIMEOUT_SECONDS,
           now: datetime | None = None) -> VerifyResult:
    """Check the served copy of `out_uri`'s live generation (the module's list); `shards`:
    how many shards to fetch, None for every one."""
    from pipeline.publish import read_live

    live = read_live(out_uri).manifest
    if live is None:
        return VerifyResult(site_url or "", None,
                            problems=[f"{out_uri} has no live generation: nothing to verify"])
    result = VerifyResult(site_url or live["public_url"], live["generation"])
    _check_robots(live, site_url, timeout, result)
    _check_indexes(storage.open_storage(out_uri), live, site_url, stale_minutes, timeout,
                   now or datetime.now(UTC), result)
    chosen = live["sitemaps"] if shards is None else sample(
        sorted(live["sitemaps"], key=lambda s: s["key"]), shards)
    said = time.monotonic()
    for n, entry in enumerate(chosen, 1):
        _check_shard(entry, served_url(entry["url"], site_url), timeout, result)
        if time.monotonic() - said > PROGRESS_SECONDS:  # `--all` of a large site takes a while
            said = time.monotonic()
            log.info("verify: %d of %d sitemaps fetched, %d problem(s) so far", n,
                     len(chosen), len(result.problems))
    log.info("verify: %d file(s) fetched for generation %s: %d problem(s)", result.checked,
             live["generation"], len(result.problems))
    return result


def _check_robots(live: Manifest, site_url: str | None, timeout: float,
                  result: VerifyResult) -> None:
    base = urlsplit(site_url or live["site_url"])
    url = f"{base.scheme}://{base.netloc}/robots.txt"
    fetched = fetch(url, timeout)
    result.checked += 1
    if fetched.status != 200:
        result.problems.append(f"{url}: {fetched.error or f'HTTP {fetched.status}'}: crawlers "
                               "find no Sitemap: line there")
        return
    text = (_decoded(fetched) or b"").decode("utf-8", "replace")
    named = {line.split(":", 1)[1].strip() for line in text.splitlines()
             if line.split(":", 1)[0].strip().lower() == "sitemap" and ":" in line}
    rules = RobotFileParser()
    rules.parse(text.splitlines())
    roots = [i for i in live["indexes"] if re.fullmatch(ROOT_INDEX_PATTERN, i["key"])]
    for index in roots:
        if index["url"] not in named:
            result.problems.append(f"{url} names no 'Sitemap: {index['url']}' line")
        if not rules.can_fetch("*", index["url"]):
            result.problems.append(f"{url} disallows {urlsplit(index['url']).path}, the root "
                                   "index")
    if live["sitemaps"] and not rules.can_fetch("*", live["sitemaps"][0]["url"]):
        result.problems.append(f"{url} disallows {urlsplit(live['sitemaps'][0]['url']).path}, "
                               "a sitemap the index lists")


def _check_indexes(out: storage.Storage, live: Manifest, site_url: str | None,
                   stale_minutes: float, timeout: float, now: datetime,
                   result: VerifyResult) -> None:
    went_live = parse_w3c(live.get("committed") or live["created"])
    minutes_live = (now - went_live).total_seconds() / 60
    for index in live["indexes"]:
        url = served_url(index["url"], site_url)
        fetched = fetch(url, timeout)
        result.checked += 1
        if fetched.status != 200:
            result.problems.append(f"{url}: {fetched.error or f'HTTP {fetched.status}'}")
            continue
        if fetched.content_type not in XML_TYPES:
            result.problems.append(f"{url}: Content-Type {fetched.content_type or 'none'}, not "
                                   f"{' or '.join(XML_TYPES)}")
        body = _decoded(fetched)
        if body is None:
            result.problems.append(f"{url}: Content-Encoding {fetched.encoding} that cannot be "
                                   "undone")
            continue
        published = out.read_bytes_or_none(index["generation_key"])
        if published is None:
            result.problems.append(f"{out.uri(index['generation_key'])}, the generation's copy "
                                   f"of {index['key']}, is missing: run sitemaps validate")
            continue
        if body == published:
            continue
        lag = (f"{url} is not generation {live['generation']}'s index (a stale copy: a "
               f"cache?), {minutes_live:.0f} minute(s) after it went live")
        if minutes_live > stale_minutes:
            result.problems.append(f"{lag}; more than the {stale_minutes:g} allowed")
        else:
            result.notes.append(f"{lag}; within the {stale_minutes:g} allowed")


def _check_shard(entry: Any, url: str, timeout: float, result: VerifyResult) -> None:
    fetched = fetch(url, timeout)
    result.checked += 1
    if fetched.status != 200:
        result.problems.append(f"{url}: {fetched.error or f'HTTP {fetched.status}'}")
        return
    if fetched.encoding in ("gzip", "x-gzip"):
        result.problems.append(f"{url}: served with Content-Encoding: {fetched.encoding}: a "
                               ".xml.gz gzipped again, which crawlers cannot read (serve it "
                               "as stored, without on-the-fly compression)")
        return
    if fetched.content_type not in GZIP_TYPES:
        result.problems.append(f"{url}: Content-Type {fetched.content_type or 'none'}, not "
                               f"{' or '.join(GZIP_TYPES)}")
    digest = hashlib.sha256(fetched.body).hexdigest()
    if digest != entry["sha256"]:
        result.problems.append(f"{url}: sha256 {digest[:12]}... is not the manifest's "
                               f"{entry['sha256'][:12]}... ({len(fetched.body):,} bytes, "
                               f"{entry['gzip_bytes']:,} published)")
