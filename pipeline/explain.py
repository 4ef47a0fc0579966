"""`sitemaps explain URL`: why one URL is (not) in the live sitemaps, and its history.

The URL is spelled as load spells inventory URLs (pipeline.urls.check_url under the live
manifest's site), then looked up in each kept generation's state files:

- the snapshot, for the published row: the footer's shard bounds name the one shard whose
  URL range holds it, and a filter on that shard's section and number (columns the snapshot
  keeps statistics of; the URL's are not written) reads only its row groups;
- the rejects, for the rows left out (any spelling of the URL: each reject's URL is
  normalised by load's own SQL rules, sql/normalize_macros.sql);
- the changes, for what each generation's run did to it.

The manifest maps the row's section and shard to the sitemap file and its public URL,
and the file's place in the manifest's list to the index that lists it (publish cuts the
list into indexes in order).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline import manifest as manifest_model
from pipeline import sql, storage
from pipeline.errors import ConfigError
from pipeline.layout import CHANGES_KEY, REJECTS_KEY, SNAPSHOT_KEY, generation_key
from pipeline.limits import MAX_URL_LENGTH
from pipeline.load import register_url_rules
from pipeline.manifest import Manifest
from pipeline.parquet import register_parquet
from pipeline.publish import read_live, snapshot_uri
from pipeline.snapshot import register_snapshot, shard_bounds
from pipeline.state_owner import resolve_state
from pipeline.status import kept_generations
from pipeline.urls import CLEAN_URL_REGEX, IRI_PATH_REGEX, SITE_URL_HINTS, Site, check_url
from pipeline.w3c import format_w3c

#: What each reject reason means, for a user reading one answer (docs/operations.md has
#: the rules in full).
REASON_TEXT = {
    "invalid_utf8": "a string of the row is not valid UTF-8",
    "empty": "the URL is empty",
    "illegal_char": "the URL holds a control or XML-illegal character",
    "relative": "the URL has no scheme and host (a relative reference)",
    "not_http": "the URL's scheme is not http or https",
    "bad_host": "the URL's host or port is not valid (or it has user info)",
    "bad_percent_encoding": "a % in the URL is not followed by two hex digits",
    "too_long": f"the URL is longer than {MAX_URL_LENGTH:,} characters once encoded",
    "off_site": "the URL is not under the site URL",
    "not_200": "the row's http_status is not 200 (the indexability gate)",
    "redirect": "the row's redirect_to is set (the indexability gate)",
    "noindex": "the row's noindex is true (the indexability gate)",
    "not_canonical": "the row's canonical_url names another URL (the indexability gate)",
    "too_large": "the row's <url> element with its extensions fits in no sitemap file",
    "duplicate": "another row has the same normalised URL and won: the newest lastmod "
                 "(none counts as oldest), then the smallest hash of its content, then the "
                 "first row",
}


#: The rejects' columns added after their first version (sql/rejected_rows.sql), as the
#: NULL a file written before them reads as.
DETAIL_COLUMNS = {"detail": "NULL::VARCHAR", "winner_row_id": "NULL::BIGINT",
                  "winner_lastmod": "NULL::TIMESTAMPTZ"}


@dataclass
class Reject:
    """One rejected row of the URL (rejected_rows' columns) and what its reason means."""

    row_id: int
    reason: str
    url: str
    lastmod: str | None
    changefreq: str | None
    priority: float | None
    why: str
    #: The value that caused it, `name=value` (http_status=404, length=2101, ...); of a
    #: duplicate, the tie rule that made the winner win ('newer lastmod', ...). None when
    #: the value is the URL itself, or in a rejects file of an earlier version.
    detail: str | None = None
    #: A duplicate's: the row it lost to and that row's lastmod.
    winner_row_id: int | None = None
    winner_lastmod: str | None = None

    def cause(self) -> str | None:
        """The detail in words: a duplicate's winner and why it won, else the value."""
        if self.winner_row_id is None:
            return self.detail
        return (f"lost to row {self.winner_row_id} (lastmod {self.winner_lastmod or 'none'})"
                + (f": {self.detail}" if self.detail else ""))


@dataclass
class Listing:
    """Where a published URL is: its sitemap file, the index listing that, its dates."""

    section: str
    shard: int
    sitemap_key: str
    sitemap_url: str
    index_key: str | None
    index_url: str | None
    lastmod: str | None
    first_seen: str | None
    last_changed: str | None


@dataclass
class GenerationEntry:
    """The URL in one kept generation: published or not, and its run's change."""

    generation: str
    live: bool
    created: str
    #: None: the generation's snapshot is gone (its state was deleted).
    published: bool | None
    change: str | None
    sitemap_url: str | None = None


@dataclass
class Explanation:
    url: str
    normalized: str
    out: str
    generation: str
    published: bool
    #: published, duplicate (published, other rows of it lost), rejected, not_in_inventory
    verdict: str
    listing: Listing | None
    rejects: list[Reject]
    #: The oldest kept generation since which the URL has been published unchanged.
    unchanged_since: str | None
    history: list[GenerationEntry] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def normalize(raw: str, site: Site) -> str:
    """`raw` as load would publish it, or ConfigError saying why load would reject it."""
    checked = check_url(raw, site.prefix)
    if not checked.startswith("!"):
        return checked
    reason = checked[1:]
    if reason == "off_site":
        raise ConfigError(f"{raw!r} is not on the site {site.prefix} (off_site): give a URL "
                          "under it")
    hint = SITE_URL_HINTS.get(reason, REASON_TEXT.get(reason, reason))
    raise ConfigError(f"{raw!r} is not a URL load could publish ({reason}): {hint}")


def explain(out_uri: str, url: str, state_uri: str | None = None) -> Explanation:
    """Why `url` is (not) in the live generation of `out_uri`, and its kept history.

    ConfigError (exit 2) when there is no generation at `out_uri` or the URL is not one
    load could publish on the site."""
    live = read_live(out_uri).manifest
    if live is None:
        raise ConfigError(f"no generation at {out_uri}: give the --out of a published output")
    site = Site.parse(live["site_url"])
    normalized = normalize(url, site)
    state = resolve_state(out_uri, state_uri)
    con = sql.connect(threads=2)
    row = find_published(con, snapshot_uri(live, state), normalized)
    rejects = find_rejects(con, storage.join(state, generation_key(live["generation"], REJECTS_KEY)),
                           url, normalized, site)
    listing = _listing(live, row) if row else None
    history = _history(con, out_uri, live, state, normalized, row)
    if row:
        verdict = "duplicate" if any(r.reason == "duplicate" for r in rejects) else "published"
    else:
        verdict = "rejected" if rejects else "not_in_inventory"
    return Explanation(
        url=url, normalized=normalized, out=out_uri, generation=live["generation"],
        published=row is not None, verdict=verdict, listing=listing, rejects=rejects,
        unchanged_since=_unchanged_since(history) if row else None, history=history)


def find_published(con: duckdb.DuckDBPyConnection, snapshot: str, url: str
                   ) -> dict[str, Any] | None:
    """The snapshot row of `url` (SNAPSHOT_COLUMNS but the fingerprint), or None. Reads
    the footer, then only the row groups of the shard whose bounds hold `url`."""
    bounds = shard_bounds(snapshot)
    register_snapshot(con, snapshot, "snapshot_rows")
    if bounds is None:  # an earlier version's snapshot: scanned whole
        return sql.first_row(con, sql.load_sql("explain_snapshot_scan"), {"url": url}) or None
    for b in bounds.to_pylist():
        if b["lower"] <= url <= b["upper"]:
            found = sql.first_row(con, sql.load_sql("explain_snapshot_row"),
                                  {"url": url, "section": b["section"], "shard": b["shard"]})
            if found:
                return found
    return None


def find_rejects(con: duckdb.DuckDBPyConnection, rejects_uri: str, raw: str, url: str,
                 site: Site) -> list[Reject]:
    """The rejected rows of `url` in one generation's rejects file (none if it is gone)."""
    store, name = storage.open_file(rejects_uri)
    if not store.exists(name):
        return []
    register_url_rules(con)
    register_parquet(con, "rejects_file", [rejects_uri], hive=False)
    # a file of an earlier version has no detail columns: NULL, as for a row without one
    have = con.sql("SELECT * FROM rejects_file LIMIT 0").columns
    added = "".join(f", {expr} AS {name}" for name, expr in DETAIL_COLUMNS.items()
                    if name not in have)
    con.sql(f"SELECT *{added} FROM rejects_file").create_view("rejects", replace=True)
    rows = con.sql(sql.load_sql("explain_rejects"), params={
        "raw_url": raw, "url": url, "site_prefix": site.prefix, "clean_regex": CLEAN_URL_REGEX,
        "iri_regex": IRI_PATH_REGEX, "max_len": MAX_URL_LENGTH}).fetchall()
    return [Reject(row_id=int(r[0]), reason=r[1], url=r[2], lastmod=_w3c(r[3]), changefreq=r[4],
                   priority=None if r[5] is None else float(r[5]),
                   why=REASON_TEXT.get(r[1], r[1]), detail=r[6],
                   winner_row_id=None if r[7] is None else int(r[7]),
                   winner_lastmod=_w3c(r[8])) for r in rows]


def _listing(manifest: Manifest, row: dict[str, Any]) -> Listing:
    """The sitemap file of the row's section and shard, and the index that lists it."""
    position, entry = next(((i, s) for i, s in enumerate(manifest["sitemaps"])
                            if s["section"] == row["section"] and s["shard"] == row["shard"]),
                           (None, None))
    if entry is None or position is None:
        raise ConfigError(f"the live manifest lists no sitemap of section {row['section']!r} "
                          f"shard {row['shard']}, which the snapshot names: run "
                          "`sitemaps status` to check the output")
    index = None
    listed = 0
    for candidate in manifest["indexes"]:  # publish cuts the sitemaps' list in order
        listed += candidate["sitemaps"]
        if position < listed:
            index = candidate
            break
    return Listing(
        section=row["section"], shard=int(row["shard"]), sitemap_key=entry["key"],
        sitemap_url=entry["url"], index_key=index["key"] if index else None,
        index_url=index["url"] if index else None, lastmod=_w3c(row["lastmod"]),
        first_seen=_w3c(row["first_seen"]), last_changed=_w3c(row["last_changed"]))


def _history(con: duckdb.DuckDBPyConnection, out_uri: str, live: Manifest, state: str,
             url: str, live_row: dict[str, Any] | None) -> list[GenerationEntry]:
    """The URL in each kept generation, newest first."""
    out = storage.open_storage(out_uri)
    entries = []
    for kept in kept_generations(out, live):
        gen = kept.generation
        manifest = live if kept.live else manifest_model.read_stored(out, gen)
        state_store = storage.open_storage(state)
        snapshot = storage.join(state, generation_key(gen, SNAPSHOT_KEY))
        if kept.live:
            row, present = live_row, True
        elif state_store.exists(generation_key(gen, SNAPSHOT_KEY)):
            row, present = find_published(con, snapshot, url), True
        else:
            row, present = None, False
        change = None
        changes_key = generation_key(gen, CHANGES_KEY)
        if state_store.exists(changes_key):
            register_parquet(con, "changes", [storage.join(state, changes_key)], hive=False)
            found = sql.first_row(con, sql.load_sql("explain_changes"), {"url": url})
            change = found["change"] if found else None
        sitemap_url = None
        if row and manifest:
            sitemap_url = next((s["url"] for s in manifest["sitemaps"]
                                if s["section"] == row["section"] and s["shard"] == row["shard"]),
                               None)
        entries.append(GenerationEntry(
            generation=gen, live=kept.live, created=kept.created,
            published=(row is not None) if present else None, change=change,
            sitemap_url=sitemap_url))
    return entries


def _unchanged_since(history: list[GenerationEntry]) -> str | None:
    """The oldest generation of the newest run of kept ones where the URL was published
    and its run neither added nor changed it before (the one that did, if kept)."""
    since = None
    for entry in history:  # newest first
        if not entry.published:
            break
        since = entry.generation
        if entry.change in ("added", "changed"):
            break
    return since


def _w3c(value: Any) -> str | None:
    return None if value is None else format_w3c(value)
