"""IndexNow: `submit_indexnow` posts a generation's changed URLs (added, changed, removed)
in batches; refusals are logged, never raised. Off unless a key is configured. Google's
sitemap ping is retired: nothing pings it."""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from pipeline import sql, storage
from pipeline.errors import ConfigError
from pipeline.publish import public_join, read_live

log = logging.getLogger(__name__)

INDEXNOW_ENDPOINT = "https://api.indexnow.org/indexnow"
#: URLs in one IndexNow POST at most (the protocol's limit).
INDEXNOW_MAX_URLS = 10_000
#: An IndexNow key: 8 to 128 characters of a-z, A-Z, 0-9 and "-".
INDEXNOW_KEY_REGEX = re.compile(r"[A-Za-z0-9-]{8,128}")
#: Longest wait honoured from a Retry-After header, in seconds.
MAX_RETRY_AFTER = 60.0
USER_AGENT = "sitemap-pipeline (IndexNow client)"


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
    from pipeline.parquet import register_parquet

    con = sql.connect()
    register_parquet(con, "generation_changes", [changes_uris] if isinstance(changes_uris, str)
                     else list(changes_uris))
    cur = con.execute(sql.load_sql("indexnow_urls"))
    while rows := cur.fetchmany(fetch):
        for (url,) in rows:
            yield str(url)
