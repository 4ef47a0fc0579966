"""Stage 5, publish: indexes, manifest, one atomic swap, root index, robots lines.

Order (a crash anywhere leaves the previous generation live and whole):
1. shard files are already uploaded by render (immutable, keyed by digest), and the
   generation's snapshot, rejects and changes under the state prefix by the state step
   beside it (`save_state` returns what it stored, or stores it now);
2. the shrink guard may refuse the commit;
3. the generation's index files and manifest go under `generations/<id>/`;
4. commit: `manifest.json` is replaced with a conditional write on the
   version read when the run started (If-Match / If-None-Match: * on S3,
   compare-and-rename under a lock locally); a racing run loses here;
5. the generation's commit record (`generations/<id>/commit.json`: its `sequence`, one
   more than the generation it replaced) is written, then the stable root index(es)
   and `robots-sitemaps.txt` are rewritten from the now-live manifest (a later run
   repairs them if this step was lost), and only while that manifest is still the
   live one: root files only move forward. `sitemaps repair` trusts only generations
   with a record (or named in a recorded one's history), newest commit first.

A commit whose reply was lost (the write applied, botocore's retry got 412) is
recognised by reading the live manifest again. The manifest records when each
earlier generation stopped being live (`retired`), which GC's grace period counts
from, and the size, sha256 and row count of the snapshot (`state_check`), which
the next run checks before it diffs against it.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pipeline import manifest as manifest_model
from pipeline import storage
from pipeline.errors import InternalError, PublishConflict, ShrinkRefused
from pipeline.layout import (
    COMMIT_RECORD,
    FEED_KEY,
    GENERATION_MANIFEST,
    LIVE_MANIFEST_KEY,
    MORE_ROOT_INDEXES_PREFIX,
    ROBOTS_KEY,
    STATE_FILES,
    generation_key,
    generation_time,
    root_index_name,
    state_file_key,
)
from pipeline.manifest import MANIFEST_FORMAT, IndexEntry, Manifest, SitemapEntry
from pipeline.render import RenderedFile
from pipeline.settings import default_of
from pipeline.sitemap_xml import sitemap_index
from pipeline.snapshot import StoredState
from pipeline.urls import Site
from pipeline.w3c import format_w3c

log = logging.getLogger(__name__)

#: Refuse to publish fewer URLs than the live generation by more than this share.
DEFAULT_SHRINK_THRESHOLD: float = default_of("shrink_threshold")


@dataclass
class LiveState:
    """The live manifest as read when the run started, and its version tag."""

    manifest: Manifest | None
    etag: str | None

    @property
    def generation(self) -> str | None:
        return self.manifest["generation"] if self.manifest else None


@dataclass
class PublishResult:
    generation: str
    published: bool
    manifest: Manifest
    warnings: list[str] = field(default_factory=list)


def utcnow() -> datetime:
    """The clock of commits and GC: one place, so a test can move it."""
    return datetime.now(UTC)


def repair_hint(out_uri: str) -> str:
    return (f"run `sitemaps repair --out {out_uri}` to make the last committed intact "
            "generation live again (see docs/operations.md)")


def parse_manifest(data: bytes, where: str, out_uri: str) -> Manifest:
    """A manifest's JSON, or LiveStateCorrupt: an empty or broken one is never "no generation"."""
    return manifest_model.parse(data, where, repair_hint(out_uri))


def read_live(out_uri: str) -> LiveState:
    """The live manifest of `out_uri` (None before the first generation).

    Raises LiveStateCorrupt when `manifest.json` exists but is empty or unparseable.
    """
    out = storage.open_storage(out_uri)
    data, etag = out.read_with_etag(LIVE_MANIFEST_KEY)
    if data is None:
        return LiveState(None, None)
    return LiveState(parse_manifest(data, out.uri(LIVE_MANIFEST_KEY), out_uri), etag)


def state_files(state_uri: str, generation: str) -> dict[str, str]:
    """The URIs of a generation's private state files. The served manifest names none of
    them: a run finds them from its --state and the generation id."""
    return {name: storage.join(state_uri, state_file_key(generation, name)) for name in STATE_FILES}


def snapshot_uri(manifest: Manifest, state_uri: str) -> str:
    """The snapshot of `manifest`'s generation (manifests before issue 14 named it)."""
    return (manifest.get("state") or {}).get("snapshot") or \
        state_files(state_uri, manifest["generation"])["snapshot"]


def live_files(manifest: Manifest) -> dict[str, int]:
    """Every file the manifest's generation serves, with its stored size."""
    files = {s["key"]: int(s["gzip_bytes"]) for s in manifest["sitemaps"]}
    files.update({i["generation_key"]: int(i["bytes"]) for i in manifest["indexes"]})
    return files


def missing_files(out: storage.Storage, manifest: Manifest) -> list[str]:
    """The manifest's files that are absent or of another size: one listing per folder."""
    want = live_files(manifest)
    folders = {k.rpartition("/")[0] + "/" for k in want}
    found = {o.key: o.size for folder in sorted(folders) for o in out.list(folder)}
    return sorted(k for k, size in want.items() if found.get(k) != size)


def new_generation_id(run_time: datetime) -> str:
    """Sortable by time, unique across racing runs."""
    return f"{generation_time(run_time)}-{secrets.token_hex(3)}"


def index_name(n: int) -> str:
    """sitemap_index.xml, sitemap_index-2.xml, ..."""
    return root_index_name(n)


def public_join(public_url: str, key: str) -> str:
    return public_url.rstrip("/") + "/" + key


def cross_submission_warning(site: Site, public_url: str) -> str | None:
    """A warning when the sitemaps' folder does not contain the site's URLs."""
    pub = urlsplit(public_url)
    pub_path = pub.path if pub.path.endswith("/") else pub.path + "/"
    if (pub.scheme, pub.netloc.lower()) == (site.scheme, site.netloc) and site.path.startswith(
            pub_path):
        return None
    return (f"the sitemaps are served from {public_url}, which does not contain the site's URLs "
            f"({site.prefix}); search engines accept them only when the site's robots.txt lists "
            "them (cross-submission): add the robots-sitemaps.txt lines to "
            f"{site.scheme}://{site.netloc}/robots.txt")


def file_entries(rendered: list[RenderedFile], live: LiveState, public_url: str
                 ) -> list[SitemapEntry]:
    """Manifest entries of every shard; reused ones take their sizes from the live manifest."""
    previous = {s["key"]: s for s in (live.manifest["sitemaps"] if live.manifest else [])}
    entries = []
    for r in sorted(rendered, key=lambda f: (f.section, f.shard)):
        entry: SitemapEntry = {"key": r.key, "url": public_join(public_url, r.key), "section": r.section,
                 "shard": r.shard, "urls": r.urls, "bytes": r.bytes, "gzip_bytes": r.gzip_bytes,
                 "sha256": r.sha256, "lastmod": r.lastmod}
        if not r.written:
            old = previous.get(r.key)
            if old is None:
                raise InternalError(f"{r.key} was skipped but the live manifest does not list it")
            entry["gzip_bytes"], entry["sha256"] = old["gzip_bytes"], old["sha256"]
        entries.append(entry)
    return entries


def check_shrink(live: LiveState, published: int, threshold: float, allow_shrink: bool) -> None:
    """Refuses a generation far smaller than the live one (or empty), unless allowed."""
    if published == 0:
        raise ShrinkRefused(
            "the new generation would publish no URL at all (an empty inventory, or every row "
            "rejected); the live generation stays. An empty sitemap index is not valid, so this "
            "is refused even with --allow-shrink: to withdraw the sitemaps, remove their "
            "robots.txt lines")
    if allow_shrink:
        return
    if live.manifest is None:
        return
    before = int(live.manifest["counts"]["published"])
    if before and published < before * (1 - threshold):
        raise ShrinkRefused(
            f"the new generation would publish {published:,} URLs against {before:,} live "
            f"({(before - published) / before:.1%} fewer, more than the {threshold:.0%} allowed); "
            "the live generation stays; check the inventory, or pass --allow-shrink")


def same_content(live: LiveState, sitemaps: list[SitemapEntry], n_indexes: int) -> bool:
    """True when the live generation already publishes exactly these files. A shard written
    again under its key with other stored bytes (another gzip level or ISA-L version, a
    --force) is a change: the manifest must record the bytes now served."""
    if live.manifest is None:
        return False

    def files(entries: list[SitemapEntry]) -> list[tuple[Any, ...]]:
        return [(s["key"], s["lastmod"], s["sha256"], s["gzip_bytes"]) for s in entries]

    return files(live.manifest["sitemaps"]) == files(sitemaps) and \
        len(live.manifest["indexes"]) == n_indexes


def publish(out_uri: str, *, rendered: list[RenderedFile], live: LiveState, site: Site,
            public_url: str, generation: str, created: datetime, counts: dict[str, Any],
            max_sitemaps_per_index: int, save_state: Callable[[], StoredState] | None = None,
            allow_shrink: bool = False, shrink_threshold: float = DEFAULT_SHRINK_THRESHOLD,
            warnings: list[str] | None = None) -> PublishResult:
    """Write the generation's indexes and manifest and make it live (see module doc)."""
    out = storage.open_storage(out_uri)
    warnings = list(warnings or [])
    sitemaps = file_entries(rendered, live, public_url)
    chunks = [sitemaps[i:i + max_sitemaps_per_index]
              for i in range(0, len(sitemaps), max_sitemaps_per_index)] or [[]]
    if same_content(live, sitemaps, len(chunks)):
        assert live.manifest is not None
        log.info("publish: nothing changed; generation %s stays live", live.generation)
        repair_root(out, live.manifest)
        return PublishResult(live.manifest["generation"], False, live.manifest, warnings)

    published = sum(s["urls"] for s in sitemaps)
    check_shrink(live, published, shrink_threshold, allow_shrink)
    state_check = save_state().check if save_state else {}
    indexes: list[IndexEntry] = []
    for n, chunk in enumerate(chunks, start=1):
        body = sitemap_index((s["url"], s["lastmod"]) for s in chunk)
        gen_key = generation_key(generation, index_name(n))
        out.write_bytes(gen_key, body, cache_control=storage.CACHE_IMMUTABLE)
        indexes.append({"key": index_name(n), "generation_key": gen_key,
                        "url": public_join(public_url, index_name(n)), "sitemaps": len(chunk),
                        "bytes": len(body)})
    history = [generation] + list(live.manifest["history"] if live.manifest else [])[:50]
    committed = format_w3c(utcnow())
    # When each earlier generation stopped being live: GC's grace period counts from it.
    retired = {g: t for g, t in (live.manifest.get("retired", {}) if live.manifest else {}).items()
               if g in history}
    if live.generation:
        retired[live.generation] = committed
    manifest: Manifest = {
        "format": MANIFEST_FORMAT,
        "generation": generation,
        "sequence": next_sequence(live.manifest),
        "previous": live.generation,
        "history": history,
        "created": format_w3c(created.astimezone(UTC)),
        "site_url": site.prefix,
        "public_url": public_url,
        "indexes": indexes,
        "sitemaps": sitemaps,
        "counts": {**counts, "published": published, "sitemaps": len(sitemaps)},
        "committed": committed,
        "retired": retired,
        # What the state files must be, never where they are: served files name nothing private.
        "state_check": state_check,
        "warnings": warnings,
    }
    body = manifest_model.dumps(manifest)
    out.write_bytes(generation_key(generation, GENERATION_MANIFEST), body,
                    cache_control=storage.CACHE_IMMUTABLE)
    try:
        out.put_if(LIVE_MANIFEST_KEY, body, if_match=live.etag, cache_control=storage.CACHE_SHORT)
    except PublishConflict:
        # The write may have applied with its reply lost (botocore's retry then gets 412):
        # whose generation is live says whether this commit happened.
        if read_live(out_uri).generation != generation:
            raise
        log.warning("publish: the commit's reply was lost, but generation %s is live", generation)
    log.debug("publish: generation %s is live (%d URLs in %d sitemaps, %d index file(s))",
              generation, published, len(sitemaps), len(indexes))
    repair_root(out, manifest, previous=live.manifest)
    return PublishResult(generation, True, manifest, warnings)


def next_sequence(live: Manifest | None) -> int:
    """The sequence of a commit that replaces `live` (1 for a first generation, and for one
    after a live manifest of a version that did not count)."""
    return int(live.get("sequence") or 0) + 1 if live else 1


def commit_record(manifest: Manifest) -> bytes:
    """The bytes of the generation's commit record (layout.COMMIT_RECORD): the commit that
    made `manifest` live, read by `sitemaps repair`."""
    return json.dumps({"generation": manifest["generation"], "sequence": manifest["sequence"],
                       "committed": manifest.get("committed")}, sort_keys=True).encode()


def robots_lines(manifest: Manifest, feed: bool = False) -> bytes:
    """One `Sitemap:` line per root index of the manifest, then the feed's (a feed is a
    valid sitemap for the sitemaps.org protocol) when the output has one."""
    urls = [i["url"] for i in manifest["indexes"]]
    if feed:
        urls.append(public_join(manifest["public_url"], FEED_KEY))
    return "".join(f"Sitemap: {u}\n" for u in urls).encode()


def repair_root(out: storage.Storage, manifest: Manifest,
                previous: Manifest | None = None) -> int:
    """Make the commit record, the stable root index(es) and robots lines match `manifest`;
    returns the root files fixed.

    Only while `manifest` is the live one: a stalled run that resumes after a later
    commit must not roll the root files back to its own, older generation.
    """
    live = read_live(out.root).generation
    if live != manifest["generation"]:
        log.warning("publish: generation %s is live, not %s: the root files are left to it",
                    live, manifest["generation"])
        return 0
    if "sequence" in manifest:  # after the swap only: a record says "this was committed"
        record = commit_record(manifest)
        key = generation_key(manifest["generation"], COMMIT_RECORD)
        if out.read_bytes_or_none(key) != record:
            out.write_bytes(key, record, cache_control=storage.CACHE_SHORT)
    fixed = 0
    for index in manifest["indexes"]:
        want = out.read_bytes(index["generation_key"])
        if out.read_bytes_or_none(index["key"]) != want:
            out.write_bytes(index["key"], want, cache_control=storage.CACHE_SHORT)
            fixed += 1
    robots = robots_lines(manifest, feed=out.exists(FEED_KEY))
    if out.read_bytes_or_none(ROBOTS_KEY) != robots:
        out.write_bytes(ROBOTS_KEY, robots, cache_control=storage.CACHE_SHORT)
        fixed += 1
    # A root index the new generation no longer has would list stale files.
    current = {i["key"] for i in manifest["indexes"]}
    stale = {i["key"] for i in (previous["indexes"] if previous else [])} - current
    stale |= {o.key for o in out.list(MORE_ROOT_INDEXES_PREFIX) if "/" not in o.key} - current
    if stale:
        out.delete(sorted(stale))
        fixed += len(stale)
    if fixed:
        log.info("publish: %d root file(s) brought in line with generation %s", fixed,
                 manifest["generation"])
    return fixed
