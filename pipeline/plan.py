"""Stage 3, plan: bucket rows into shards by section, within every limit, stably.

A shard keeps the URL range it had in the last generation, so a small change
rewrites few shards. Only a shard that would break a limit is split (to
SPLIT_FILL of the limits, leaving room to grow); a shard that fell below
MERGE_BELOW of the limits is merged into its predecessor when both fit in
one file; a new section (or a first run) is packed full. Writes
`planned/part-NNNNN.parquet` (the rows of the shards to write, in file order: each
shard a run of consecutive rows; one file per slice) and `shards.json` under the
work prefix. A shard whose key is already live is reused: its rows are in no part.

Slices: the plan works on at most about SLICE_ROWS rows at a time, so its peak
memory and temp disk are bounded by a slice, not by the inventory. A slice is
one section's URLs in a range [lo, hi), or several whole small sections. A
section that had shards is cut only where no previous shard spans the cut (at a
shard's smallest URL), so a kept shard is never cut; a new section larger than
a slice is cut at quantiles of a deterministic sample of its URLs. Shard
numbers stay unique per section across slices: a kept shard keeps its number,
new ones count on from the section's highest previous number.

The slices are independent units, planned in any order, in any process:
`prepare` chooses them and writes `plan-slices.json` (and the last generation's
shard bounds, `plan-bounds.parquet`); `plan_slice` plans one and writes its part
and `plan-slice-NNNNN.json`; `combine` gathers them into `shards.json`. A slice
cannot know how many new shards the section's earlier slices made, so it writes
new shards under provisional numbers (`provisional_base`): in a section's first
slice they are already the final ones; in a later slice they are
`(slice + 1) << 32` onwards, above every final number, in the same order, and
unique in the whole plan. `combine` gives every shard its final number, exactly
what numbering the slices one after the other gives, and keeps the slice's number
as `Shard.planned_shard`. Rows carry no shard number: a shard's rows are found by
its row range (`Shard.row_start`, `urls`), so the snapshot (pipeline.snapshot)
gives them the final number directly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import os
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from pipeline import sql, storage
from pipeline.config import Limits
from pipeline.diff import register_snapshot
from pipeline.errors import ConfigError, InternalError
from pipeline.extensions import NAMESPACE_BITS, NAMESPACE_MARKERS, NEWS_SECTION
from pipeline.layout import (
    BOUNDS_KEY,
    PLANNED_FOLDER,
    SHARDS_FOLDER,
    SHARDS_KEY,
    SLICE_INPUT_FOLDER,
    SLICES_KEY,
    part_key,
)
from pipeline.limits import MAX_URLS_PER_NEWS_SITEMAP
from pipeline.load import register_parquet, write_parquet
from pipeline.parquet import read_table
from pipeline.settings import environment
from pipeline.sitemap_xml import FORMAT_VERSION, URLSET_FOOTER, urlset_header
from pipeline.w3c import format_w3c

log = logging.getLogger(__name__)

#: New shards of a section's later slices are numbered provisionally from
#: (slice + 1) << PROVISIONAL_SHIFT: above every final number (which fit in 32 bits).
PROVISIONAL_SHIFT = 32
#: A shard that must be split is refilled to this share of the limits.
SPLIT_FILL = 0.75
#: A shard below this share of the limits is merged into its predecessor if they fit.
MERGE_BELOW = 0.10
#: Output formats: XML sitemaps (with extensions) or plain-text sitemaps.
FORMATS = ("xml", "txt")
#: Rows planned at a time (SITEMAPS_PLAN_SLICE_ROWS): each slice is assigned, packed,
#: sorted and written on its own, so plan's peak memory and DuckDB temp disk grow
#: with this, not with the inventory. At about 250 bytes a row in DuckDB, 4M rows
#: is about 1 GB per copy; an inventory that fits is planned in one pass as before.
SLICE_ROWS = environment().plan_slice_rows
#: Sampled URLs per slice when a new section is cut at sample quantiles.
SAMPLES_PER_SLICE = 1_000
#: From this many slices on, prepare splits the diffed rows by slice in one pass (one more
#: write and read of them) and each slice reads only its own rows; below, each slice scans
#: every diffed row for its own, which costs less than the split (10M URLs: 3 slices;
#: 100M: 33 slices, 33 scans of 100M rows).
SPLIT_INPUT_SLICES = 6
#: Rows a slice's share of that split is held in memory before it is written.
SPLIT_FLUSH_ROWS = 16_384


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


def shard_digest(content: str, header: str) -> str:
    """The key digest: the content's identity (URL count, body bytes, XOR of the rows'
    hashes) bound to the file format around it."""
    return hashlib.sha256(f"{FORMAT_VERSION}|{header}|{content}".encode()).hexdigest()[:16]


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


def _number_shards(pieces: Sequence[tuple[int, int, int, int]], by_id: dict[int, dict[str, Any]],
                   new_base: dict[str, int]) -> list[int]:
    """Shard numbers of the slice's pieces (group_id, sub, start, end), in (group, sub)
    order: a kept shard keeps its number, new ones count on from `new_base[section]`
    (provisional_base)."""
    next_new = dict(new_base)
    numbers = []
    for group_id, sub, _, _ in pieces:
        g = by_id[group_id]
        if g["base_shard"] is not None and sub == 0:
            number = g["base_shard"]
        else:
            number = next_new[g["section"]]
            next_new[g["section"]] = number + 1
        numbers.append(number)
    return numbers


@dataclass(frozen=True)
class Slice:
    """Rows planned together: whole `sections`, or one section's URLs in [lo, hi)."""

    sections: tuple[str, ...]
    lo: str | None = None
    hi: str | None = None
    #: Rows: this run's count for whole sections, else an even share of the section's.
    rows: int = 0

    def describe(self) -> str:
        if self.lo is None and self.hi is None:
            names = ", ".join(self.sections[:3]) + (", ..." if len(self.sections) > 3 else "")
            return f"{len(self.sections)} section(s) ({names})"
        return f"section {self.sections[0]} [{self.lo or '-'}, {self.hi or '-'})"


def _cuts_by_shards(bounds: list[tuple[str, str, int]], slice_rows: int) -> list[str]:
    """Cut points for a section that had shards: (lower, upper, urls) of each of them.

    A cut is a shard's smallest URL that no other shard spans (all shards that start
    below it end below it), so every previous shard, and every new URL its range
    takes (assigned_rows), lies in one slice. Shards are added until about slice_rows.
    """
    cuts: list[str] = []
    acc = 0
    reach: str | None = None  # the largest URL of the shards so far
    for lower, upper, urls in sorted(bounds):
        if acc and acc + urls > slice_rows and reach is not None and reach < lower:
            cuts.append(lower)
            acc = 0
        acc += urls
        reach = upper if reach is None else max(reach, upper)
    return cuts


def _cuts_by_sample(sample: list[str], rows: int, slice_rows: int) -> list[str]:
    """Cut points at the sample's quantiles, so each slice holds about slice_rows."""
    n = -(-rows // slice_rows)
    return sorted({sample[len(sample) * i // n] for i in range(1, n)}) if sample else []


def _slices(con: duckdb.DuckDBPyConnection, slice_rows: int) -> list[Slice]:
    """The plan's slices, in (section, URL) order, from `diffed_all` and `shard_bounds`."""
    counts = con.sql(sql.load_sql("section_counts")).fetchall()
    bounds: dict[str, list[tuple[str, str, int]]] = {}
    for section, lower, upper, urls in con.sql(
            "SELECT section, lower, upper, urls FROM shard_bounds").fetchall():
        bounds.setdefault(section, []).append((lower, upper, int(urls)))
    big_new = [s for s, n in counts if n > slice_rows and s not in bounds]
    samples: dict[str, list[str]] = {}
    if big_new:
        rows = con.sql(sql.load_sql("sample_urls"), params={
            "sections": big_new, "every": max(1, slice_rows // SAMPLES_PER_SLICE)}).fetchall()
        for section, url in rows:
            samples.setdefault(section, []).append(url)
    slices: list[Slice] = []
    for section, n in counts:
        if n <= slice_rows:
            cuts: list[str] = []
        elif section in bounds:
            cuts = _cuts_by_shards(bounds[section], slice_rows)
        else:
            cuts = _cuts_by_sample(samples.get(section, []), n, slice_rows)
        if not cuts:
            last = slices[-1] if slices else None
            if (last is not None and last.lo is None and last.hi is None
                    and last.rows + n <= slice_rows):
                # Small whole sections share a slice (one scan and one part file for them).
                slices[-1] = Slice(last.sections + (section,), rows=last.rows + n)
            else:
                slices.append(Slice((section,), rows=n))
            continue
        edges: list[str | None] = [None, *cuts, None]
        for lo, hi in itertools.pairwise(edges):
            slices.append(Slice((section,), lo, hi, rows=n // len(edges[1:])))
    # No rows at all: one empty slice still writes one (empty) part.
    return slices or [Slice(())]


def provisional_base(slices: Sequence[Slice], index: int, next_free: dict[str, int]
                     ) -> dict[str, int]:
    """Where slice `index` numbers its new shards, per section of it.

    In a section's first slice (whole sections, or the range open below) its new shards
    take the final numbers, from the section's next free number. A later slice of a
    section cannot know how many new shards the earlier ones made: it numbers them from
    `(index + 1) << PROVISIONAL_SHIFT`, above every final number (so a part's rows keep
    the order of the final numbers) and unique in the plan; `combine` renumbers them.
    """
    sl = slices[index]
    if sl.lo is None:
        return {section: next_free.get(section, 0) for section in sl.sections}
    return {section: (index + 1) << PROVISIONAL_SHIFT for section in sl.sections}


def prepare(diffed_uris: str | Sequence[str], snapshot_uri: str | None, work_uri: str, *,
            con: duckdb.DuckDBPyConnection | None = None, slice_rows: int | None = None
            ) -> list[Slice]:
    """Choose the plan's slices; write them and the numbering state to `plan-slices.json`.

    `diffed_uris`: the diff's parts (one per diff partition; a single URI is one part),
    read together as one table: the plan does not depend on how the diff was cut. Also
    writes the last generation's shard bounds (`plan-bounds.parquet`, one row per
    shard), so that no slice reads the whole snapshot again.
    """
    slice_rows = slice_rows or SLICE_ROWS
    started = time.monotonic()
    con = con or sql.connect()
    diffed = [diffed_uris] if isinstance(diffed_uris, str) else list(diffed_uris)
    register_parquet(con, "diffed_all", diffed)
    register_snapshot(con, snapshot_uri)
    con.execute(sql.load_sql("previous_shard_bounds"))
    slices = _slices(con, slice_rows)
    # New shards of a section are numbered after its highest previous number.
    next_free = {section: int(top) + 1 for section, top in con.sql(
        "SELECT section, max(shard) FROM shard_bounds GROUP BY section").fetchall()}
    work = storage.open_storage(work_uri)
    bounds_uri = write_parquet(con.sql("SELECT * FROM shard_bounds"), work, BOUNDS_KEY)
    con.execute("DROP TABLE IF EXISTS shard_bounds")
    slice_inputs = _split_by_slice(con, work, slices) if len(slices) >= SPLIT_INPUT_SLICES \
        else None
    work.write_bytes(SLICES_KEY, json.dumps({
        # Each slice's result names this, so combine never mixes results of two prepares.
        "token": uuid.uuid4().hex,
        "slices": [asdict(sl) for sl in slices], "next_free": next_free,
        "first_run": snapshot_uri is None, "diffed_uris": diffed, "bounds_uri": bounds_uri,
        "slice_inputs": slice_inputs,
        "slice_rows": slice_rows, "seconds": round(time.monotonic() - started, 3),
    }).encode())
    log.info("plan: %d slice(s) of at most about %d rows", len(slices), slice_rows)
    return slices


def _split_by_slice(con: duckdb.DuckDBPyConnection, work: storage.Storage,
                    slices: Sequence[Slice]) -> list[list[str]]:
    """Write the view `diffed_all` once, split by slice (sql/slice_input.sql), under
    SLICE_INPUT_FOLDER; returns each slice's files (none for a slice without rows)."""
    con.register("slice_ranges", pa.table({
        "slice": pa.array([i for i, sl in enumerate(slices) for _ in sl.sections], pa.int32()),
        "section": pa.array([s for sl in slices for s in sl.sections], pa.string()),
        "lo": pa.array([sl.lo for sl in slices for _ in sl.sections], pa.string()),
        "hi": pa.array([sl.hi for sl in slices for _ in sl.sections], pa.string())}))
    rel = con.sql(sql.load_sql("slice_input"))
    with tempfile.TemporaryDirectory(prefix="sitemaps-") as tmp:
        local = work.local_dir / SLICE_INPUT_FOLDER if work.local_dir else Path(tmp)
        # One pass, one file (or a few) per slice: DuckDB's partitioned write. It holds each
        # partition's rows until this many (default 524,288): 33 slices of 100M URLs ran out
        # of a 875 MiB limit ("failed to pin block"); 16,384 bounds it and measured faster.
        con.execute(f"SET partitioned_write_flush_threshold = {SPLIT_FLUSH_ROWS}")
        try:
            rel.write_parquet(str(local), compression="lz4_raw", partition_by=["slice"],
                              overwrite=True)
        finally:
            con.execute("RESET partitioned_write_flush_threshold")
        files: list[list[str]] = [[] for _ in slices]
        for path in sorted(local.glob("slice=*/*.parquet")):
            index = int(path.parent.name.removeprefix("slice="))
            key = f"{SLICE_INPUT_FOLDER}/{path.parent.name}/{path.name}"
            if not work.local_dir:
                work.upload_file(path, key)
            files[index].append(work.uri(key))
    con.unregister("slice_ranges")
    log.info("plan: the diffed rows split by slice (%d slices)", len(slices))
    return files


def _read_json(work: storage.Storage, key: str) -> Any:
    return json.loads(work.read_bytes(key))


def _slices_of(prepared: dict[str, Any]) -> list[Slice]:
    return [Slice(**{**d, "sections": tuple(d["sections"])}) for d in prepared["slices"]]


@dataclass
class SliceResult:
    """One planned slice: its part, and its shards under their numbers in the part."""

    index: int
    part_uri: str
    shards: list[Shard]
    split: int
    merged: int
    seconds: float = 0.0


def plan_slice(work_uri: str, index: int, limits: Limits, *, output_format: str = "xml",
               con: duckdb.DuckDBPyConnection | None = None,
               reuse_keys: frozenset[str] = frozenset()) -> SliceResult:
    """Plan slice `index` of `plan-slices.json`: write its part and `plan-slice-NNNNN.json`.

    Independent of every other slice (any order, any process); a retry rewrites both.
    New shards carry provisional numbers (provisional_base) until `combine`. A shard
    kept as it is whose key is in `reuse_keys` (the live keys) writes no rows.
    """
    if output_format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {output_format!r}")
    started = time.monotonic()
    work = storage.open_storage(work_uri)
    prepared = _read_json(work, SLICES_KEY)
    slices = _slices_of(prepared)
    if not 0 <= index < len(slices):
        raise ConfigError(f"plan slice {index}: the plan has {len(slices)} slice(s), "
                          f"0 to {len(slices) - 1}")
    sl = slices[index]
    con = con or sql.connect()
    register_parquet(con, "bounds_all", [prepared["bounds_uri"]])
    con.execute(sql.load_sql("slice_shard_bounds"), {"sections": list(sl.sections)})
    own = (prepared.get("slice_inputs") or [None] * len(slices))[index]
    if own is None:  # every diffed row, filtered to the slice's
        register_parquet(con, "diffed_all", prepared["diffed_uris"])
        con.sql(sql.load_sql("diffed_slice"), params={
            "sections": list(sl.sections), "lo": sl.lo, "hi": sl.hi}).create_view(
                "diffed", replace=True)
    elif own:  # the slice's own rows, split by prepare
        register_parquet(con, "diffed", own)
    else:  # a slice without rows: the diffed rows' columns, no row
        register_parquet(con, "diffed_all", prepared["diffed_uris"])
        con.sql("SELECT * FROM diffed_all WHERE false").create_view("diffed", replace=True)
    shards, split, merged = _plan_slice(
        con, work, index, prepared["first_run"], limits, output_format,
        provisional_base(slices, index, prepared["next_free"]), reuse_keys)
    con.execute("DROP TABLE IF EXISTS shard_bounds")
    result = SliceResult(index=index, part_uri=work.uri(_part_key(index)), shards=shards,
                         split=split, merged=merged, seconds=time.monotonic() - started)
    work.write_bytes(_slice_key(index), json.dumps({
        "token": prepared["token"], "slice": asdict(sl), "index": index,
        "part_uri": result.part_uri, "shards": [asdict(s) for s in shards],
        "split": split, "merged": merged, "seconds": round(result.seconds, 3),
    }).encode())
    log.info("plan: slice %d/%d, %s: %d URLs in %d shards (%.1f s)", index + 1, len(slices),
             sl.describe(), sum(x.urls for x in shards), len(shards), result.seconds)
    return result


def combine(work_uri: str) -> PlanResult:
    """Gather every slice's shards, in part order, under their final numbers: `shards.json`.

    A kept shard keeps its number; new shards of a section count on from its next free
    number in slice order, then in their order in the slice: exactly the numbers of
    planning the slices one after the other. Fails, naming them, when slices are missing
    or were planned from another `prepare`.
    """
    started = time.monotonic()
    work = storage.open_storage(work_uri)
    prepared = _read_json(work, SLICES_KEY)
    slices = _slices_of(prepared)
    missing = [i for i in range(len(slices)) if not work.exists(_slice_key(i))]
    if missing:
        raise InternalError(f"plan slice(s) {missing[:10]} of {len(slices)} have no result "
                           f"({_slice_key(missing[0])} under {work_uri}): plan them first")
    results = [_read_json(work, _slice_key(i)) for i in range(len(slices))]
    stale = [r["index"] for r in results if r["token"] != prepared["token"]]
    if stale:
        raise InternalError(f"plan slice(s) {stale[:10]} were planned before the slices were "
                           "chosen again (plan-slices.json is newer): plan them again")
    next_free: dict[str, int] = dict(prepared["next_free"])
    shards: list[Shard] = []
    for index, r in enumerate(results):
        base = provisional_base(slices, index, prepared["next_free"])
        part_shards = [Shard(**d) for d in r["shards"]]
        new: dict[str, int] = {}
        for s in part_shards:
            planned = s.shard
            if planned >= base[s.section]:  # a new shard: planned in the slice's own order
                s.shard = next_free.get(s.section, 0) + planned - base[s.section]
                new[s.section] = new.get(s.section, 0) + 1
            s.planned_shard = planned
        for section, n in new.items():
            next_free[section] = next_free.get(section, 0) + n
        shards += part_shards
    split, merged = sum(r["split"] for r in results), sum(r["merged"] for r in results)
    work.write_bytes(SHARDS_KEY, json.dumps([asdict(s) for s in shards]).encode())
    seconds = (prepared["seconds"] + sum(r["seconds"] for r in results)
               + time.monotonic() - started)
    result = PlanResult(shards=shards, planned_uris=[r["part_uri"] for r in results],
                        shards_uri=work.uri(SHARDS_KEY), split=split, merged=merged,
                        seconds=seconds, bounds_uri=prepared["bounds_uri"])
    log.info("plan: %d shards in %d sections (%d split, %d merged), %d slice(s) (%.1f s)",
             len(shards), len({s.section for s in shards}), split, merged, len(slices),
             result.seconds)
    return result


def plan(diffed_uris: str | Sequence[str], snapshot_uri: str | None, work_uri: str,
         limits: Limits, *, output_format: str = "xml",
         con: duckdb.DuckDBPyConnection | None = None, slice_rows: int | None = None,
         reuse_keys: frozenset[str] = frozenset()) -> PlanResult:
    """Assign every row a shard: prepare, every slice one after the other, combine."""
    if output_format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {output_format!r}")
    con = con or sql.connect()
    slices = prepare(diffed_uris, snapshot_uri, work_uri, con=con, slice_rows=slice_rows)
    for index in range(len(slices)):
        plan_slice(work_uri, index, limits, output_format=output_format, con=con,
                   reuse_keys=reuse_keys)
    return combine(work_uri)


def _part_key(part: int) -> str:
    return part_key(PLANNED_FOLDER, part)


def _slice_key(index: int) -> str:
    return f"plan-slice-{index:05d}.json"


def register_assigned(con: duckdb.DuckDBPyConnection, output_format: str) -> None:
    """The view `assigned` (sql/assigned_rows.sql) over the views `diffed` and `shard_bounds`."""
    con.sql(sql.load_sql("assigned_rows"), params={
        "format": output_format, "ns_markers": NAMESPACE_MARKERS}).create_view(
        "assigned", replace=True)


def _plan_slice(con: duckdb.DuckDBPyConnection, work: storage.Storage, part: int,
                first_run: bool, limits: Limits, output_format: str,
                new_base: dict[str, int], reuse_keys: frozenset[str]
                ) -> tuple[list[Shard], int, int]:
    """Plan the rows of the view `diffed` (one slice); write them as part `part`.

    One sort: the rows of the groups to write, by group and URL (planned_rows); a
    repacked group is then cut into shards at row positions (`pack_subs`), and every
    shard's sums come from the part's narrow columns. A group kept as one shard whose
    key is in `reuse_keys` (already published, same content) is not written at all.
    A tiny shard merges only into a predecessor in the same slice: a slice boundary is
    a previous shard's lower bound, so at worst a tiny shard stays on its own there.
    """
    register_assigned(con, output_format)
    stats = con.sql(sql.load_sql("group_stats")).fetchall()
    groups, split, merged = _groups([row[:5] for row in stats], limits, first_run=first_run)
    # A group that keeps one base shard as it is: its key from the sums alone.
    members = Counter(g["group_id"] for g in groups)
    reused: dict[int, Shard] = {}
    for g, (section, base, urls, body, _, xor, lastmod, ns, changed, *_) in zip(
            groups, stats, strict=True):
        if g["repack"] or g["merged"] or base is None:
            continue
        if members[g["group_id"]] > 1:
            continue  # a tiny shard merges into it: its content changes
        shard = _shard(section, int(base), int(urls), int(body), lastmod, int(xor), int(ns),
                       int(changed), output_format, part=None)
        if shard.key in reuse_keys:
            reused[g["group_id"]] = shard
    group_table = pa.table({
        "section": pa.array([g["section"] for g in groups], pa.string()),
        "base_shard": pa.array([g["base_shard"] for g in groups], pa.int32()),
        "group_id": pa.array([g["group_id"] for g in groups], pa.int64()),
        "reused": pa.array([g["group_id"] in reused for g in groups], pa.bool_()),
        "skip": pa.array(_common_prefixes(groups, stats), pa.int64()),
    })
    con.register("shard_groups", group_table)
    # The rows go to Parquet in file order straight from the sort, never into a table.
    part_uri = write_parquet(con.sql(sql.load_sql("planned_rows")), work, _part_key(part))
    con.unregister("shard_groups")
    by_id = {g["group_id"]: g for g in groups if not g["merged"]}
    cols = _read_narrow(part_uri)
    runs = _group_runs(cols["group_id"])
    pieces: list[tuple[int, int, int, int]] = []  # (group_id, sub, start, end)
    for group_id, start, end in runs:
        g = by_id[group_id]
        if g["repack"]:
            cuts = pack_subs(cols["line_bytes"][start:end], g["fill_urls"], g["fill_bytes"])
            bounds = [start + c for c in cuts] + [end]
            pieces += [(group_id, sub, lo, hi)
                       for sub, (lo, hi) in enumerate(itertools.pairwise(bounds))]
        else:
            pieces.append((group_id, 0, start, end))
    numbers = _number_shards(pieces, by_id, new_base)
    shards: list[Shard] = []
    starts = np.array([p[2] for p in pieces], dtype=np.int64)
    if len(pieces):
        sums = {name: op.reduceat(cols[name], starts) for name, op in (
            ("line_bytes", np.add), ("row_hash", np.bitwise_xor), ("lastmod", np.maximum),
            ("ns", np.bitwise_or), ("changed", np.add))}
    sections = cols["section"]
    for i, ((_, _, start, end), number) in enumerate(zip(pieces, numbers, strict=True)):
        lastmod = None if sums["lastmod"][i] == _NO_TIME else datetime.fromtimestamp(
            int(sums["lastmod"][i]) // 1_000_000, UTC)
        shards.append(_shard(
            sections[start], number, end - start, int(sums["line_bytes"][i]), lastmod,
            int(sums["row_hash"][i]), int(sums["ns"][i]), int(sums["changed"][i]),
            output_format, part=part, row_start=start))
    shards += reused.values()
    shards.sort(key=lambda s: (s.section, s.row_start is None, s.row_start or 0, s.shard))
    return shards, split, merged


def _common_prefixes(groups: list[dict[str, Any]], stats: list[tuple[Any, ...]]) -> list[int]:
    """Per base shard row: the length of the prefix every URL of its group shares (the
    common prefix of the group's smallest and largest URL), which the sort can skip."""
    lo: dict[int, str] = {}
    hi: dict[int, str] = {}
    for g, row in zip(groups, stats, strict=True):
        gid = g["group_id"]
        lo[gid] = min(lo.get(gid, row[9]), row[9])
        hi[gid] = max(hi.get(gid, row[10]), row[10])
    return [_ascii_prefix_length(lo[g["group_id"]], hi[g["group_id"]]) for g in groups]


def _ascii_prefix_length(a: str, b: str) -> int:
    """Characters of the common prefix of a and b, up to the first non-ASCII one (where
    DuckDB's and Python's character counts could differ; normalised URLs are ASCII)."""
    prefix = os.path.commonprefix([a, b])
    return next((i for i, c in enumerate(prefix) if ord(c) > 127), len(prefix))


#: A shard whose rows have no lastmod (the lastmod column's NULL, read as int64).
_NO_TIME = np.iinfo(np.int64).min


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


def pack_subs(line_bytes: np.ndarray, fill_urls: int, fill_bytes: int) -> list[int]:
    """Where a repacked group's rows (in URL order) are cut into shards: row offsets,
    starting with 0. Row i goes to count bucket i // fill_urls and byte bucket
    (bytes up to and including it - 1) // fill_bytes; each distinct pair is one shard.
    fill_bytes is the byte budget less the longest line, so a shard never exceeds the
    budget though a line may straddle a bucket edge."""
    n = len(line_bytes)
    if n == 0:
        return []
    rows = np.arange(n, dtype=np.int64)
    count_bucket = rows // fill_urls
    byte_bucket = (np.cumsum(line_bytes, dtype=np.int64) - 1) // fill_bytes
    change = np.empty(n, dtype=bool)
    change[0] = True
    change[1:] = (count_bucket[1:] != count_bucket[:-1]) | (byte_bucket[1:] != byte_bucket[:-1])
    return [int(i) for i in np.flatnonzero(change)]


def _group_runs(group_ids: np.ndarray) -> list[tuple[int, int, int]]:
    """(group_id, start, end) of each run of equal group ids (the part is in group order)."""
    if len(group_ids) == 0:
        return []
    edges = np.flatnonzero(group_ids[1:] != group_ids[:-1]) + 1
    starts = np.concatenate(([0], edges))
    ends = np.concatenate((edges, [len(group_ids)]))
    return [(int(group_ids[a]), int(a), int(b)) for a, b in zip(starts, ends, strict=True)]


def _read_narrow(part_uri: str) -> dict[str, Any]:
    """The part's narrow columns as numpy arrays (section as a list): a slice's rows."""
    table = read_table(part_uri, ["group_id", "section", "line_bytes", "row_hash", "lastmod",
                                  "ns", "changed"])
    lastmod = table.column("lastmod").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    return {
        "group_id": table.column("group_id").to_numpy(),
        "section": _SectionAt(table.column("section")),
        "line_bytes": table.column("line_bytes").to_numpy().astype(np.int64),
        "row_hash": table.column("row_hash").to_numpy().astype(np.uint64),
        "lastmod": lastmod.fill_null(_NO_TIME).to_numpy(),
        "ns": table.column("ns").to_numpy().astype(np.int64),
        "changed": table.column("changed").cast(pa.int64()).to_numpy(),
    }


class _SectionAt:
    """The section of row i, read on demand (one per shard, not one per row)."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        self._column = column

    def __getitem__(self, i: int) -> str:
        return str(self._column[i].as_py())


def load_shards(shards_uri: str) -> list[Shard]:
    """The shard list a plan wrote."""
    root, _, key = shards_uri.rpartition("/")
    return [Shard(**d) for d in json.loads(storage.open_storage(root).read_bytes(key))]


def _w3c(value: datetime | None) -> str | None:
    return format_w3c(value) if value is not None else None
