"""The manifest: the typed model of a generation's `manifest.json`, read and written here.

A generation's manifest lists every file it serves (its sitemaps and index files) with
their sizes and sha256s, its counts, and the generation history that GC and rollback
follow. It is written by publish (a new generation) and by rollback (the live pointer
moved back), both through `dumps`, so its bytes are the same whoever writes it (sorted
keys, one-space indents); every reader goes through `loads` or `parse`.

The types are `TypedDict`s: a manifest is the JSON object itself, so what is read is
what is written, key for key (manifests of older versions lack some keys: `NotRequired`).
"""

from __future__ import annotations

import json
import logging
from typing import Any, NotRequired, TypedDict

from pipeline import storage
from pipeline.errors import LiveStateCorrupt
from pipeline.layout import GENERATION_MANIFEST, generation_key

log = logging.getLogger(__name__)

#: The manifest's format number (`format`).
MANIFEST_FORMAT = 1


class SitemapEntry(TypedDict):
    """One sitemap file of the generation."""

    key: str
    url: str
    section: str
    shard: int
    urls: int
    #: Uncompressed and stored (gzipped) bytes; the sha256 of the stored file.
    bytes: int
    gzip_bytes: int
    sha256: str
    lastmod: str | None


class IndexEntry(TypedDict):
    """One sitemap index: its stable root key, its copy under the generation, its URL."""

    key: str
    generation_key: str
    url: str
    sitemaps: int
    bytes: int


class Manifest(TypedDict):
    format: int
    generation: str
    previous: str | None
    #: This generation and the ones before it, newest first (at most 51).
    history: list[str]
    #: The run's time (W3C, UTC) and when the generation went live.
    created: str
    committed: NotRequired[str]
    #: The commit's number: one more than the generation live before it (publish, rollback
    #: and repair each count one); repair orders committed generations by it, not by id.
    sequence: NotRequired[int]
    site_url: str
    public_url: str
    indexes: list[IndexEntry]
    sitemaps: list[SitemapEntry]
    #: The run's counts (input rows, rejects by reason, changes, shards) and published URLs.
    counts: dict[str, Any]
    #: When each earlier generation stopped being live (GC's grace period counts from it).
    retired: NotRequired[dict[str, str]]
    #: What the state files must be (size, sha256, rows), never where they are.
    state_check: NotRequired[dict[str, Any]]
    warnings: NotRequired[list[str]]
    #: Manifests before issue 14 named their state files (never written now).
    state: NotRequired[dict[str, str]]
    #: A rollback's record (status.rollback): who rolled back to what, when.
    rollback: NotRequired[dict[str, Any]]


def dumps(manifest: Manifest) -> bytes:
    """The manifest's bytes, as every writer writes them."""
    return json.dumps(manifest, indent=1, sort_keys=True).encode()


def loads(data: bytes) -> Manifest:
    """A manifest's JSON, as written by `dumps` (not checked: see `parse`)."""
    m: Manifest = json.loads(data)
    return m


def parse(data: bytes, where: str, repair_hint: str) -> Manifest:
    """A manifest's JSON, or LiveStateCorrupt: an empty or broken one is never "no generation"."""
    try:
        m = json.loads(data)
    except ValueError:
        m = None
    if not isinstance(m, dict) or not all(k in m for k in ("generation", "sitemaps", "indexes")):
        raise LiveStateCorrupt(
            f"{where} is {'empty' if not data.strip() else 'not a valid manifest'}; nothing was "
            f"published (the shrink guard and the lastmod history need it); {repair_hint}")
    manifest: Manifest = m  # type: ignore[assignment]
    return manifest


def read_stored(out: storage.Storage, generation: str) -> Manifest | None:
    """Generation `generation`'s own manifest (`generations/<id>/manifest.json`): None when
    it is gone (garbage-collected); LiveStateCorrupt when it is empty or broken (that
    generation cannot be rolled back to; gc keeps every shard while it is kept)."""
    key = generation_key(generation, GENERATION_MANIFEST)
    raw = out.read_bytes_or_none(key)
    if raw is None:
        return None
    return parse(raw, out.uri(key),
                 "that generation cannot be rolled back to (`sitemaps status` lists it)")


def read_stored_or_skip(out: storage.Storage, generation: str, why: str) -> Manifest | None:
    """`read_stored`, with a broken manifest logged (saying what `why` leaves it out of)
    and taken as gone: a report or a feed goes on without it."""
    try:
        return read_stored(out, generation)
    except LiveStateCorrupt as exc:
        log.warning("%s; %s leaves generation %s out", exc, why, generation)
        return None
