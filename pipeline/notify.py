"""Stage 6, notify (optional): tell crawlers and people that the sitemaps changed.

- robots.txt: `merge_robots` puts the live root index(es) (and the feed) into a
  site's robots.txt as `Sitemap:` lines, leaving every other byte as it was.
- feed: `write_feed` writes `feed.atom` beside the root index, an Atom 1.0 feed
  of the URLs added or changed in the last days' generations. The sitemaps.org
  protocol accepts a feed as a sitemap, so robots-sitemaps.txt lists it too.
- IndexNow: `submit_indexnow` posts a generation's changed URLs (added,
  changed, removed) in batches; refusals are logged, never raised. Off unless
  a key is configured. Google's sitemap ping is retired: nothing pings it.

`notify_step` runs after publish (CLI and DAG alike) and returns small counts.
"""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import os
import re
import stat
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

from pipeline import manifest as manifest_model
from pipeline import sql, storage
from pipeline.errors import ConfigError
from pipeline.publish import (
    FEED_KEY,
    GENERATIONS_FOLDER,
    public_join,
    read_live,
    repair_root,
    state_files,
)

if TYPE_CHECKING:
    from pipeline.context import RunContext
    from pipeline.manifest import Manifest

log = logging.getLogger(__name__)

ATOM_NS = "http://www.w3.org/2005/Atom"
DEFAULT_FEED_DAYS = 7
#: Entries of one feed at most (the newest changes are kept).
DEFAULT_FEED_ENTRIES = 10_000

INDEXNOW_ENDPOINT = "https://api.indexnow.org/indexnow"
#: URLs in one IndexNow POST at most (the protocol's limit).
INDEXNOW_MAX_URLS = 10_000
#: An IndexNow key: 8 to 128 characters of a-z, A-Z, 0-9 and "-".
INDEXNOW_KEY_REGEX = re.compile(r"[A-Za-z0-9-]{8,128}")
#: Longest wait honoured from a Retry-After header, in seconds.
MAX_RETRY_AFTER = 60.0
USER_AGENT = "sitemap-pipeline (IndexNow client)"

#: The names this output writes at its root that robots.txt may list.
OWNED_NAMES = re.compile(r"sitemap_index(-[0-9]+)?\.xml|" + re.escape(FEED_KEY))
#: A robots.txt `Sitemap:` line (directive names are case-insensitive, RFC 9309).
_SITEMAP_LINE = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t]*sitemap[ \t]*:[ \t]*([^\s#]+)", re.IGNORECASE)
_W3C = "%Y-%m-%dT%H:%M:%SZ"


# --- robots.txt ---------------------------------------------------------------------------

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


def _split_uri(uri: str) -> tuple[storage.Storage, str]:
    """The storage of a file's folder and the file's name (local path or s3:// URI)."""
    parent, _, name = uri.rpartition("/")
    if not name:
        raise ConfigError(f"{uri!r} names a folder; give the file, e.g. .../robots.txt")
    if storage.is_s3(uri) and parent == "s3:/":
        raise ConfigError(f"{uri!r} has no object key; give s3://bucket/robots.txt")
    return storage.open_storage(parent or "."), name


def _write_robots(store: storage.Storage, key: str, data: bytes, etag: str | None) -> None:
    """Replace the file in one step, keeping a local file's mode and an S3 object's caching."""
    if isinstance(store, storage.LocalStorage):
        target = store.path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644  # readable by the web server, like a robots.txt put there by hand
        fd, tmp = tempfile.mkstemp(prefix=".tmp-robots-", dir=target.parent)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return
    cache = storage.CACHE_SHORT
    if etag is not None and isinstance(store, storage.S3Storage):
        cache = store.head(key).get("CacheControl") or cache
    # Conditional: a robots.txt edited meanwhile is not overwritten (PublishConflict).
    store.put_if(key, data, if_match=etag, cache_control=cache)


def merge_robots(robots_uri: str, sitemap_urls: list[str], out_public_prefix: str, *,
                 owned_names: re.Pattern[str] | None = None) -> bool:
    """Merge `sitemap_urls` into the robots.txt at `robots_uri`; True when it changed.

    See `merged_robots` for the rules. A robots.txt that does not exist is
    created with only those lines; one that already has them is not written.
    """
    store, key = _split_uri(robots_uri)
    current, etag = store.read_with_etag(key)
    new = merged_robots(current, sitemap_urls, out_public_prefix, owned_names)
    if new == current or (current is None and not new):
        log.info("notify: %s already lists this output's sitemaps", robots_uri)
        return False
    _write_robots(store, key, new, etag)
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
    return merge_robots(robots_uri, output_sitemap_urls(out_uri, live.manifest),
                        live.manifest["public_url"], owned_names=OWNED_NAMES)


# --- feed ---------------------------------------------------------------------------------

def _parse_w3c(value: str) -> datetime:
    return datetime.strptime(value, _W3C).replace(tzinfo=UTC)


def _generation_manifest(out: storage.Storage, live: Manifest, gen: str
                         ) -> Manifest | None:
    if gen == live["generation"]:
        return live
    raw = out.read_bytes_or_none(f"{GENERATIONS_FOLDER}/{gen}/manifest.json")
    return manifest_model.loads(raw) if raw else None


def _exists(uri: str) -> bool:
    store, key = _split_uri(uri)
    return store.exists(key)


def recent_generations(out_uri: str, live: Manifest, *, days: float, now: datetime,
                       state_uri: str | None = None) -> list[tuple[str, datetime, str]]:
    """(generation, created, changes URI) of the live history newer than `days` before `now`.

    Newest first; a generation exactly `days` old is out, so nightly runs and
    days=7 make a feed of seven generations.

    Generations whose manifest or changes file is gone (garbage-collected) are skipped.
    """
    out = storage.open_storage(out_uri)
    cutoff = now - timedelta(days=days)
    found = []
    for gen in live.get("history") or [live["generation"]]:
        m = _generation_manifest(out, live, gen)
        if m is None:
            log.debug("notify: generation %s has no manifest any more; not in the feed", gen)
            continue
        created = _parse_w3c(m["created"])
        if created <= cutoff:
            break  # the history is newest first; nightly runs: days=7 covers 7 of them
        if created > now:
            continue
        changes = (storage.join(state_uri, GENERATIONS_FOLDER, gen, "changes.parquet")
                   if state_uri else (m.get("state") or {}).get("changes")
                   or state_files(storage.join(out_uri, "_state"), gen)["changes"])
        if not changes or not _exists(changes):
            log.warning("notify: the changes of generation %s are gone (%s); the feed leaves "
                        "them out", gen, changes or "not recorded")
            continue
        found.append((gen, created, changes))
    return found


def feed_entries(generations: list[tuple[str, datetime, str]], max_entries: int
                 ) -> list[tuple[str, str, str]]:
    """(url, change, updated) of the generations' changes files (newest first): each
    generation's newest entries (sql/feed_entries.sql) until `max_entries` are found."""
    from pipeline.load import register_parquet

    con = sql.connect()
    rows: list[tuple[str, str, str]] = []
    newer: list[str] = []
    for _, created, uri in generations:
        if len(rows) >= max_entries:
            break
        register_parquet(con, "feed_generation", [uri])
        if newer:
            register_parquet(con, "feed_newer_files", newer)
            con.sql("SELECT url FROM feed_newer_files").create_view("feed_newer", replace=True)
        else:
            con.sql("SELECT NULL::VARCHAR AS url WHERE false").create_view(
                "feed_newer", replace=True)
        found = con.execute(sql.load_sql("feed_entries"), {
            "created": created, "limit": max_entries - len(rows)}).fetchall()
        rows += [(str(u), str(c), str(t)) for u, c, t in found]
        newer.append(uri)
    return rows


def atom_feed(*, feed_url: str, site_url: str, updated: str,
              entries: Iterable[tuple[str, str, str]]) -> bytes:
    """An Atom 1.0 feed: one entry per (url, change, updated); ids are the URLs."""
    host = urlsplit(site_url).netloc
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<feed xmlns="{ATOM_NS}">\n',
        f"<id>{escape(feed_url)}</id>\n",
        f"<title>{escape(f'Recently added and changed pages of {site_url}')}</title>\n",
        f"<updated>{updated}</updated>\n",
        f'<link rel="self" type="application/atom+xml" href={quoteattr(feed_url)}/>\n',
        f"<link rel=\"alternate\" href={quoteattr(site_url)}/>\n",
        f"<author><name>{escape(host)}</name></author>\n",
        "<generator>sitemap-pipeline</generator>\n",
    ]
    for url, change, when in entries:
        loc = escape(url)
        parts.append(f"<entry><id>{loc}</id><title>{loc}</title>"
                     f"<link rel=\"alternate\" href={quoteattr(url)}/>"
                     f"<updated>{when}</updated><category term={quoteattr(change)}/></entry>\n")
    parts.append("</feed>\n")
    return "".join(parts).encode("utf-8")


def write_feed(out_uri: str, state_uri: str | None = None, *, days: float = DEFAULT_FEED_DAYS,
               max_entries: int = DEFAULT_FEED_ENTRIES, now: datetime | None = None
               ) -> dict[str, Any]:
    """Write `feed.atom` for the live generation of `out_uri`; returns its counts.

    It lists the URLs added or changed in the generations created in the `days`
    up to `now` (default: the live generation's time, so the feed depends on the
    published generations only), newest change first, each URL once, at most
    `max_entries`. `state_uri`: where the changes files are when not where the
    manifests say. An unchanged feed is not rewritten.
    """
    if max_entries < 1:
        raise ConfigError(f"max_entries must be at least 1, not {max_entries}")
    live = read_live(out_uri).manifest
    if live is None:
        raise ConfigError(f"{out_uri} has no live generation yet: nothing to make a feed of")
    created = _parse_w3c(live["created"])
    gens = recent_generations(out_uri, live, days=days, now=(now or created).astimezone(UTC),
                              state_uri=state_uri)
    rows = feed_entries(gens, max_entries + 1)
    truncated = len(rows) > max_entries
    rows = rows[:max_entries]
    updated = max([live["created"], *(r[2] for r in rows)])
    feed_url = public_join(live["public_url"], FEED_KEY)
    body = atom_feed(feed_url=feed_url, site_url=live["site_url"], updated=updated, entries=rows)
    out = storage.open_storage(out_uri)
    written = out.read_bytes_or_none(FEED_KEY) != body
    if written:
        out.write_bytes(FEED_KEY, body, cache_control=storage.CACHE_SHORT)
    if truncated:
        log.info("notify: the feed keeps the newest %d changes only", max_entries)
    log.info("notify: feed %s: %d entries from %d generation(s)%s", feed_url, len(rows),
             len(gens), "" if written else " (unchanged)")
    return {"uri": out.uri(FEED_KEY), "url": feed_url, "entries": len(rows),
            "generations": [g for g, _, _ in gens], "truncated": truncated, "written": written}


# --- IndexNow -----------------------------------------------------------------------------

def check_indexnow_key(key: str) -> None:
    if not INDEXNOW_KEY_REGEX.fullmatch(key or ""):
        raise ConfigError("an IndexNow key is 8 to 128 characters of a-z, A-Z, 0-9 and '-'")


def _post(endpoint: str, body: bytes, timeout: float) -> tuple[int | None, str, float | None]:
    """(HTTP status or None on a connection error, short detail, Retry-After seconds)."""
    req = urllib.request.Request(endpoint, data=body, method="POST", headers={
        "Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - scheme checked
            resp.read()
            return int(resp.status), "", None
    except urllib.error.HTTPError as exc:
        try:
            detail = exc.read(300).decode("utf-8", "replace").strip()
        except (OSError, http.client.HTTPException):
            detail = ""
        retry_after = exc.headers.get("Retry-After") if exc.headers else None
        try:
            wait = float(retry_after) if retry_after is not None else None
        except ValueError:
            wait = None
        return int(exc.code), detail, wait
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        return None, str(getattr(exc, "reason", exc)), None


def _refusal(status: int | None, detail: str, *, host: str, key_url: str, attempts: int) -> str:
    tail = f" ({detail})" if detail else ""
    if status == 403:
        return (f"IndexNow refused the key (403){tail}: {key_url} must be reachable and contain "
                "exactly the key; publish it (pipeline.notify.publish_indexnow_key) and check "
                "the key; the remaining batches are not sent")
    if status == 422:
        return (f"IndexNow refused the URLs (422){tail}: they must be on {host} and below the "
                f"folder of the key file {key_url}")
    if status == 400:
        return f"IndexNow refused the request as malformed (400){tail}"
    if status == 429:
        return (f"IndexNow is throttling (429) after {attempts} attempt(s){tail}; the remaining "
                "batches are not sent; the sitemaps list the URLs anyway")
    if status is None:
        return f"IndexNow endpoint unreachable after {attempts} attempt(s){tail}"
    return f"IndexNow answered HTTP {status} after {attempts} attempt(s){tail}"


def _batches(urls: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(urls)
    while batch := list(itertools.islice(it, size)):
        yield batch


def submit_indexnow(urls: Iterable[str], *, host: str, key: str, key_location: str | None,
                    endpoint: str = INDEXNOW_ENDPOINT, batch_size: int = INDEXNOW_MAX_URLS,
                    retries: int = 4, backoff: float = 1.0, timeout: float = 10
                    ) -> dict[str, Any]:
    """POST `urls` to IndexNow in batches; returns counts, never raises for HTTP errors.

    Each batch is `{host, key, keyLocation, urlList}` (keyLocation left out when
    None: the key is then expected at https://host/<key>.txt). 429, 5xx and
    connection errors are retried `retries` times, waiting `backoff` * 2^n
    seconds (or the Retry-After asked for, up to a minute). A refusal (400, 403,
    422, retries exhausted) is logged as a WARNING; after a 403 (the key) or an
    exhausted 429 (throttled) the remaining batches are not sent. URLs not on
    `host` are left out (IndexNow would refuse the whole batch).
    """
    check_indexnow_key(key)
    if urlsplit(endpoint).scheme not in ("http", "https"):
        raise ConfigError(f"the IndexNow endpoint {endpoint!r} must be an http(s) URL")
    if not 1 <= batch_size <= INDEXNOW_MAX_URLS:
        raise ConfigError(f"IndexNow takes 1..{INDEXNOW_MAX_URLS:,} URLs per request, "
                          f"not {batch_size}")
    key_url = key_location or f"https://{host}/{key}.txt"
    result: dict[str, Any] = {"submitted": 0, "batches": 0, "failed_batches": 0,
                              "failed_urls": 0, "skipped_urls": 0, "off_host": 0,
                              "retries": 0, "statuses": {}}
    statuses: dict[str, int] = result["statuses"]
    host_l = host.lower()

    def on_host(u: str) -> bool:
        if urlsplit(u).netloc.lower() == host_l:
            return True
        result["off_host"] += 1
        return False

    batches = _batches(filter(on_host, urls), batch_size)
    for batch in batches:
        payload: dict[str, Any] = {"host": host, "key": key}
        if key_location:
            payload["keyLocation"] = key_location
        payload["urlList"] = batch
        body = json.dumps(payload).encode("utf-8")
        result["batches"] += 1
        status: int | None = None
        detail = ""
        attempt = 0
        while True:
            attempt += 1
            status, detail, retry_after = _post(endpoint, body, timeout)
            retryable = status is None or status == 429 or status >= 500
            if (status is not None and 200 <= status < 300) or not retryable or \
                    attempt > retries:
                break
            wait = backoff * 2 ** (attempt - 1)
            if retry_after is not None:
                wait = max(wait, min(retry_after, MAX_RETRY_AFTER))
            log.info("notify: IndexNow answered %s; retrying in %.1f s", status or "nothing",
                     wait)
            result["retries"] += 1
            time.sleep(wait)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if status is not None and 200 <= status < 300:
            result["submitted"] += len(batch)
            continue
        result["failed_batches"] += 1
        result["failed_urls"] += len(batch)
        log.warning("notify: %s", _refusal(status, detail, host=host, key_url=key_url,
                                            attempts=attempt))
        if status in (403, 429):
            result["skipped_urls"] = sum(len(b) for b in batches)
            break
    if result["off_host"]:
        log.warning("notify: %d URL(s) not on %s were not submitted to IndexNow",
                    result["off_host"], host)
    log.info("notify: IndexNow: %d URL(s) submitted in %d batch(es), %d batch(es) failed",
             result["submitted"], result["batches"], result["failed_batches"])
    return result


def indexnow_key_name(key: str, key_location: str | None, public_url: str | None) -> str:
    """The key (path below the storage root) the key file goes to."""
    if key_location is None:
        return f"{key}.txt"
    if public_url is None:  # the storage is the site's root
        name = urlsplit(key_location).path.lstrip("/")
    else:
        prefix = public_url if public_url.endswith("/") else public_url + "/"
        if not key_location.startswith(prefix):
            raise ConfigError(
                f"the IndexNow key location {key_location} is not below the output's public URL "
                f"{public_url}: publish the key file to the storage of the site's root instead")
        name = key_location[len(prefix):]
    if not name or name.endswith("/"):
        raise ConfigError(f"the IndexNow key location {key_location} does not name a file")
    return name


def publish_indexnow_key(target: str | storage.Storage, key: str,
                         key_location: str | None = None, *, public_url: str | None = None
                         ) -> str:
    """Publish the IndexNow key file (its content: the key) at `key_location`; returns its URI.

    `target`: an output URI (the key file goes below its public URL, taken from
    its live manifest unless given) or the storage (or URI) of the site's root.
    Without `key_location` the file is `<key>.txt` at the root of `target`,
    which must then be served at the host's root. Not rewritten when unchanged.
    """
    check_indexnow_key(key)
    store = storage.open_storage(target) if isinstance(target, str) else target
    if public_url is None and isinstance(target, str):
        live = read_live(target).manifest
        public_url = live["public_url"] if live else None
    name = indexnow_key_name(key, key_location, public_url)
    if key_location is None and public_url and urlsplit(public_url).path not in ("", "/"):
        log.warning("notify: the IndexNow key file goes to %s, which is not the host's root; "
                    "IndexNow looks for it at the root unless a key location is given",
                    public_join(public_url, name))
    if store.read_bytes_or_none(name) != key.encode():
        store.write_bytes(name, key.encode(), cache_control=storage.CACHE_SHORT)
        log.info("notify: IndexNow key file written to %s", store.uri(name))
    return store.uri(name)


def generation_changed_urls(changes_uris: str | Sequence[str], fetch: int = INDEXNOW_MAX_URLS
                            ) -> Iterator[str]:
    """The URLs of a changes Parquet file, or of a run's changes parts read together
    (sql/indexnow_urls.sql), streamed."""
    from pipeline.load import register_parquet

    con = sql.connect()
    register_parquet(con, "generation_changes", [changes_uris] if isinstance(changes_uris, str)
                     else list(changes_uris))
    cur = con.execute(sql.load_sql("indexnow_urls"))
    while rows := cur.fetchmany(fetch):
        for (url,) in rows:
            yield str(url)


# --- the step -----------------------------------------------------------------------------

def notify_step(ctx: RunContext, summary: dict[str, Any], *,
                indexnow_key: str | None = None, indexnow_endpoint: str | None = None,
                key_location: str | None = None, feed_days: float | None = DEFAULT_FEED_DAYS,
                report: bool = True, indexnow_first_generation: bool = False
                ) -> dict[str, Any]:
    """After publish: feed, run report, IndexNow; returns small counts.

    On an unchanged run (`summary["published"]` false) only a missing feed or
    report is written again (a lost notify converges) and nothing is submitted.
    IndexNow is off without `indexnow_key`, and skips a first generation (every
    URL is "added": the sitemaps announce them) unless `indexnow_first_generation`.
    """
    from pipeline import report as run_report

    out_uri = ctx.out
    out = storage.open_storage(out_uri)
    limits = ctx.options.limits
    result: dict[str, Any] = {"generation": summary["generation"]}
    if not summary.get("published"):
        result["skipped"] = "unchanged"
        if feed_days and not out.exists(FEED_KEY):
            result["feed_entries"] = write_feed(out_uri, days=feed_days)["entries"]
        reports = run_report.report_prefix(out_uri, ctx.state, ctx.options.report_to)
        if report and not storage.open_storage(reports).exists(
                run_report.report_key(summary["generation"])):
            result["report"] = run_report.write_report(out_uri, limits=limits,
                                                       state_uri=ctx.state,
                                                       report_to=ctx.options.report_to)
        return result

    if feed_days:
        feed = write_feed(out_uri, days=feed_days)
        result.update(feed_entries=feed["entries"], feed=feed["uri"])
        live = read_live(out_uri).manifest
        if live is not None:
            repair_root(out, live)  # robots-sitemaps.txt lists the feed once it exists
    if report:
        result["report"] = run_report.write_report(out_uri, limits=limits, state_uri=ctx.state,
                                                   report_to=ctx.options.report_to)

    if not indexnow_key:
        return result
    raw = out.read_bytes_or_none(f"{GENERATIONS_FOLDER}/{summary['generation']}/manifest.json")
    manifest = json.loads(raw) if raw else {}
    changes = (manifest.get("state") or {}).get("changes") or (
        state_files(ctx.state, summary["generation"])["changes"] if manifest else None)
    if not manifest.get("previous") and not indexnow_first_generation:
        log.info("notify: first generation: IndexNow not told (the sitemaps list every URL)")
        result["indexnow"] = {"skipped": "first generation"}
        return result
    if not changes:
        log.warning("notify: generation %s records no changes file; IndexNow not told",
                    summary["generation"])
        result["indexnow"] = {"skipped": "no changes file"}
        return result
    host = urlsplit(ctx.site_url).netloc
    try:
        publish_indexnow_key(out_uri, indexnow_key, key_location, public_url=ctx.public_url)
    except ConfigError as exc:
        log.info("notify: the site must serve the IndexNow key file itself: %s", exc)
    key_url = key_location or f"https://{host}/{indexnow_key}.txt"
    key_folder = key_url.rpartition("/")[0] + "/"
    if not ctx.site_url.startswith(key_folder):
        log.warning("notify: the IndexNow key file %s covers only URLs below %s, not the site "
                    "%s: IndexNow will refuse them (422); serve the key at the host's root",
                    key_url, key_folder, ctx.site_url)
    result["indexnow"] = submit_indexnow(
        generation_changed_urls(changes), host=host, key=indexnow_key,
        key_location=key_location, endpoint=indexnow_endpoint or INDEXNOW_ENDPOINT)
    return result
