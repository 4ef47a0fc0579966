"""The feed: `write_feed` writes `feed.atom` beside the root index, an Atom 1.0 feed of the
URLs added or changed in the last days' generations. The sitemaps.org protocol accepts a
feed as a sitemap, so robots-sitemaps.txt lists it too."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

from pipeline import manifest as manifest_model
from pipeline import sql, storage
from pipeline.errors import ConfigError
from pipeline.layout import FEED_KEY, state_file_key
from pipeline.manifest import Manifest
from pipeline.publish import public_join, read_live, state_files
from pipeline.state_owner import resolve_state
from pipeline.w3c import parse_w3c

log = logging.getLogger(__name__)

ATOM_NS = "http://www.w3.org/2005/Atom"
DEFAULT_FEED_DAYS = 7
#: Entries of one feed at most (the newest changes are kept).
DEFAULT_FEED_ENTRIES = 10_000


def _generation_manifest(out: storage.Storage, live: Manifest, gen: str) -> Manifest | None:
    if gen == live["generation"]:
        return live
    return manifest_model.read_stored_or_skip(out, gen, "the feed")


def _exists(uri: str) -> bool:
    store, key = storage.open_file(uri)
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
    fallback_state: str | None = None
    for gen in live.get("history") or [live["generation"]]:
        m = _generation_manifest(out, live, gen)
        if m is None:
            log.debug("notify: generation %s has no manifest any more; not in the feed", gen)
            continue
        created = parse_w3c(m["created"])
        if created <= cutoff:
            break  # the history is newest first; nightly runs: days=7 covers 7 of them
        if created > now:
            continue
        changes: str | None
        if state_uri:
            changes = storage.join(state_uri, state_file_key(gen, "changes"))
        elif not (changes := (m.get("state") or {}).get("changes")):
            fallback_state = fallback_state or resolve_state(out_uri, None)  # resolved once
            changes = state_files(fallback_state, gen)["changes"]
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
    from pipeline.parquet import register_parquet

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
    created = parse_w3c(live["created"])
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
    log.debug("notify: feed %s: %d entries from %d generation(s)%s", feed_url, len(rows),
              len(gens), "" if written else " (unchanged)")
    return {"uri": out.uri(FEED_KEY), "url": feed_url, "entries": len(rows),
            "generations": [g for g, _, _ in gens], "truncated": truncated, "written": written}
