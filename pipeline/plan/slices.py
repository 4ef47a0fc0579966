"""Plan slices: the plan works on at most about SLICE_ROWS rows at a time.

Its peak memory and temp disk are bounded by a slice, not by the inventory. A slice is
one section's URLs in a range [lo, hi), or several whole small sections. A section that
had shards is cut only where no previous shard spans the cut (at a shard's smallest
URL), so a kept shard is never cut; a new section larger than a slice is cut at
quantiles of a deterministic sample of its URLs. Shard numbers stay unique per section
across slices: a kept shard keeps its number, new ones count on from the section's
highest previous number. An incremental run that can keep published shards sizes its
slices by the rows it may write (group_counts: groups with added, changed or lost rows),
not by all rows: its other rows are only counted, never sorted or written, so a nightly
run with a few changes plans in one slice (one scan of the rows instead of one per
slice), up to REUSED_SLICE_FACTOR times SLICE_ROWS rows in all.

The slices are independent units, planned in any order, in any process: `prepare`
chooses them and writes `plan-slices.json` (and the last generation's shard bounds,
`plan-bounds.parquet`); `plan_slice` (pipeline.plan.packing) plans one and writes its
part and `plan-slice-NNNNN.json`; `combine` gathers them into `shards.json`. A slice
cannot know how many new shards the section's earlier slices made, so it writes new
shards under provisional numbers (`provisional_base`): in a section's first slice they
are already the final ones; in a later slice they are `(slice + 1) << 32` onwards,
above every final number, in the same order, and unique in the whole plan. `combine`
gives every shard its final number, exactly what numbering the slices one after the
other gives, and keeps the slice's number as `Shard.planned_shard`.

Where the slices are planned by tasks of their own (the DAG's) and a slice would read more
than SHARE_FACTOR times its rows (a first run's slice of a large section reads its whole
bucket; a nightly's slices each scan every diffed row), prepare names units of the diffed
files (`split_units`) and `split_input`, one task per unit, writes each unit's rows by slice
(`plan-input/slice=N/`, `plan-split-NNNNN.json`): each slice then reads only its own rows.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import duckdb
import pyarrow as pa

from pipeline import sql, storage
from pipeline.diffed import (
    BUCKET,
    DIFFED_BUCKETS,
    DiffedView,
    bucketed,
    files_of_sections,
    plain_omitted,
    register_diffed,
)
from pipeline.errors import ConfigError
from pipeline.layout import BOUNDS_KEY, SHARDS_KEY, SLICE_INPUT_FOLDER, SLICES_KEY
from pipeline.parquet import open_parquet, register_parquet, write_parquet, write_partitioned
from pipeline.parts import Parts
from pipeline.plan.model import PlanResult
from pipeline.settings import Environment, environment
from pipeline.shards import Shard
from pipeline.snapshot import register_assigned, register_snapshot, shard_bounds

log = logging.getLogger(__name__)

#: New shards of a section's later slices are numbered provisionally from
#: (slice + 1) << PROVISIONAL_SHIFT: above every final number (which fit in 32 bits).
PROVISIONAL_SHIFT = 32
#: Rows planned at a time by default (SITEMAPS_PLAN_SLICE_ROWS, read when a plan is
#: prepared, says otherwise): each slice is assigned, packed, sorted and written on its own,
#: so plan's peak memory and DuckDB temp disk grow with this, not with the inventory. At
#: about 250 bytes a row in DuckDB, 4M rows is about 1 GB per copy; an inventory that fits
#: is planned in one pass.
SLICE_ROWS = Environment().plan_slice_rows
#: A slice of an incremental run holds whole sections (or shards) while the rows it may write
#: stay within the slice's rows and all its rows within this many times them: most of them
#: are only counted, but a slice must stay bounded when shards thought kept are not (an
#: output format or version changed: then it sorts them all, spilling to disk).
REUSED_SLICE_FACTOR = 8
#: Sampled URLs per slice when a new section is cut at sample quantiles.
SAMPLES_PER_SLICE = 1_000
#: From this many slices on, prepare splits the diffed rows by slice in one pass (one more
#: write and read of them) and each slice reads only its own rows; below, each slice scans
#: every diffed row for its own, which costs less than the split. Not a first run's rows:
#: they are in buckets of sections (pipeline.diffed), and each slice reads its sections'
#: files.
SPLIT_INPUT_SLICES = 6
#: A plan whose slices are planned by tasks of their own (the DAG's) has its rows split by
#: slice first, by tasks mapped over the diffed files (`split_input`: each reads its own
#: files once), when a slice would otherwise read more than this many times its rows: a
#: first run's slice of a large section (its bucket holds the whole section and others), or
#: every slice of a nightly (each scans every diffed row for its own).
SHARE_FACTOR = 2
#: Each split task's result, `plan-split-NNNNN.json`: the files it wrote for each slice,
#: with the token of the prepare that chose the slices.
SPLIT_RESULTS = Parts(
    name="plan-split", what="plan split", token_field="token",
    missing_hint="split them first",
    stale_hint="were split before the slices were chosen again (plan-slices.json is "
               "newer): split them again")
#: Each slice's result, `plan-slice-NNNNN.json`: its shards under their planned numbers,
#: with the token of the prepare that chose the slices.
SLICE_RESULTS = Parts(
    name="plan-slice", what="plan slice", token_field="token",
    missing_hint="plan them first",
    stale_hint="were planned before the slices were chosen again (plan-slices.json is "
               "newer): plan them again")


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


def _cuts_by_shards(bounds: list[tuple[str, str, int, int]], slice_rows: int,
                    max_rows: int) -> list[str]:
    """Cut points for a section that had shards: (lower, upper, urls, weight) of each of
    them, weight being the rows of it plan may write (all of them, but in an incremental
    run that keeps the untouched shards).

    A cut is a shard's smallest URL that no other shard spans (all shards that start
    below it end below it), so every previous shard, and every new URL its range
    takes (assigned_rows), lies in one slice. Shards are added until about slice_rows
    of weight or max_rows of URLs.
    """
    cuts: list[str] = []
    acc = rows = 0
    reach: str | None = None  # the largest URL of the shards so far
    for lower, upper, urls, weight in sorted(bounds):
        if (rows and (acc + weight > slice_rows or rows + urls > max_rows)
                and reach is not None and reach < lower):
            cuts.append(lower)
            acc = rows = 0
        acc += weight
        rows += urls
        reach = upper if reach is None else max(reach, upper)
    return cuts


def sample_every(slice_rows: int) -> int:
    """One URL in how many a new section's sample holds (SAMPLES_PER_SLICE per slice)."""
    return max(1, slice_rows // SAMPLES_PER_SLICE)


def _cuts_by_sample(sample: list[str], rows: int, slice_rows: int) -> list[str]:
    """Cut points at the sample's quantiles, so each slice holds about slice_rows."""
    n = -(-rows // slice_rows)
    return sorted({sample[len(sample) * i // n] for i in range(1, n)}) if sample else []


def _weights(con: duckdb.DuckDBPyConnection, output_format: str
             ) -> tuple[dict[str, int], dict[tuple[str, int], int]]:
    """The rows plan may write (sql/group_counts.sql), by section and by previous shard."""
    con.sql("SELECT * FROM diffed_all").create_view("diffed", replace=True)
    register_assigned(con, output_format)
    by_section: dict[str, int] = {}
    by_shard: dict[tuple[str, int], int] = {}
    for section, base, urls, touched in con.sql(sql.load_sql("group_counts")).fetchall():
        weight = int(urls) if touched else 0
        by_section[section] = by_section.get(section, 0) + weight
        if base is not None:
            by_shard[(section, int(base))] = weight
    return by_section, by_shard


def _slices(con: duckdb.DuckDBPyConnection, slice_rows: int, weighted: bool = False,
            output_format: str = "xml", counts: list[tuple[str, int]] | None = None,
            sample_uri: str = "") -> list[Slice]:
    """The plan's slices, in (section, URL) order, from `diffed_all` and `shard_bounds`.

    `weighted` (an incremental run that keeps untouched shards): sized by the rows plan may
    write, at most REUSED_SLICE_FACTOR * slice_rows rows in all; else by all rows.
    `counts`: each section's rows (sql/section_counts.sql), when known. `sample_uri`: load's
    sample of these rows' URLs (sql/section_sample.sql, one in sample_every(slice_rows)),
    read for a new section's cuts instead of its rows."""
    if counts is None:
        counts = con.sql(sql.load_sql("section_counts")).fetchall()
    # Rows that fit one slice are planned in one: no weights needed.
    weighted = weighted and sum(n for _, n in counts) > slice_rows
    max_rows = slice_rows * REUSED_SLICE_FACTOR if weighted else slice_rows
    section_weight, shard_weight = _weights(con, output_format) if weighted else ({}, {})
    bounds: dict[str, list[tuple[str, str, int, int]]] = {}
    for section, shard, lower, upper, urls in con.sql(
            "SELECT section, shard, lower, upper, urls FROM shard_bounds").fetchall():
        weight = shard_weight.get((section, int(shard)), 0) if weighted else int(urls)
        bounds.setdefault(section, []).append((lower, upper, int(urls), weight))
    big_new = [s for s, n in counts if n > slice_rows and s not in bounds]
    samples: dict[str, list[str]] = {}
    if big_new:
        if sample_uri:  # the same rows as sample_urls gives, from a few of them
            register_parquet(con, "section_sample", [sample_uri])
            rows = con.sql("SELECT section, url FROM section_sample "
                           "WHERE list_contains($sections, section) ORDER BY section, url",
                           params={"sections": big_new}).fetchall()
        else:
            rows = con.sql(sql.load_sql("sample_urls"), params={
                "sections": big_new, "every": sample_every(slice_rows)}).fetchall()
        for section, url in rows:
            samples.setdefault(section, []).append(url)
    slices: list[Slice] = []
    weight_of_last = 0
    for section, n in counts:
        # A new section's rows are all written; a known one's as its touched shards hold.
        weight = section_weight.get(section, n) if section in bounds else n
        if n <= slice_rows or (weight <= slice_rows and n <= max_rows):
            cuts: list[str] = []
        elif section in bounds:
            cuts = _cuts_by_shards(bounds[section], slice_rows, max_rows)
        else:
            cuts = _cuts_by_sample(samples.get(section, []), n, slice_rows)
        if not cuts:
            last = slices[-1] if slices else None
            if (last is not None and last.lo is None and last.hi is None
                    and weight_of_last + weight <= slice_rows and last.rows + n <= max_rows):
                # Small whole sections share a slice (one scan and one part file for them).
                slices[-1] = Slice(last.sections + (section,), rows=last.rows + n)
                weight_of_last += weight
            else:
                slices.append(Slice((section,), rows=n))
                weight_of_last = weight
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
            con: duckdb.DuckDBPyConnection | None = None, slice_rows: int | None = None,
            keeps_shards: bool = False, output_format: str = "xml",
            view: DiffedView | None = None, run_time: str | None = None,
            ext_empty: bool = False, split_tasks: bool = False) -> list[Slice]:
    """Choose the plan's slices; write them and the numbering state to `plan-slices.json`.

    `diffed_uris`: the diff's parts (one per diff partition; a single URI is one part),
    read together as one table: the plan does not depend on how the diff was cut. Also
    writes the last generation's shard bounds (`plan-bounds.parquet`, one row per
    shard), so that no slice reads the whole snapshot again. `keeps_shards`: the slices
    will keep the published shards they can (reuse keys; not --force), so an incremental
    run's slices are sized by the rows they may write (_slices). `view`: a first run's rows
    not written (pipeline.diffed.DiffedView), whose sections' counts and stats its diff took.
    `run_time` (ISO 8601): the run's time, which a first run's rows were all first seen and
    changed at (each slice's sort then leaves those columns out, planned_rows). `ext_empty`:
    no row has extension XML (pipeline.extensions.ext_always_empty), which the sort then
    leaves out too. `split_tasks`: the slices are planned by tasks of their own, and the rows
    are split by slice by tasks mapped over the diffed files (`split_units`, `split_input`)
    where a slice would read more than SHARE_FACTOR times its rows; else (one process plans
    every slice) prepare splits them itself when there are many slices (SPLIT_INPUT_SLICES),
    and a first run's slices read their sections' buckets.
    """
    slice_rows = slice_rows or environment().plan_slice_rows
    started = time.monotonic()
    con = con or sql.connect()
    diffed = [diffed_uris] if isinstance(diffed_uris, str) else list(diffed_uris)
    register_diffed(con, "diffed_all", diffed, view)
    _register_previous_bounds(con, snapshot_uri)
    counts = ([(r[0], r[1]) for r in view.section_stats] if view is not None
              else con.sql(sql.load_sql("section_counts")).fetchall())
    slices = _slices(con, slice_rows, weighted=keeps_shards and snapshot_uri is not None,
                     output_format=output_format, counts=counts,
                     sample_uri=_load_sample(view, slice_rows))
    # New shards of a section are numbered after its highest previous number.
    next_free = {section: int(top) + 1 for section, top in con.sql(
        "SELECT section, max(shard) FROM shard_bounds GROUP BY section").fetchall()}
    work = storage.open_storage(work_uri)
    bounds_uri = write_parquet(con.sql("SELECT * FROM shard_bounds"), work, BOUNDS_KEY)
    con.execute("DROP TABLE IF EXISTS shard_bounds")
    split_units = _split_units(con, diffed, slices, counts, view) if split_tasks else None
    # A first run's rows are in buckets of sections already: each slice reads its own.
    slice_inputs = _split_by_slice(con, work, slices) \
        if not split_tasks and len(slices) >= SPLIT_INPUT_SLICES and not bucketed(diffed) \
        else None
    section_stats = (None if snapshot_uri is not None
                     else _whole_section_stats(con, slices, view))
    work.write_bytes(SLICES_KEY, json.dumps({
        # Each slice's result names this, so combine never mixes results of two prepares.
        "token": uuid.uuid4().hex,
        "slices": [asdict(sl) for sl in slices], "next_free": next_free,
        "first_run": snapshot_uri is None, "diffed_uris": diffed, "bounds_uri": bounds_uri,
        "first_run_time": run_time if snapshot_uri is None else None, "ext_empty": ext_empty,
        "view": None if view is None else asdict(view),
        "slice_inputs": slice_inputs, "split_units": split_units,
        "section_stats": section_stats,
        "slice_rows": slice_rows, "seconds": round(time.monotonic() - started, 3),
    }).encode())
    log.info("plan: %d slice(s) for about %d rows, at most about %d to write in each", len(slices),
             sum(sl.rows for sl in slices), slice_rows)
    return slices


def _load_sample(view: DiffedView | None, slice_rows: int) -> str:
    """Load's sample of a first run's URLs (ValidRows.sample_uri) where it is what
    sql/sample_urls.sql would take of the diffed rows: taken one in as many, and no row moved
    to another section (where a row can be a news article, which moves to the news section,
    the rows are scanned)."""
    if view is None:
        return ""
    valid = view.valid
    if "is_news" not in plain_omitted(valid.get("constant_columns", ()), view.with_news):
        return ""
    if not valid.get("sample_uri") or valid.get("sample_every") != sample_every(slice_rows):
        return ""
    return str(valid["sample_uri"])


def _register_previous_bounds(con: duckdb.DuckDBPyConnection, snapshot_uri: str | None) -> None:
    """The table `shard_bounds`: the last generation's shards, from its snapshot's footer
    (pipeline.snapshot.shard_bounds), else from its rows (sql/previous_shard_bounds.sql)."""
    footer = shard_bounds(snapshot_uri) if snapshot_uri else None
    if footer is None:
        register_snapshot(con, snapshot_uri)
        con.execute(sql.load_sql("previous_shard_bounds"))
        return
    con.register("footer_bounds", footer)
    con.execute("CREATE OR REPLACE TABLE shard_bounds AS SELECT * FROM footer_bounds")
    con.unregister("footer_bounds")


def _whole_section_stats(con: duckdb.DuckDBPyConnection, slices: Sequence[Slice],
                         view: DiffedView | None = None) -> list[list[Any]]:
    """A first run's new_section_stats rows of every section that a slice holds whole, in
    one scan for all slices: a slice of whole sections then reads its rows once, to write
    them, not twice (one scan instead of one per slice). A first run
    whose rows were not written (`view`) has them from its diff, with no scan."""
    whole = [s for sl in slices if sl.lo is None and sl.hi is None for s in sl.sections]
    if not whole:
        return []
    if view is not None:  # new_section_stats' columns
        held = set(whole)
        return [[section, None, urls, 0, 0, 0, None, 0, 0, lo, hi]
                for section, urls, lo, hi in view.section_stats if section in held]
    con.sql("SELECT * FROM diffed_all WHERE list_contains($sections, section)",
            params={"sections": whole}).create_view("diffed", replace=True)
    return [list(row) for row in con.sql(sql.load_sql("new_section_stats")).fetchall()]


def _split_by_slice(con: duckdb.DuckDBPyConnection, work: storage.Storage,
                    slices: Sequence[Slice]) -> list[list[str]]:
    """Write the view `diffed_all` once, split by slice (sql/slice_input.sql), under
    SLICE_INPUT_FOLDER; returns each slice's files (none for a slice without rows)."""
    parts = _write_by_slice(con, work, slices)
    log.info("plan: the diffed rows split by slice (%d slices)", len(slices))
    return [parts.get(str(index), []) for index in range(len(slices))]


def _write_by_slice(con: duckdb.DuckDBPyConnection, work: storage.Storage,
                    slices: Sequence[Slice], file_prefix: str = "") -> dict[str, list[str]]:
    """The rows of the view `diffed_all` written in one pass under SLICE_INPUT_FOLDER, in a
    Hive folder per slice (`slice=N/`); each slice's files by its number (as text)."""
    con.register("slice_ranges", pa.table({
        "slice": pa.array([i for i, sl in enumerate(slices) for _ in sl.sections], pa.int32()),
        "section": pa.array([s for sl in slices for s in sl.sections], pa.string()),
        "lo": pa.array([sl.lo for sl in slices for _ in sl.sections], pa.string()),
        "hi": pa.array([sl.hi for sl in slices for _ in sl.sections], pa.string())}))
    try:
        return write_partitioned(con, con.sql(sql.load_sql("slice_input")), work,
                                 SLICE_INPUT_FOLDER, "slice", file_prefix=file_prefix)
    finally:
        con.unregister("slice_ranges")


def file_rows(uris: Sequence[str]) -> int:
    """The rows of the Parquet files at `uris`, from their footers."""
    return sum(open_parquet(u).metadata.num_rows for u in uris)


def slice_files(con: duckdb.DuckDBPyConnection, diffed: Sequence[str], sl: Slice,
                view: DiffedView | None = None) -> list[str]:
    """The diffed files a slice reads when its rows are not split by slice: its sections'
    buckets' (pipeline.diffed.files_of_sections), else every file."""
    return files_of_sections(con, diffed, sl.sections, view) or list(diffed)


def _split_units(con: duckdb.DuckDBPyConnection, diffed: Sequence[str],
                 slices: Sequence[Slice], counts: Sequence[tuple[str, int]],
                 view: DiffedView | None) -> list[list[str]] | None:
    """The diffed files, in the units that the split tasks are mapped over (a bucket's
    files, else one file each), when some slice would read more than SHARE_FACTOR times
    its rows without a split (_unsplit_reads); else None: each slice reads its sections'
    files. A bucket's files are split together: a first run's view over load's files
    (pipeline.diffed.first_run_rows) then reads each section's rows whole."""
    if len(slices) < 2:
        return None
    reads = _unsplit_reads(con, diffed, slices, counts, view)
    if all(read <= SHARE_FACTOR * max(sl.rows, 1)
           for sl, read in zip(slices, reads, strict=True) if sl.sections):
        return None
    units: dict[str, list[str]] = {}
    for uri in diffed:
        bucket = re.search(rf"/{BUCKET}=(\d+)/", uri)
        units.setdefault(bucket.group(1) if bucket else uri, []).append(uri)
    log.info("plan: the diffed rows to be split by slice in %d task(s)", len(units))
    return list(units.values())


def _unsplit_reads(con: duckdb.DuckDBPyConnection, diffed: Sequence[str],
                   slices: Sequence[Slice], counts: Sequence[tuple[str, int]],
                   view: DiffedView | None) -> list[int]:
    """About the rows each slice reads when they are not split by slice, from the sections'
    counts, no file opened: every row when the diffed files are not in buckets of sections,
    else the rows of its sections' buckets (each section counted whole in each bucket that
    holds some of it; a section in no known bucket, the news section, reads every file)."""
    total = sum(n for _, n in counts)
    if not bucketed(diffed):
        return [total if sl.sections else 0 for sl in slices]
    if view is not None:
        buckets = {s: list(b) for s, b in view.section_buckets.items()}
    else:
        buckets = {s: [int(b)] for s, b in con.sql(
            f"SELECT s, hash(s) % {DIFFED_BUCKETS} FROM unnest($sections::VARCHAR[]) t(s)",
            params={"sections": [s for s, _ in counts]}).fetchall()}
    in_bucket: dict[int, int] = {}
    for section, n in counts:
        for b in buckets.get(section, ()):
            in_bucket[b] = in_bucket.get(b, 0) + n
    reads = []
    for sl in slices:
        if any(s not in buckets for s in sl.sections):
            reads.append(total)
        else:
            reads.append(sum(in_bucket[b] for b in {b for s in sl.sections for b in buckets[s]}))
    return reads


def split_input(work_uri: str, unit: int, *, con: duckdb.DuckDBPyConnection | None = None
                ) -> tuple[int, int]:
    """Split unit `unit` of `plan-slices.json` (its `split_units`): write its rows by slice
    under SLICE_INPUT_FOLDER (`slice=N/uNNNNN-data_*.parquet`, for each slice its rows fall
    in) and `plan-split-NNNNN.json` (those files, by slice). Reads its own files once;
    independent of every other unit; a retry rewrites both. Returns the rows and files read.
    """
    work = storage.open_storage(work_uri)
    prepared = read_prepared(work)
    units = prepared.get("split_units") or []
    if not 0 <= unit < len(units):
        raise ConfigError(f"plan split {unit}: the plan has {len(units)} split unit(s)")
    files = list(units[unit])
    con = con or sql.connect()
    register_diffed(con, "diffed_all", files, DiffedView.from_json(prepared.get("view")))
    parts = _write_by_slice(con, work, slices_of(prepared), file_prefix=f"u{unit:05d}-")
    rows = file_rows(files)
    SPLIT_RESULTS.write(work, unit, prepared["token"], {
        "unit": unit, "files": parts, "rows": rows})
    log.info("plan: split %d: %d rows of %d file(s) into %d slice(s)", unit, rows, len(files),
             len(parts))
    return rows, len(files)


def split_inputs_of(work: storage.Storage, prepared: dict[str, Any]) -> list[list[str]] | None:
    """Each slice's own files, when the rows were split by slice (by prepare, or by the
    split tasks, whose results must all be there, of this prepare); else None."""
    units = prepared.get("split_units")
    if units is not None:
        results = SPLIT_RESULTS.gather(work, len(units), prepared["token"])
        return [[u for r in results for u in r["files"].get(str(index), [])]
                for index in range(len(prepared["slices"]))]
    inputs = prepared.get("slice_inputs")
    return None if inputs is None else [list(files) for files in inputs]


def read_prepared(work: storage.Storage) -> dict[str, Any]:
    """What prepare wrote (`plan-slices.json`): the slices, the numbering state, the inputs."""
    return json.loads(work.read_bytes(SLICES_KEY))  # type: ignore[no-any-return]


def slices_of(prepared: dict[str, Any]) -> list[Slice]:
    """The slices of what prepare wrote."""
    return [Slice(**{**d, "sections": tuple(d["sections"])}) for d in prepared["slices"]]


def combine(work_uri: str, kept: Sequence[Shard] = ()) -> PlanResult:
    """Gather every slice's shards, in part order, under their final numbers: `shards.json`.

    A kept shard keeps its number; new shards of a section count on from its next free
    number in slice order, then in their order in the slice: exactly the numbers of
    planning the slices one after the other. `kept`: the live shards of the sections that
    were not planned, being unchanged (pipeline.unchanged), added as they are. Fails,
    naming them, when slices are missing or were planned from another `prepare`.
    """
    started = time.monotonic()
    work = storage.open_storage(work_uri)
    prepared = read_prepared(work)
    slices = slices_of(prepared)
    results = SLICE_RESULTS.gather(work, len(slices), prepared["token"], where=work_uri)
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
    shards += kept
    split, merged = sum(r["split"] for r in results), sum(r["merged"] for r in results)
    work.write_bytes(SHARDS_KEY, json.dumps([asdict(s) for s in shards]).encode())
    seconds = (prepared["seconds"] + sum(r["seconds"] for r in results)
               + time.monotonic() - started)
    result = PlanResult(shards=shards, planned_uris=[r["part_uri"] for r in results],
                        shards_uri=work.uri(SHARDS_KEY), split=split, merged=merged,
                        seconds=seconds, bounds_uri=prepared["bounds_uri"],
                        token=prepared["token"])
    log.debug("plan: %d shards in %d sections (%d split, %d merged), %d slice(s) (%.1f s)",
              len(shards), len({s.section for s in shards}), split, merged, len(slices),
              result.seconds)
    return result
