"""The plan's shard model: one planned sitemap file, its key, and the plan's results.

A shard's key is made from its content alone (URL count, body bytes, XOR of its rows'
hashes, bound to the file format around it), so the same content always gives the same
key and a shard whose key is already live is reused. Rows carry no shard number: a
shard's rows are a run of consecutive rows of its planned part (`Shard.part`,
`row_start`, `urls`; pipeline.shards), so the snapshot (pipeline.snapshot) gives them the final number
directly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from pipeline import storage
from pipeline.config import Limits
from pipeline.extensions import NAMESPACE_BITS, NEWS_SECTION
from pipeline.limits import MAX_URLS_PER_NEWS_SITEMAP
from pipeline.shards import Shard
from pipeline.sitemap_xml import FORMAT_VERSION, urlset_header
from pipeline.w3c import format_w3c


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
    #: The rows and files of its input it read (footers' counts).
    rows_read: int = 0
    files_read: int = 0


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
