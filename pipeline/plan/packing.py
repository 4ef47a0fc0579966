"""Packing one slice: the rows of each previous shard (a group) are kept as one shard,
merged into the predecessor, or repacked into new shards within every limit.

A shard keeps the URL range it had in the last generation, so a small change
rewrites few shards. Only a shard that would break a limit is split (to
SPLIT_FILL of the limits, leaving room to grow); a shard that fell below
MERGE_BELOW of the limits is merged into its predecessor when both fit in
one file; a new section (or a first run) is packed full. Writes
`planned/part-NNNNN.parquet` (the rows of the shards to write, in file order: each
shard a run of consecutive rows; one file per slice) and the slice's shard list,
`plan-slice-NNNNN.json`, under the work prefix. A shard whose key is already live is
reused: its rows are in no part.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from pipeline import sql, storage
from pipeline.config import Limits
from pipeline.diffed import DiffedView, register_diffed
from pipeline.errors import ConfigError
from pipeline.extensions import NAMESPACE_MARKERS
from pipeline.layout import PLANNED_FOLDER, part_key
from pipeline.parquet import read_table, register_parquet, write_parquet
from pipeline.plan.model import SliceResult, _shard, section_limits
from pipeline.plan.slices import (
    SLICE_RESULTS,
    Slice,
    file_rows,
    provisional_base,
    read_prepared,
    slice_files,
    slices_of,
    split_inputs_of,
)
from pipeline.settings import FORMATS
from pipeline.shards import Shard
from pipeline.snapshot import register_assigned

log = logging.getLogger(__name__)

#: A shard that must be split is refilled to this share of the limits.
SPLIT_FILL = 0.75
#: A shard below this share of the limits is merged into its predecessor if they fit.
MERGE_BELOW = 0.10


@dataclass(frozen=True)
class Group:
    """The rows of one previous shard (or of a new section) and what becomes of them.

    A merged group (`merged`) joins its predecessor's `group_id`: their rows are one
    shard. A repacked group is cut into shards of at most `fill_urls` URLs and
    `fill_bytes` bytes of lines (the byte budget less the longest line); a kept one is
    one shard (fills of 1: unused).
    """

    section: str
    #: The previous shard's number; None for a new section's rows.
    base_shard: int | None
    group_id: int
    repack: bool
    fill_urls: int
    fill_bytes: int
    #: URLs and bytes of lines, with those of the tiny shards merged into it.
    urls: int
    body: int
    merged: bool = False


def _groups(stats: list[tuple[Any, ...]], all_limits: Limits, first_run: bool
            ) -> tuple[list[Group], int, int]:
    """Plan groups from base shard sizes: keep, merge into the predecessor, or repack."""
    budget = all_limits.body_budget
    groups: list[Group] = []
    split = merged = 0
    prev: Group | None = None
    for section, base, urls, body, max_line in stats:
        limits = section_limits(section, all_limits)
        if max_line > budget:
            raise ConfigError(
                f"--max-bytes-per-sitemap {limits.max_bytes} cannot hold one entry of section "
                f"{section!r} ({max_line} bytes); raise it")
        fits = urls <= limits.max_urls and body <= budget
        tiny = urls < MERGE_BELOW * limits.max_urls and body < MERGE_BELOW * budget
        if (base is not None and fits and tiny and prev is not None and prev.section == section
                and not prev.repack and prev.urls + urls <= limits.max_urls
                and prev.body + body <= budget):
            # The predecessor grows by the tiny shard (it is groups[group_id]).
            prev = replace(prev, urls=prev.urls + urls, body=prev.body + body)
            groups[prev.group_id] = prev
            groups.append(replace(prev, base_shard=base, merged=True))
            merged += 1
            continue
        fill = 1.0 if base is None or first_run else SPLIT_FILL
        repack = base is None or not fits
        if repack and base is not None:
            split += 1
        fill_bytes = int(budget * fill) - max_line + 1 if repack else 1
        if fill_bytes < 1:
            fill_bytes = budget - max_line + 1
        group = Group(
            section=section, base_shard=base, group_id=len(groups), repack=repack,
            fill_urls=max(1, int(limits.max_urls * fill)) if repack else 1,
            fill_bytes=fill_bytes, urls=urls, body=body)
        groups.append(group)
        prev = group
    return groups, split, merged


def _number_shards(pieces: Sequence[tuple[int, int, int, int]], by_id: dict[int, Group],
                   new_base: dict[str, int]) -> list[int]:
    """Shard numbers of the slice's pieces (group_id, sub, start, end), in (group, sub)
    order: a kept shard keeps its number, new ones count on from `new_base[section]`
    (provisional_base)."""
    next_new = dict(new_base)
    numbers = []
    for group_id, sub, _, _ in pieces:
        g = by_id[group_id]
        if g.base_shard is not None and sub == 0:
            number = g.base_shard
        else:
            number = next_new[g.section]
            next_new[g.section] = number + 1
        numbers.append(number)
    return numbers


def plan_slice(work_uri: str, index: int, limits: Limits, *, output_format: str = "xml",
               con: duckdb.DuckDBPyConnection | None = None,
               reuse_keys: frozenset[str] = frozenset()) -> SliceResult:
    """Plan slice `index` of `plan-slices.json`: write its part and `plan-slice-NNNNN.json`.

    Independent of every other slice (any order, any process); a retry rewrites both.
    New shards carry provisional numbers (provisional_base) until `combine`. A shard
    kept as it is whose key is in `reuse_keys` (the live keys) writes no rows.
    """
    return _cut_slice(_write_slice(work_uri, index, limits, output_format=output_format,
                                   con=con, reuse_keys=reuse_keys))


def plan_slices(work_uri: str, count: int, limits: Limits, *, output_format: str = "xml",
                con: duckdb.DuckDBPyConnection | None = None,
                reuse_keys: frozenset[str] = frozenset()) -> list[SliceResult]:
    """Every slice of `plan-slices.json` (there are `count`), as plan_slice plans each, in
    one process: a slice's shards are cut from its part (its narrow columns read back,
    numpy: one core) on a thread of its own while the next slice is set up and sorted, on
    the cores the sort leaves idle. At most one slice waits to be cut (its part's narrow
    columns in memory, about 35 bytes a row). A slice's seconds then run from the start of
    its write to the end of its cut, which overlaps the next slice's write.

    The slices share one DuckDB database, whose memory the next slice's sort and write
    take again instead of fresh pages from the kernel."""
    con = con or sql.connect()
    results: list[SliceResult] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan-cut") as pool:
        cutting: Future[SliceResult] | None = None
        for index in range(count):
            written = _write_slice(work_uri, index, limits, output_format=output_format,
                                   con=con, reuse_keys=reuse_keys)
            if cutting is not None:
                results.append(cutting.result())
            # The last slice is cut with nothing beside it: on every core.
            cutting = pool.submit(_cut_slice, written, alone=index == count - 1)
        if cutting is not None:
            results.append(cutting.result())
    return results


@dataclass(frozen=True)
class _WrittenSlice:
    """A slice whose part is written: what its shards are cut from (_cut_slice)."""

    work_uri: str
    index: int
    slices: int
    slice: Slice
    token: str
    part_uri: str
    first_run: bool
    limits: Limits
    output_format: str
    new_base: dict[str, int]
    groups: list[Group]
    split: int
    merged: int
    #: The groups kept as published (by group_id): no rows in the part.
    reused: dict[int, Shard]
    #: Each group's section, by group_id.
    sections: list[str]
    started: float
    #: The rows and files of its input that the slice read (Parquet footers' counts).
    rows_read: int = 0
    files_read: int = 0


def _write_slice(work_uri: str, index: int, limits: Limits, *, output_format: str,
                 con: duckdb.DuckDBPyConnection | None,
                 reuse_keys: frozenset[str]) -> _WrittenSlice:
    """Slice `index`'s part: its rows, sorted, written (_write_part)."""
    if output_format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {output_format!r}")
    started = time.monotonic()
    work = storage.open_storage(work_uri)
    prepared = read_prepared(work)
    slices = slices_of(prepared)
    if not 0 <= index < len(slices):
        raise ConfigError(f"plan slice {index}: the plan has {len(slices)} slice(s), "
                          f"0 to {len(slices) - 1}")
    sl = slices[index]
    con = con or sql.connect()
    register_parquet(con, "bounds_all", [prepared["bounds_uri"]])
    con.execute(sql.load_sql("slice_shard_bounds"), {"sections": list(sl.sections)})
    inputs = split_inputs_of(work, prepared)
    own = None if inputs is None else inputs[index]
    view = DiffedView.from_json(prepared.get("view"))
    read: list[str] = []  # the data files whose rows the slice reads
    if own is None:  # the diffed rows of the slice's sections' files, filtered to its own
        read = slice_files(con, prepared["diffed_uris"], sl, view)
        register_diffed(con, "diffed_all", read, view)
        con.sql(sql.load_sql("diffed_slice"), params={
            "sections": list(sl.sections), "lo": sl.lo, "hi": sl.hi}).create_view(
                "diffed", replace=True)
    elif own:  # the slice's own rows, split by prepare or by the split tasks
        read = own
        register_diffed(con, "diffed", own)
    else:  # a slice without rows: the diffed rows' columns (a split file's, if any), no row
        # (a first run's view would pass over load's rows for their sections' names)
        columns_of = next(([files[0]] for files in inputs or [] if files), [])
        register_diffed(con, "diffed_all", columns_of or prepared["diffed_uris"],
                        None if columns_of else view)
        con.sql("SELECT * FROM diffed_all WHERE false").create_view("diffed", replace=True)
    # A first run's slice of whole sections has its stats from prepare (one scan for all).
    known = {row[0]: tuple(row) for row in prepared.get("section_stats") or []}
    stats = [known[s] for s in sl.sections] if prepared["first_run"] and sl.lo is None \
        and sl.hi is None and sl.sections and all(s in known for s in sl.sections) else None
    first_run_time = prepared.get("first_run_time")
    groups, split, merged, reused, sections = _write_part(
        con, work, index, prepared["first_run"], limits, output_format, reuse_keys, stats,
        None if first_run_time is None else datetime.fromisoformat(first_run_time),
        bool(prepared.get("ext_empty")))
    con.execute("DROP TABLE IF EXISTS shard_bounds")
    return _WrittenSlice(
        work_uri=work_uri, index=index, slices=len(slices), slice=sl, token=prepared["token"],
        part_uri=work.uri(_part_key(index)), first_run=prepared["first_run"], limits=limits,
        output_format=output_format,
        new_base=provisional_base(slices, index, prepared["next_free"]), groups=groups,
        split=split, merged=merged, reused=reused, sections=sections, started=started,
        rows_read=file_rows(read), files_read=len(read))


def _cut_slice(written: _WrittenSlice, *, alone: bool = True) -> SliceResult:
    """The written slice's shards (_shards_of_part), recorded as `plan-slice-NNNNN.json`.
    `alone`: nothing runs beside the cut (_read_narrow may use every core)."""
    shards, split, merged = _shards_of_part(written, alone=alone)
    result = SliceResult(index=written.index, part_uri=written.part_uri, shards=shards,
                         split=split, merged=merged, seconds=time.monotonic() - written.started,
                         rows_read=written.rows_read, files_read=written.files_read)
    SLICE_RESULTS.write(storage.open_storage(written.work_uri), written.index, written.token, {
        "slice": asdict(written.slice), "index": written.index,
        "part_uri": result.part_uri, "shards": [asdict(s) for s in shards],
        "split": split, "merged": merged, "seconds": round(result.seconds, 3),
    })
    log.info("plan: slice %d/%d, %s: %d URLs in %d shards (%.1f s)", written.index + 1,
             written.slices, written.slice.describe(), sum(x.urls for x in shards), len(shards),
             result.seconds)
    return result


def _part_key(part: int) -> str:
    return part_key(PLANNED_FOLDER, part)


def _write_part(con: duckdb.DuckDBPyConnection, work: storage.Storage, part: int,
                first_run: bool, limits: Limits, output_format: str,
                reuse_keys: frozenset[str], stats: list[tuple[Any, ...]] | None = None,
                first_run_time: datetime | None = None, ext_empty: bool = False
                ) -> tuple[list[Group], int, int, dict[int, Shard], list[str]]:
    """Group the rows of the view `diffed` (one slice) and write them as part `part`;
    returns the groups, the counts of split and merged groups, the groups kept as
    published (by group_id) and each group's section.

    One sort: the rows of the groups to write, by group and URL (planned_rows); a
    repacked group is then cut into shards at row positions (_shards_of_part). A group
    kept as one shard whose key is in `reuse_keys` (already published, same content) is
    not written at all. A tiny shard merges only into a predecessor in the same slice: a
    slice boundary is a previous shard's lower bound, so at worst a tiny shard stays on
    its own there.
    `stats`: the slice's group stats when prepare measured them (a first run's whole
    sections), in the order of the query that would give them. `first_run_time`: a first
    run's time, which all its rows were first seen and changed at (planned_rows).
    `ext_empty`: no row has extension XML (planned_rows).
    """
    register_assigned(con, output_format)
    # A first run repacks every section: its groups' longest lines are read from the part
    # once it is written (below), not measured in a pass of their own.
    if stats is None:
        stats = con.sql(sql.load_sql("new_section_stats" if first_run else "group_stats")
                        ).fetchall()
    groups, split, merged = _groups([row[:5] for row in stats], limits, first_run=first_run)
    # A group that keeps one base shard as it is: its key from the sums alone.
    members = Counter(g.group_id for g in groups)
    reused: dict[int, Shard] = {}
    for g, (section, base, urls, body, _, xor, lastmod, ns, changed, *_) in zip(
            groups, stats, strict=True):
        if g.repack or g.merged or base is None:
            continue
        if members[g.group_id] > 1:
            continue  # a tiny shard merges into it: its content changes
        shard = _shard(section, int(base), int(urls), int(body), lastmod, int(xor), int(ns),
                       int(changed), output_format, part=None)
        if shard.key in reuse_keys:
            reused[g.group_id] = shard
    prefixes = _common_prefixes(groups, stats)
    group_table = pa.table({
        "section": pa.array([g.section for g in groups], pa.string()),
        "base_shard": pa.array([g.base_shard for g in groups], pa.int32()),
        "group_id": pa.array([g.group_id for g in groups], _group_id_type(len(groups))),
        "reused": pa.array([g.group_id in reused for g in groups], pa.bool_()),
        "skip": pa.array([len(prefixes[g.group_id]) for g in groups], pa.int64()),
    })
    con.register("shard_groups", group_table)
    sections = [""] * len(prefixes)
    for g in groups:
        sections[g.group_id] = g.section
    con.execute(sql.load_sql("planned_section_type"), {"sections": sections})
    # The rows go to Parquet in file order straight from the sort, never into a table; the
    # projection after the sort must keep its order.
    planned = con.sql(sql.load_sql("planned_rows"), params={
        "prefixes": prefixes, "sections": sections, "format": output_format,
        "ns_markers": NAMESPACE_MARKERS, "first_run_time": first_run_time,
        "ext_empty": ext_empty})
    if ext_empty:  # '' in every row: render puts it back
        planned = planned.project("* EXCLUDE (ext)")
    if all(g.group_id in reused for g in groups):
        # Every shard is kept as published: an empty part, without reading the rows again
        # (a false filter makes DuckDB's plan an empty result, not a scan of every diffed
        # row for each such slice).
        planned = planned.filter("false")
    with sql.insertion_order(con):
        write_parquet(planned, work, _part_key(part))
    con.unregister("shard_groups")
    return groups, split, merged, reused, sections


def _shards_of_part(written: _WrittenSlice, *, alone: bool = True
                    ) -> tuple[list[Shard], int, int]:
    """The written slice's shards: each repacked group cut at row positions (pack_subs),
    every shard's sums from the part's narrow columns; with the counts of split and
    merged groups (a first run's fills are known only from the part: its longest lines)."""
    groups, split, merged = written.groups, written.split, written.merged
    limits, part, sections = written.limits, written.index, written.sections
    cols = _read_narrow(written.part_uri, use_threads=alone)
    runs = _group_runs(cols["group_id"])
    if written.first_run:  # the fills from each group's longest line, as group_stats gives it
        longest = {gid: int(cols["line_bytes"][start:end].max()) for gid, start, end in runs}
        groups, split, merged = _groups(
            [(g.section, g.base_shard, g.urls, g.body, longest[g.group_id]) for g in groups],
            limits, first_run=True)
    by_id = {g.group_id: g for g in groups if not g.merged}
    pieces: list[tuple[int, int, int, int]] = []  # (group_id, sub, start, end)
    for group_id, start, end in runs:
        g = by_id[group_id]
        if g.repack:
            cuts = pack_subs(cols["line_bytes"][start:end], g.fill_urls, g.fill_bytes)
            bounds = [start + c for c in cuts] + [end]
            pieces += [(group_id, sub, lo, hi)
                       for sub, (lo, hi) in enumerate(itertools.pairwise(bounds))]
        else:
            pieces.append((group_id, 0, start, end))
    numbers = _number_shards(pieces, by_id, written.new_base)
    shards: list[Shard] = []
    starts = np.array([p[2] for p in pieces], dtype=np.int64)
    if len(pieces):
        sums = {name: op.reduceat(cols[name], starts, dtype=cols[name].dtype)
                for name, op in (("line_bytes", np.add), ("row_hash", np.bitwise_xor),
                                 ("lastmod", np.maximum), ("ns", np.bitwise_or))}
        sums["changed"] = np.add.reduceat(cols["changed"], starts, dtype=np.int64)
    for i, ((group_id, _, start, end), number) in enumerate(zip(pieces, numbers, strict=True)):
        lastmod = None if sums["lastmod"][i] == _NO_TIME else datetime.fromtimestamp(
            int(sums["lastmod"][i]) // 1_000_000, UTC)
        shards.append(_shard(
            sections[group_id], number, end - start, int(sums["line_bytes"][i]), lastmod,
            int(sums["row_hash"][i]), int(sums["ns"][i]), int(sums["changed"][i]),
            written.output_format, part=part, row_start=start))
    shards += written.reused.values()
    shards.sort(key=lambda s: (s.section, s.row_start is None, s.row_start or 0, s.shard))
    return shards, split, merged


def _group_id_type(groups: int) -> pa.DataType:
    """The narrowest integer for the slice's group ids: the sort of planned_rows begins with
    it, and a 2-byte key sorts markedly faster than an 8-byte one."""
    return pa.uint16() if groups <= 2**16 else pa.int32()


def _common_prefixes(groups: list[Group], stats: list[tuple[Any, ...]]) -> list[str]:
    """By group_id: the prefix every URL of the group shares (the common prefix of its
    smallest and largest URL, its tiny merged shards' included), which the sort of
    planned_rows can skip."""
    lo: dict[int, str] = {}
    hi: dict[int, str] = {}
    for g, row in zip(groups, stats, strict=True):
        gid = g.group_id
        lo[gid] = min(lo.get(gid, row[9]), row[9])
        hi[gid] = max(hi.get(gid, row[10]), row[10])
    prefixes = [""] * (max(lo, default=-1) + 1)
    for gid in lo:
        prefixes[gid] = lo[gid][:_ascii_prefix_length(lo[gid], hi[gid])]
    return prefixes


def _ascii_prefix_length(a: str, b: str) -> int:
    """Characters of the common prefix of a and b, up to the first non-ASCII one (where
    DuckDB's and Python's character counts could differ; normalised URLs are ASCII)."""
    prefix = os.path.commonprefix([a, b])
    return next((i for i, c in enumerate(prefix) if ord(c) > 127), len(prefix))


#: A shard whose rows have no lastmod (the lastmod column's NULL, read as int64).
_NO_TIME = np.iinfo(np.int64).min


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


def _read_narrow(part_uri: str, *, use_threads: bool = True) -> dict[str, Any]:
    """The part's narrow columns as numpy arrays: a slice's rows. Not the section: a group's
    is known (reading it was half the read). No copy of a column
    of the type it is read as, and `changed` as booleans: plan_slices holds these while the
    next slice sorts.
    `use_threads`: not beside the next slice's sort, which has the cores (plan_slices reads
    the last slice's alone, with threads)."""
    table = read_table(part_uri, ["group_id", "line_bytes", "row_hash", "lastmod", "ns",
                                  "changed"], use_threads=use_threads)
    lastmod = table.column("lastmod").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    return {
        "group_id": table.column("group_id").to_numpy(),
        "line_bytes": table.column("line_bytes").to_numpy().astype(np.int64, copy=False),
        "row_hash": table.column("row_hash").to_numpy().astype(np.uint64, copy=False),
        "lastmod": lastmod.fill_null(_NO_TIME).to_numpy(),
        "ns": table.column("ns").to_numpy().astype(np.int64),
        "changed": table.column("changed").to_numpy(),
    }
