"""robots.txt: `merge_robots` puts the live root index(es) (and the feed) into a site's
robots.txt as `Sitemap:` lines, leaving every other byte as it was."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from pipeline import storage
from pipeline.errors import ConfigError
from pipeline.layout import FEED_KEY, ROOT_INDEX_PATTERN
from pipeline.manifest import Manifest
from pipeline.publish import public_join, read_live
from pipeline.settings import public_url_problem

log = logging.getLogger(__name__)

#: The names this output writes at its root that robots.txt may list.
OWNED_NAMES = re.compile(ROOT_INDEX_PATTERN + "|" + re.escape(FEED_KEY))
#: A robots.txt `Sitemap:` line (directive names are case-insensitive, RFC 9309).
_SITEMAP_LINE = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t]*sitemap[ \t]*:[ \t]*([^\s#]+)", re.IGNORECASE)


def merged_robots(existing: bytes | None, sitemap_urls: Iterable[str], out_public_prefix: str,
                  owned_names: re.Pattern[str] | None = None) -> bytes:
    """robots.txt `existing` with exactly `sitemap_urls` as this output's `Sitemap:` lines.

    A `Sitemap:` line is this output's when its URL starts with `out_public_prefix`
    (and, with `owned_names`, the rest of the URL is one of those names). Such a
    line is kept byte for byte when it names a wanted URL, dropped otherwise
    (stale or repeated); wanted URLs not present yet are added where the first
    stale line was, else after this output's last line, else at the end, with
    the file's own line ending. Every other line is kept byte for byte; only a
    missing line break at the end of the line before an insertion is added.
    """
    want = list(dict.fromkeys(sitemap_urls))
    if existing is None:
        return "".join(f"Sitemap: {u}\n" for u in want).encode()
    prefix = out_public_prefix if out_public_prefix.endswith("/") else out_public_prefix + "/"

    def ours(url: str) -> bool:
        if not url.startswith(prefix):
            return False
        return owned_names is None or owned_names.fullmatch(url[len(prefix):]) is not None

    if b"\r\n" in existing:
        eol = b"\r\n"
    elif b"\r" in existing and b"\n" not in existing:
        eol = b"\r"
    else:
        eol = b"\n"
    lines: list[bytes] = []
    present: set[str] = set()
    first_stale: int | None = None
    after_ours: int | None = None
    for line in existing.splitlines(keepends=True):
        m = _SITEMAP_LINE.match(line)
        url = m.group(1).decode("latin-1") if m else None
        if url is not None and ours(url):
            if url in want and url not in present:
                present.add(url)
                lines.append(line)
                after_ours = len(lines)
            elif first_stale is None:
                first_stale = len(lines)
            continue
        lines.append(line)
    missing = [u for u in want if u not in present]
    if missing:
        at = first_stale if first_stale is not None else (
            after_ours if after_ours is not None else len(lines))
        if at > 0 and not lines[at - 1].endswith((b"\n", b"\r")):
            lines[at - 1] += eol
        lines[at:at] = [f"Sitemap: {u}".encode() + eol for u in missing]
    return b"".join(lines)


def merge_robots(robots_uri: str, sitemap_urls: list[str], out_public_prefix: str, *,
                 owned_names: re.Pattern[str] | None = None) -> bool:
    """Merge `sitemap_urls` into the robots.txt at `robots_uri`; True when it changed.

    See `merged_robots` for the rules. A robots.txt that does not exist is
    created with only those lines; one that already has them is not written.
    """
    store, key = storage.open_file(robots_uri)
    current, etag = store.read_with_etag(key)
    new = merged_robots(current, sitemap_urls, out_public_prefix, owned_names)
    if new == current or (current is None and not new):
        log.info("notify: %s already lists this output's sitemaps", robots_uri)
        return False
    store.rewrite(key, new, etag=etag, cache_control=storage.CACHE_SHORT)
    log.info("notify: %s %s with %d Sitemap line(s) for %s", robots_uri,
             "created" if current is None else "updated", len(sitemap_urls), out_public_prefix)
    return True


def output_sitemap_urls(out_uri: str, manifest: Manifest) -> list[str]:
    """The URLs robots.txt should name for an output: its root index(es), then its feed."""
    urls = [i["url"] for i in manifest["indexes"]]
    if storage.open_storage(out_uri).exists(FEED_KEY):
        urls.append(public_join(manifest["public_url"], FEED_KEY))
    return urls


def robots_for_output(out_uri: str, robots_uri: str) -> bool:
    """Merge the live generation's `Sitemap:` lines of `out_uri` into `robots_uri`.

    Only lines naming this output's own files (root indexes, feed) under its
    public URL count as its own, so other sitemaps served from the same folder
    (a hand-made news sitemap at the site root, say) are left alone.
    """
    live = read_live(out_uri)
    if live.manifest is None:
        raise ConfigError(f"{out_uri} has no live generation yet (no manifest.json): run the "
                          "pipeline first")
    # a manifest written before public_url was parsed may hold a newline: never copy it
    problem = public_url_problem(live.manifest["public_url"])
    if problem:
        raise ConfigError(f"the live generation of {out_uri} has a public_url that {problem}: "
                          "publish again with a valid --public-url first")
    return merge_robots(robots_uri, output_sitemap_urls(out_uri, live.manifest),
                        live.manifest["public_url"], owned_names=OWNED_NAMES)
