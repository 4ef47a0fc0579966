"""The shard: one planned sitemap file, its key, sizes and place in a planned part.

Shared by the stages that make and read shards (plan, render, the snapshot, the unchanged
sections' check): none of them imports another stage's module for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.layout import SHARDS_FOLDER
from pipeline.sitemap_xml import URLSET_FOOTER, urlset_header


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
