"""The plan's shard model: one planned sitemap file, its key, and the plan's results.

A shard's key is made from its content alone (URL count, body bytes, XOR of its rows'
hashes, bound to the file format around it), so the same content always gives the same
key and a shard whose key is already live is reused. Rows carry no shard number: a
shard's rows are a run of consecutive rows of its planned part (`Shard.part`,
`row_start`, `urls`), so the snapshot (pipeline.snapshot) gives them the final number
directly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

from pipeline import storage
from pipeline.config import Limits
from pipeline.extensions import NAMESPACE_BITS, NEWS_SECTION
from pipeline.layout import SHARDS_FOLDER
from pipeline.limits import MAX_URLS_PER_NEWS_SITEMAP
from pipeline.sitemap_xml import FORMAT_VERSION, URLSET_FOOTER, urlset_header
from pipeline.w3c import format_w3c


@dataclass
class Shard:
    """One planned sitemap file."""

    section: str
    shard: int
    urls: int
    body_bytes: int
    lastmod: str | None
    digest: str
    changed_rows: int
    namespaces: list[str] = field(default_factory=list)
    #: "xml" (a <urlset>) or "txt" (one URL a line, the protocol's text format).
    format: str = "xml"
    #: Which planned part file (PlanResult.planned_uris[part]) holds its rows; None for
    #: a shard kept as it is published (its rows are in no part, render skips it).
    part: int | None = 0
    #: Its first row in that part: its rows are the `urls` rows from there on.
    row_start: int | None = None
    #: The number the slice gave it (a provisional number for a new shard of a section's
    #: later slice, see provisional_base; None or equal to `shard` when they are the same).
    planned_shard: int | None = None

    @property
    def header(self) -> str:
        return urlset_header(self.namespaces) if self.format == "xml" else ""

    @property
    def footer(self) -> str:
        return URLSET_FOOTER if self.format == "xml" else ""

    @property
    def bytes(self) -> int:
        """Uncompressed size of the file."""
        return len(self.header) + self.body_bytes + len(self.footer)

    @property
    def key(self) -> str:
        """Its key below the output root: section, number and a content digest."""
        return f"{SHARDS_FOLDER}/{self.section}-{self.shard:05d}-{self.digest}.{self.format}.gz"

    @property
    def uid(self) -> str:
        return f"{self.section}/{self.shard}"

    @property
    def reused(self) -> bool:
        """Kept as it is published: its rows are in no planned part."""
        return self.part is None


@dataclass
class PlanResult:
    #: In file order: by part, then by row within the part.
    shards: list[Shard]
    #: The planned part files, one per slice; Shard.part indexes this list.
    planned_uris: list[str]
    shards_uri: str
    split: int
    merged: int
    seconds: float = 0.0
    #: The last generation's shard bounds (prepare's plan-bounds.parquet).
    bounds_uri: str = ""
    #: The token of the prepare the plan was made from: a plan made again has another.
    token: str = ""


@dataclass
class SliceResult:
    """One planned slice: its part, and its shards under their numbers in the part."""

    index: int
    part_uri: str
    shards: list[Shard]
    split: int
    merged: int
    seconds: float = 0.0


def shard_digest(content: str, header: str) -> str:
    """The key digest: the content's identity (URL count, body bytes, XOR of the rows'
    hashes) bound to the file format around it."""
    return hashlib.sha256(f"{FORMAT_VERSION}|{header}|{content}".encode()).hexdigest()[:16]


def section_limits(section: str, limits: Limits) -> Limits:
    """News sitemaps hold at most 1,000 URLs; every other section the configured limits."""
    if section == NEWS_SECTION and limits.max_urls > MAX_URLS_PER_NEWS_SITEMAP:
        return dataclasses.replace(limits, max_urls=MAX_URLS_PER_NEWS_SITEMAP)
    return limits


def _shard(section: str, number: int, urls: int, body: int, lastmod: datetime | None,
           row_hash_xor: int, ns: int, changed: int, output_format: str, *,
           part: int | None, row_start: int | None = None) -> Shard:
    """A shard from its sums: the same content always gives the same key."""
    namespaces = [name for bit, name in enumerate(NAMESPACE_BITS) if ns >> bit & 1]
    header = urlset_header(namespaces) if output_format == "xml" else "txt"
    content = f"{urls}|{body}|{row_hash_xor & 0xFFFFFFFFFFFFFFFF:016x}"
    return Shard(section=section, shard=number, urls=urls, body_bytes=body, lastmod=_w3c(lastmod),
                 digest=shard_digest(content, header), changed_rows=changed,
                 namespaces=namespaces, format=output_format, part=part, row_start=row_start)


def load_shards(shards_uri: str) -> list[Shard]:
    """The shard list a plan wrote."""
    root, _, key = shards_uri.rpartition("/")
    return [Shard(**d) for d in json.loads(storage.open_storage(root).read_bytes(key))]


def _w3c(value: datetime | None) -> str | None:
    return format_w3c(value) if value is not None else None
