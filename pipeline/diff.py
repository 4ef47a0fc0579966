"""Stage 2, diff: this run's valid rows against the live generation's snapshot.

Classifies every URL as added, changed, unchanged or removed, and gives each a
truthful lastmod (see sql/diff_rows.sql). Writes `diffed/part-NNNNN.parquet`
(every row to publish) and `changes/part-NNNNN.parquet` (added, changed and
removed URLs) under the work prefix. A first run writes no changes: every row it
publishes is added, and the state step writes them from the planned rows
(`changes_uris` empty; pipeline.snapshot.save_state).

Partitions: the join is on url, so cutting both sides by `hash(url) % partitions`
splits it exactly (sql/current_partition.sql, sql/previous_partition.sql): each
partition is diffed on its own, by one call of `diff`, in any order and on any
worker, and writes its own parts and counts; `combine` adds them up. Every rule
of the diff (status, lastmod, news) is per row, so the result does not depend on
the number of partitions. A first run has one (there is nothing to join); later runs as
many as keep each join's hash table within DuckDB's memory (partitions_for). A partition
whose diffed rows match every snapshot row of it (`previous_partition_rows`, counted once
for all partitions) removes nothing, and skips the anti-join that finds removed URLs
(sql/removed_rows.sql).

A first run in one partition writes no diffed rows either (pipeline.diffed.DiffedView):
load wrote its rows in buckets of sections, and every reader runs this stage's query over
the buckets it needs (`first_run_rows`); the diff takes its counts and each section's
stats from load's (`first_run_stats`), or makes one pass over them. A first run in forced
partitions writes them, its parts without the columns that hold one value there
(FIRST_RUN_OMITTED: every row is added, changed last when first seen, in no previous
shard); every reader reads the parts through `pipeline.diffed.register_diffed`, which puts
them back.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

import duckdb

from pipeline import sql, storage
from pipeline.diffed import (
    BUCKET,
    DIFFED_BUCKETS,
    FIRST_RUN_OMITTED,
    DiffedView,
    ValidRows,
    bucketed,
    diff_rows,
    first_run_rows,
    plain_omitted,
    register_diffed,
    register_valid,
)
from pipeline.errors import ConfigError
from pipeline.extensions import NEWS_SECTION
from pipeline.layout import (
    CHANGES_FOLDER,
    DIFF_PARTITION_COLUMN,
    DIFFED_FOLDER,
    PREVIOUS_FOLDER,
    part_key,
)
from pipeline.limits import CHANGEFREQ_ENUM
from pipeline.parquet import register_parquet, write_parquet, write_partitioned
from pipeline.settings import environment
from pipeline.snapshot import register_snapshot

log = logging.getLogger(__name__)

#: Bytes DuckDB's hash table takes per snapshot row of the diff join (two 64-bit URL hashes,
#: section, shard, fingerprint, three timestamps), with room to spare: 5M rows fit a 1 GB
#: limit, 10M spill.
DIFF_BUILD_ROW_BYTES = 150
#: From this many partitions on, the load step cuts the live snapshot's rows by partition
#: once (split_snapshot), so each partition reads its own share instead of scanning every
#: row for it; with fewer, writing them costs more than the scans it saves.
SNAPSHOT_SPLIT_PARTITIONS = 8
#: At most this many automatic partitions: Airflow's default `max_map_length` (the DAG maps
#: one diff task per partition). Each partition reads its own share of the rows: load cuts
#: the valid rows by them, and from SNAPSHOT_SPLIT_PARTITIONS on the snapshot's too.
MAX_AUTO_DIFF_PARTITIONS = 1024

#: The changes of a first run as the diff sees them: none written (see `diff`).
NO_CHANGES = ("SELECT NULL::VARCHAR AS url, NULL::VARCHAR AS change, "
              "NULL::TIMESTAMPTZ AS lastmod WHERE false")

_COUNTS = ("added", "changed", "unchanged", "removed", "lastmod_clamped", "news_articles")


@dataclass
class DiffResult:
    """Counts of the diff (of one partition, or combined), and where its outputs are."""

    added: int
    changed: int
    unchanged: int
    removed: int
    lastmod_clamped: int
    news_articles: int
    #: The diffed and the changes Parquet parts, one per partition, in partition order
    #: (a first run: no changes part, see `diff`).
    diffed_uris: list[str] = field(default_factory=list)
    changes_uris: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: A first run's diffed rows when they are not written (pipeline.diffed.DiffedView, as
    #: a dict): `diffed_uris` are then load's files.
    view: dict[str, Any] | None = None

    def counts(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in _COUNTS}


def partitions_for(inventory_rows: int, partition_rows: int | None = None, *,
                   first_run: bool = False) -> int:
    """Automatic number of diff partitions: one on a first run (nothing to join), else
    ceil(inventory rows / rows per partition), at least 1. Rows per partition:
    `partition_rows`, else SITEMAPS_DIFF_PARTITION_ROWS, else as many snapshot rows as
    DuckDB's memory holds in the join's hash table (DIFF_BUILD_ROW_BYTES each), so the join
    never spills. Chosen before load (which cuts its rows by them) from the inventory's rows,
    of which the valid rows are at most as many."""
    if first_run:
        return 1
    # Rows per partition when the run does not say: SITEMAPS_DIFF_PARTITION_ROWS (0: from the
    # memory limit, below). The DAG maps the partitions over workers; the CLI runs them one
    # after the other.
    partition_rows = partition_rows or environment().diff_partition_rows
    if partition_rows:
        return max(1, math.ceil(inventory_rows / partition_rows))
    rows = max(1_000_000, sql.parse_bytes(sql.duckdb_memory_limit()) // DIFF_BUILD_ROW_BYTES)
    return max(1, min(MAX_AUTO_DIFF_PARTITIONS, math.ceil(inventory_rows / rows)))


def diffed_key(partition: int) -> str:
    return part_key(DIFFED_FOLDER, partition)


def changes_key(partition: int) -> str:
    return part_key(CHANGES_FOLDER, partition)


def check_partition(partition: int, partitions: int) -> None:
    if partitions < 1 or not 0 <= partition < partitions:
        raise ConfigError(f"diff partition {partition} of {partitions}: partitions must be at "
                          "least 1 and a partition between 0 and partitions - 1")


def register_partition(con: duckdb.DuckDBPyConnection, valid: ValidRows, snapshot_uri: str | None,
                       partition: int = 0, partitions: int = 1,
                       previous_files: Sequence[str] | None = None,
                       unchanged_sections: Sequence[str] = ()) -> None:
    """The views `current_rows` and `previous_rows`: both sides of one partition's join.
    `previous_files`: the partition's snapshot rows as split_snapshot cut them, if it did.
    `unchanged_sections`: sections left out on both sides (pipeline.unchanged)."""
    check_partition(partition, partitions)
    if partitions == 1 and not unchanged_sections:
        register_valid(con, "current_rows", valid)
        register_snapshot(con, snapshot_uri)
        return
    # Each side's own rows' files when load cut them by these partitions; the filters of
    # current_partition and previous_partition stay either way.
    register_valid(con, "current_all", valid, valid.normalized_files(partition, partitions)
                   if partitions > 1 else None)
    register_snapshot(con, snapshot_uri if previous_files is None else previous_files,
                      name="previous_all")
    params = {"partition": partition, "partitions": partitions,
              "unchanged_sections": list(unchanged_sections)}
    con.sql(sql.load_sql("current_partition"), params=params).create_view(
        "current_rows", replace=True)
    con.sql(sql.load_sql("previous_partition"), params=params).create_view(
        "previous_rows", replace=True)


def split_snapshot(snapshot_uri: str, partitions: int, work_uri: str,
                   con: duckdb.DuckDBPyConnection | None = None,
                   unchanged_sections: Sequence[str] = ()
                   ) -> tuple[list[list[str]], list[int]]:
    """Write the snapshot's rows cut by diff partition (sql/previous_split.sql) under
    `previous/diff_partition=K/` of the work prefix, once for every partition; returns each
    partition's files and rows (previous_partition_rows' counts), in partition order.
    `unchanged_sections`: their rows are left out (the diff leaves them out)."""
    started = time.monotonic()
    con = con or sql.connect()
    register_parquet(con, "snapshot_file", [snapshot_uri])
    files = write_partitioned(
        con, con.sql(sql.load_sql("previous_split"), params={
            "partitions": partitions, "unchanged_sections": list(unchanged_sections)}),
        storage.open_storage(work_uri), PREVIOUS_FOLDER, DIFF_PARTITION_COLUMN)
    rows: dict[int, int] = {}
    if files:  # the counts from the files' footers: no row is read again
        register_parquet(con, "previous_split", [u for f in files.values() for u in f])
        rows = {int(p): int(n) for p, n in con.sql(
            f"SELECT {DIFF_PARTITION_COLUMN}, count(*) FROM previous_split GROUP BY ALL"
        ).fetchall()}
    log.info("diff: the snapshot's %d rows cut by %d partitions (%.1f s)", sum(rows.values()),
             partitions, time.monotonic() - started)
    return ([files.get(str(p), []) for p in range(partitions)],
            [rows.get(p, 0) for p in range(partitions)])


def previous_partition_rows(snapshot_uri: str | None, partitions: int,
                            con: duckdb.DuckDBPyConnection | None = None,
                            unchanged_sections: Sequence[str] = ()) -> list[int]:
    """How many snapshot rows each diff partition holds (sql/previous_partition_rows.sql),
    but those of `unchanged_sections`: one scan of the snapshot's URLs; all zero without a
    snapshot."""
    if not snapshot_uri:
        return [0] * partitions
    con = con or sql.connect()
    register_snapshot(con, snapshot_uri, name="previous_all")
    rows = dict(con.sql(sql.load_sql("previous_partition_rows"), params={
        "partitions": partitions, "unchanged_sections": list(unchanged_sections)}).fetchall())
    return [int(rows.get(p, 0)) for p in range(partitions)]


def diff_relation(con: duckdb.DuckDBPyConnection, valid: ValidRows, snapshot_uri: str | None,
                  run_time: datetime, with_news: bool = True, partition: int = 0,
                  partitions: int = 1, previous_files: Sequence[str] | None = None,
                  unchanged_sections: Sequence[str] = ()) -> duckdb.DuckDBPyRelation:
    """The diffed rows of one partition (sql/diff_rows.sql) as a relation, not yet run."""
    register_partition(con, valid, snapshot_uri, partition, partitions, previous_files,
                       unchanged_sections)
    return diff_rows(con, run_time, with_news)


def diff(valid: ValidRows, snapshot_uri: str | None, run_time: datetime, work_uri: str, *,
         with_news: bool = True, con: duckdb.DuckDBPyConnection | None = None,
         partition: int = 0, partitions: int = 1, previous_rows: int | None = None,
         previous_files: Sequence[str] | None = None,
         unchanged_sections: Sequence[str] = (),
         section_stats: Sequence[Sequence[Any]] | None = None) -> DiffResult:
    """Diff one partition of the valid rows against the same partition of the snapshot.

    Writes `diffed/part-NNNNN.parquet` (a first run in forced partitions:
    `diffed/part-NNNNN/bucket=K/*.parquet`, pipeline.diffed; in one partition, whose rows
    load wrote in buckets: nothing, `_first_run_view`) and `changes/part-NNNNN.parquet`
    (NNNNN: the partition; a first run: none) and returns that partition's counts;
    `combine` adds partitions up.
    `previous_rows`: the partition's snapshot rows (previous_partition_rows), if known.
    `previous_files`: the partition's snapshot rows as split_snapshot cut them, if it did.
    `unchanged_sections`: sections left out on both sides (pipeline.unchanged: their rows
    are all unchanged, counted by the caller).
    `section_stats`: a first run's rows by section as load counted them
    (pipeline.load.first_run_sections), which `_first_run_view` takes where it can.
    """
    started = time.monotonic()
    con = con or sql.connect()
    if snapshot_uri is None and partitions == 1 and bucketed(valid.normalized_uris):
        return _first_run_view(con, valid, run_time, with_news, started, section_stats)
    work = storage.open_storage(work_uri)
    # Streamed straight to Parquet: the diffed rows are never all held in memory. The join
    # builds its hash table on the narrow snapshot side (diff_rows' `prev`), as written:
    # DuckDB's estimate of the filtered valid rows is too small and it would build on them,
    # every wide row, and spill gigabytes at 10M.
    con.execute("SET disabled_optimizers = 'join_order,build_side_probe_side'")
    try:
        rel = diff_relation(con, valid, snapshot_uri, run_time, with_news, partition, partitions,
                            previous_files, unchanged_sections)
        # The columns of one value left out (register_diffed puts them back)
        left_out = {*plain_omitted(valid.constant_columns, with_news),
                    *(FIRST_RUN_OMITTED if snapshot_uri is None else ())}
        # The changefreq written from an ENUM's codes (a cheaper write); not
        # in diff_rows, whose first-run rows plan hashes as text (line_hash)
        rel = rel.project(", ".join(
            f"changefreq::{CHANGEFREQ_ENUM} AS changefreq" if c == "changefreq" else c
            for c in rel.columns if c not in left_out))
        if snapshot_uri is None:  # a first run: in buckets of sections
            folder = diffed_key(partition).removesuffix(".parquet")
            buckets = write_partitioned(
                con, rel.project(f"*, hash(section) % {DIFFED_BUCKETS} AS {BUCKET}"), work,
                folder, BUCKET)
            diffed_uris = [u for b in sorted(buckets, key=int) for u in buckets[b]]
            if not diffed_uris:  # no row in this partition: one empty file, in a bucket too
                # (read with the other partitions' parts, whose Hive folders it must match)
                diffed_uris = [write_parquet(rel, work, f"{folder}/{BUCKET}=0/data_0.parquet")]
        else:  # an incremental run: one file
            diffed_uris = [write_parquet(rel, work, diffed_key(partition))]
    finally:
        con.execute("RESET disabled_optimizers")
    register_diffed(con, "diffed", diffed_uris)
    changes_uris: list[str] = []
    if snapshot_uri is None:
        # A first run adds every row it publishes: the state step writes those changes
        # from the planned rows, in the pass that writes the snapshot from them
        # (pipeline.snapshot), instead of a scan and a write of every row here.
        con.sql(NO_CHANGES).create_view("changes", replace=True)
    else:
        changes = con.sql(sql.load_sql("changed_rows"))
        # Each snapshot row matches at most one diffed row (URLs are unique on both sides):
        # when as many matched as the partition holds, none is removed and the anti-join is
        # skipped.
        matched = int(sql.scalar(con, "SELECT count(*) FROM diffed WHERE status <> 'added'"))
        if previous_rows is None or matched != previous_rows:
            changes = changes.union(con.sql(sql.load_sql("removed_rows")))
        changes_uris.append(write_parquet(changes, work, changes_key(partition)))
        register_parquet(con, "changes", changes_uris)
    counts: dict[str, Any] = {
        k: int(v) for k, v in sql.first_row(con, sql.load_sql("diff_counts")).items()}
    result = DiffResult(**counts, diffed_uris=diffed_uris, changes_uris=changes_uris,
                        seconds=time.monotonic() - started)
    where = f"partition {partition + 1}/{partitions}: " if partitions > 1 else ""
    log.debug("diff: %s%d added, %d changed, %d unchanged, %d removed, %d future lastmods "
              "clamped (%.1f s)", where, result.added, result.changed, result.unchanged,
              result.removed, result.lastmod_clamped, result.seconds)
    return result


def _first_run_view(con: duckdb.DuckDBPyConnection, valid: ValidRows, run_time: datetime,
                    with_news: bool, started: float,
                    section_stats: Sequence[Sequence[Any]] | None = None) -> DiffResult:
    """A first run whose valid rows load wrote in buckets: no row is written (DiffedView);
    the counts and each section's stats are load's (`section_stats`), else those of one
    pass over the diff's query."""
    view = DiffedView(valid=asdict(valid), run_time=run_time.isoformat(), with_news=with_news,
                      section_buckets={}, section_stats=[])
    # The query's views (load's rows, their section slugs) serve section_buckets too.
    first_run_rows(con, view, valid.normalized_uris).create_view("diffed", replace=True)
    buckets = dict(con.sql(sql.load_sql("section_buckets"),
                           params={"buckets": DIFFED_BUCKETS}).fetchall())
    if with_news:  # news rows move to their section from any bucket: it reads every file
        buckets.pop(NEWS_SECTION, None)
    sections = first_run_stats(section_stats, run_time,
                               news="is_news" not in plain_omitted(valid.constant_columns,
                                                                   with_news))
    if sections is None:
        sections = con.sql(sql.load_sql("first_run_sections")).fetchall()
    view = replace(view, section_buckets=buckets,
                   section_stats=[list(r[:4]) for r in sections])
    result = DiffResult(
        added=sum(r[1] for r in sections), changed=0, unchanged=0, removed=0,
        lastmod_clamped=sum(r[4] for r in sections), news_articles=sum(r[5] for r in sections),
        diffed_uris=list(valid.normalized_uris), view=asdict(view),
        seconds=time.monotonic() - started)
    log.debug("diff: %d added (a first run: no row written), %d future lastmods clamped (%.1f s)",
              result.added, result.lastmod_clamped, result.seconds)
    return result


def first_run_stats(section_stats: Sequence[Sequence[Any]] | None, run_time: datetime, *,
                    news: bool) -> list[tuple[Any, ...]] | None:
    """sql/first_run_sections.sql's rows from load's counts by section
    (pipeline.load.first_run_sections): the same numbers without a pass over every row,
    where they are all known: no row may be a news article (which moves to
    the news section) and no lastmod is after the run's time (none is clamped). Else None."""
    if section_stats is None or news:
        return None
    if any(newest is not None and datetime.fromisoformat(newest) > run_time
           for *_, newest in section_stats):
        return None
    return [(section, urls, lo, hi, 0, 0) for section, urls, lo, hi, _ in section_stats]


def combine(results: Sequence[DiffResult]) -> DiffResult:
    """The partitions' results as one: counts and seconds summed, parts in the given order."""
    return DiffResult(
        **{k: sum(getattr(r, k) for r in results) for k in _COUNTS},
        diffed_uris=[u for r in results for u in r.diffed_uris],
        changes_uris=[u for r in results for u in r.changes_uris],
        seconds=sum(r.seconds for r in results),
        view=next((r.view for r in results if r.view is not None), None))
