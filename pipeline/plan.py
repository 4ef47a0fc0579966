"""Stage 3, plan: bucket rows into shards by section, within every limit, stably.

A shard keeps the URL range it had in the last generation, so a small change
rewrites few shards. Only a shard that would break a limit is split (to
SPLIT_FILL of the limits, leaving room to grow); a shard that fell below
MERGE_BELOW of the limits is merged into its predecessor when both fit in
one file; a new section (or a first run) is packed full. Writes
`planned.parquet` (rows with their shard and rendered line, in file order)
and `shards.json` under the work prefix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa

from pipeline import sql, storage
from pipeline.config import Limits
from pipeline.diff import register_snapshot
from pipeline.errors import ConfigError
from pipeline.extensions import NEWS_SECTION
from pipeline.limits import MAX_URLS_PER_NEWS_SITEMAP
from pipeline.load import register_parquet, write_parquet
from pipeline.sitemap_xml import FORMAT_VERSION, URLSET_FOOTER, urlset_header

log = logging.getLogger(__name__)

PLANNED_KEY = "planned.parquet"
SHARDS_KEY = "shards.json"
#: A shard that must be split is refilled to this share of the limits.
SPLIT_FILL = 0.75
#: A shard below this share of the limits is merged into its predecessor if they fit.
MERGE_BELOW = 0.10
#: Output formats: XML sitemaps (with extensions) or plain-text sitemaps.
FORMATS = ("xml", "txt")
#: Folder of the shard files, below the output root.
SHARDS_FOLDER = "sitemaps"


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


@dataclass
class PlanResult:
    shards: list[Shard]
    planned_uri: str
    shards_uri: str
    split: int
    merged: int
    seconds: float = 0.0


def shard_digest(md5_of_lines: str, header: str) -> str:
    """The key digest: the lines' digest bound to the file format around them."""
    return hashlib.sha256(
        f"{FORMAT_VERSION}|{header}|{md5_of_lines}".encode()).hexdigest()[:16]


def section_limits(section: str, limits: Limits) -> Limits:
    """News sitemaps hold at most 1,000 URLs; every other section the configured limits."""
    if section == NEWS_SECTION and limits.max_urls > MAX_URLS_PER_NEWS_SITEMAP:
        return dataclasses.replace(limits, max_urls=MAX_URLS_PER_NEWS_SITEMAP)
    return limits


def _groups(stats: list[tuple[Any, ...]], all_limits: Limits, first_run: bool
            ) -> tuple[list[dict[str, Any]], int, int]:
    """Plan groups from base shard sizes: keep, merge into the predecessor, or repack."""
    budget = all_limits.body_budget
    groups: list[dict[str, Any]] = []
    split = merged = 0
    prev: dict[str, Any] | None = None
    for section, base, urls, body, max_line in stats:
        limits = section_limits(section, all_limits)
        if max_line > budget:
            raise ConfigError(
                f"--max-bytes-per-sitemap {limits.max_bytes} cannot hold one entry of section "
                f"{section!r} ({max_line} bytes); raise it")
        fits = urls <= limits.max_urls and body <= budget
        tiny = urls < MERGE_BELOW * limits.max_urls and body < MERGE_BELOW * budget
        if (base is not None and fits and tiny and prev is not None and prev["section"] == section
                and not prev["repack"] and prev["urls"] + urls <= limits.max_urls
                and prev["body"] + body <= budget):
            prev["urls"] += urls
            prev["body"] += body
            groups.append({**prev, "base_shard": base, "merged": True})
            merged += 1
            continue
        fill = 1.0 if base is None or first_run else SPLIT_FILL
        repack = base is None or not fits
        if repack and base is not None:
            split += 1
        group = {
            "section": section, "base_shard": base, "group_id": len(groups), "repack": repack,
            "fill_urls": max(1, int(limits.max_urls * fill)) if repack else 1,
            "fill_bytes": int(budget * fill) - max_line + 1 if repack else 1,
            "urls": urls, "body": body, "merged": False,
        }
        if group["fill_bytes"] < 1:
            group["fill_bytes"] = budget - max_line + 1
        groups.append(group)
        prev = group
    return groups, split, merged


def _number_shards(con: duckdb.DuckDBPyConnection, groups: list[dict[str, Any]]) -> pa.Table:
    """Final shard numbers: a kept shard keeps its number, new ones count on per section."""
    subs = con.sql("SELECT DISTINCT group_id, sub FROM packed ORDER BY group_id, sub").fetchall()
    by_id = {g["group_id"]: g for g in groups if not g["merged"]}
    next_free: dict[str, int] = {}
    for g in groups:
        if g["base_shard"] is not None:
            next_free[g["section"]] = max(next_free.get(g["section"], 0), g["base_shard"] + 1)
    rows: dict[str, list[int]] = {"group_id": [], "sub": [], "shard": []}
    for group_id, sub in subs:
        g = by_id[group_id]
        if g["base_shard"] is not None and sub == 0:
            number = g["base_shard"]
        else:
            number = next_free.get(g["section"], 0)
            next_free[g["section"]] = number + 1
        rows["group_id"].append(group_id)
        rows["sub"].append(sub)
        rows["shard"].append(number)
    return pa.table(rows, schema=pa.schema(
        [("group_id", pa.int64()), ("sub", pa.int64()), ("shard", pa.int32())]))


def plan(diffed_uri: str, snapshot_uri: str | None, work_uri: str, limits: Limits, *,
         output_format: str = "xml", con: duckdb.DuckDBPyConnection | None = None
         ) -> PlanResult:
    """Assign every row a shard; write the planned rows and the shard list."""
    if output_format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {output_format!r}")
    started = time.monotonic()
    con = con or sql.connect()
    register_parquet(con, "diffed", [diffed_uri])
    register_snapshot(con, snapshot_uri)
    con.execute(sql.load_sql("assign_shards"), {"format": output_format})
    stats = con.sql(sql.load_sql("base_shard_stats")).fetchall()
    groups, split, merged = _groups(stats, limits, first_run=snapshot_uri is None)
    # A merged shard's rows join its predecessor's group.
    group_table = pa.table({
        "section": [g["section"] for g in groups],
        "base_shard": pa.array([g["base_shard"] for g in groups], pa.int32()),
        "group_id": [g["group_id"] for g in groups],
        "repack": [g["repack"] for g in groups],
        "fill_urls": [g["fill_urls"] for g in groups],
        "fill_bytes": [g["fill_bytes"] for g in groups],
    })
    con.register("shard_groups", group_table)
    con.execute(sql.load_sql("pack_shards"))
    con.execute("DROP TABLE assigned")  # free its memory before the next big step
    con.register("shard_numbers", _number_shards(con, groups))
    work = storage.open_storage(work_uri)
    # The rows go to Parquet in file order straight from the sort, never into a table.
    planned_uri = write_parquet(con.sql(sql.load_sql("planned_rows"),
                                        params={"format": output_format}), work, PLANNED_KEY)
    con.execute("DROP TABLE packed")
    register_parquet(con, "planned", [planned_uri])
    shards = []
    for s, n, u, b, lm, d, c, *uses in con.sql(sql.load_sql("shard_summary")).fetchall():
        namespaces = [ns for ns, used in zip(("image", "video", "news", "xhtml"), uses,
                                             strict=True) if used]
        header = urlset_header(namespaces) if output_format == "xml" else "txt"
        shards.append(Shard(section=s, shard=int(n), urls=int(u), body_bytes=int(b),
                            lastmod=_w3c(lm), digest=shard_digest(d, header),
                            changed_rows=int(c), namespaces=namespaces, format=output_format))
    work.write_bytes(SHARDS_KEY, json.dumps([asdict(s) for s in shards]).encode())
    result = PlanResult(shards=shards, planned_uri=planned_uri, shards_uri=work.uri(SHARDS_KEY),
                        split=split, merged=merged, seconds=time.monotonic() - started)
    log.info("plan: %d shards in %d sections (%d split, %d merged) (%.1f s)", len(shards),
             len({s.section for s in shards}), split, merged, result.seconds)
    return result


def load_shards(shards_uri: str) -> list[Shard]:
    """The shard list a plan wrote."""
    root, _, key = shards_uri.rpartition("/")
    return [Shard(**d) for d in json.loads(storage.open_storage(root).read_bytes(key))]


def _w3c(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None
