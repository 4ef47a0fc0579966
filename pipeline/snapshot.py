"""The generation's snapshot: what the next run's diff and plan need of this one.

One row per published URL (SNAPSHOT_COLUMNS), with its final shard number. It is
written from two sources, streamed into one Parquet file: the planned parts (each
shard's rows are a run of consecutive rows of its part, so the shard numbers are
the shards' numbers repeated over their row ranges; nothing is joined), and, for the
shards kept as they are published (whose rows are in no part), the diffed rows
that the plan assigned to them (sql/reused_rows.sql). The next run reads it back with
`register_snapshot`.

Its footer also holds each shard's bounds (SHARD_BOUNDS_KEY: the section, shard, smallest
and largest URL and URL count that sql/previous_shard_bounds.sql would find in its rows),
taken while it is written: the next run's plan reads them there (`shard_bounds`) instead of
scanning every row. A snapshot without them (an earlier version's) is
scanned.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import integrity, sql, storage
from pipeline.diffed import EMPTY_SNAPSHOT, DiffedView, register_diffed
from pipeline.extensions import NAMESPACE_MARKERS
from pipeline.layout import (
    CHANGES_KEY,
    DIFF_PARTITION_COLUMN,
    REJECTS_KEY,
    SNAPSHOT_KEY,
    generation_key,
)
from pipeline.parquet import open_parquet, read_table, register_parquet, write_parquet
from pipeline.shards import Shard
from pipeline.w3c import format_w3c

#: The snapshot's columns: what the next run needs of this one.
SNAPSHOT_COLUMNS = ("url", "section", "shard", "fingerprint", "lastmod", "first_seen",
                    "last_changed")
#: The snapshot's columns and types.
SNAPSHOT_SCHEMA = pa.schema([
    ("url", pa.string()), ("section", pa.string()), ("shard", pa.int32()),
    ("fingerprint", pa.uint64()), ("lastmod", pa.timestamp("us", tz="UTC")),
    ("first_seen", pa.timestamp("us", tz="UTC")), ("last_changed", pa.timestamp("us", tz="UTC")),
])
assert tuple(SNAPSHOT_SCHEMA.names) == SNAPSHOT_COLUMNS
#: The changes' columns and types, as sql/changed_rows.sql gives them.
CHANGES_SCHEMA = pa.schema([
    ("url", pa.string()), ("change", pa.string()), ("lastmod", pa.timestamp("us", tz="UTC")),
])
#: The columns read of a planned part: the shard's number and section come from the plan.
_PART_COLUMNS = [c for c in SNAPSHOT_COLUMNS if c not in ("shard", "section")]
#: What the writers are given: the snapshot's section and the changes' change as codes of a
#: dictionary (the same one for every batch), which pyarrow's writer takes as they are
#: instead of hashing every value into its dictionary again. The files are the same: a
#: string column, dictionary-encoded. No Arrow schema is stored, so that pyarrow reads them
#: back as strings too.
_SNAPSHOT_CODED = SNAPSHOT_SCHEMA.set(
    SNAPSHOT_SCHEMA.get_field_index("section"),
    pa.field("section", pa.dictionary(pa.int32(), pa.string())))
_CHANGES_CODED = CHANGES_SCHEMA.set(
    CHANGES_SCHEMA.get_field_index("change"),
    pa.field("change", pa.dictionary(pa.int8(), pa.string())))
_ADDED = pa.array(["added"], pa.string())

#: The footer key of the shards' bounds: JSON rows [section, shard, lower, upper, urls].
SHARD_BOUNDS_KEY = "sitemaps.shard_bounds"
#: The bounds' columns and types, as sql/previous_shard_bounds.sql gives them.
SHARD_BOUNDS_SCHEMA = pa.schema([
    ("section", pa.string()), ("shard", pa.int32()), ("lower", pa.string()),
    ("upper", pa.string()), ("urls", pa.int64()),
])
#: The footer key of the report's freshness (`Freshness`): JSON {"at": the generation's
#: time, "sections": [[section, urls, newest lastmod, changed in 24 h, changed in 7 days]]}.
FRESHNESS_KEY = "sitemaps.freshness"


def register_snapshot(con: duckdb.DuckDBPyConnection,
                      snapshot_uri: str | Sequence[str] | None,
                      name: str = "previous_rows") -> None:
    """The view `name` (default `previous_rows`): the snapshot at `snapshot_uri` (or the
    files of its rows cut by diff partition, pipeline.diff.split_snapshot), or an empty one
    (also for no files). Its `fingerprint` is a 64-bit hash; a snapshot of an earlier
    version holds md5 hex strings instead, which the view gives as `legacy_fingerprint`
    (diff_rows)."""
    if not snapshot_uri:
        con.sql(EMPTY_SNAPSHOT).create_view(name, replace=True)
        return
    register_parquet(con, f"{name}_file",
                     [snapshot_uri] if isinstance(snapshot_uri, str) else list(snapshot_uri))
    rel = con.sql(f"SELECT * FROM {name}_file")
    types = {c: str(t).upper() for c, t in zip(rel.columns, rel.types, strict=True)}
    left_out = [DIFF_PARTITION_COLUMN] if DIFF_PARTITION_COLUMN in types else []
    if types.get("fingerprint") == "VARCHAR":
        left_out.append("fingerprint")
        added = "NULL::UBIGINT AS fingerprint, fingerprint AS legacy_fingerprint"
    else:
        added = "NULL::VARCHAR AS legacy_fingerprint"
    star = f"* EXCLUDE ({', '.join(left_out)})" if left_out else "*"
    rel = con.sql(f"SELECT {star}, {added} FROM {name}_file")
    rel.create_view(name, replace=True)


def register_assigned(con: duckdb.DuckDBPyConnection, output_format: str) -> None:
    """The view `assigned` (sql/assigned_rows.sql) over the views `diffed` and `shard_bounds`."""
    con.sql(sql.load_sql("assigned_rows"), params={
        "format": output_format, "ns_markers": NAMESPACE_MARKERS}).create_view(
        "assigned", replace=True)


def write_snapshot(store: storage.Storage, key: str, *, planned_uris: Sequence[str],
                   shards: Sequence[Shard], diffed_uris: Sequence[str], bounds_uri: str,
                   output_format: str, added_key: str | None = None,
                   diffed_view: DiffedView | None = None,
                   previous_uri: str | None = None, unchanged_sections: Sequence[str] = (),
                   created: datetime | None = None) -> dict[str, Any]:
    """Write the snapshot to `key` of `store` (LZ4_RAW); returns its size, sha256 and rows
    (`integrity.describe`), taken from the local file before its upload.

    `created`: the generation's time; the footer then holds the report's freshness
    (FRESHNESS_KEY), summed while the rows go by, so that the report reads a footer, not
    every row's section and lastmod.

    `unchanged_sections`: sections the run left out as unchanged (pipeline.unchanged),
    whose rows are taken as they are from the live snapshot at `previous_uri`.

    `added_key`: also write every row, as added, to this key of `store` as the changes
    (CHANGES_SCHEMA): a first run's, which the diff left to this pass over the rows.

    LZ4 rather than zstd, though the file is kept: a third faster to write on the one core
    pyarrow's writer uses, and faster to read for each of the next run's scans of it (the
    check, the partition counts, the diff), for a file a quarter larger. Its footer holds
    the shards' bounds (SHARD_BOUNDS_KEY)."""
    bounds: list[list[Any]] = []
    # Dictionary encoding only for the section: the other columns are nearly unique, and
    # trying a dictionary on them made the file slower to write (a third) and larger.
    # Values encoded 65,536 at a time (not 1,024) into version 2 data pages: a fifth faster
    # to write, the same bytes, and DuckDB scans them as fast.
    # No statistics of the URLs (each row group's smallest and largest): no reader filters
    # the snapshot or the changes by URL range, and comparing every URL costs a tenth of
    # the write.
    sections = sorted({s.section for s in shards})
    section_code = {section: i for i, section in enumerate(sections)}
    section_dictionary = pa.array(sections, pa.string())
    fresh = None if created is None else Freshness(sections, created)
    with store.local_output(key) as path:
        with pq.ParquetWriter(
                str(path), _SNAPSHOT_CODED, compression="lz4_raw", use_dictionary=["section"],
                write_statistics=_but_url(SNAPSHOT_SCHEMA), write_batch_size=65_536,
                data_page_version="2.0", store_schema=False) as snapshot_writer, \
                contextlib.ExitStack() as stack:
            added = None if added_key is None else stack.enter_context(pq.ParquetWriter(
                str(stack.enter_context(store.local_output(added_key))), _CHANGES_CODED,
                compression="lz4_raw", use_dictionary=["change"],
                write_statistics=_but_url(CHANGES_SCHEMA), write_batch_size=65_536,
                data_page_version="2.0", store_schema=False))

            def write(batch: pa.RecordBatch, shard: pa.Array, section: pa.Array) -> None:
                snapshot_writer.write_batch(_conform(
                    batch, shard, pa.DictionaryArray.from_arrays(section, section_dictionary)))
                if fresh is not None:
                    fresh.take(section, batch.column("lastmod"))
                if added is not None:
                    added.write_batch(pa.RecordBatch.from_arrays(
                        [batch.column("url").cast(pa.string()),
                         pa.DictionaryArray.from_arrays(
                             pa.array(np.zeros(batch.num_rows, np.int8)), _ADDED),
                         batch.column("lastmod").cast(CHANGES_SCHEMA.field("lastmod").type)],
                        schema=_CHANGES_CODED))

            for part, uri in enumerate(planned_uris):
                in_part = sorted((s for s in shards if s.part == part), key=lambda s: s.row_start or 0)
                counts = [s.urls for s in in_part]
                numbers = np.repeat(np.array([s.shard for s in in_part], dtype=np.int32), counts)
                codes = np.repeat(np.array([section_code[s.section] for s in in_part],
                                           dtype=np.int32), counts)
                # A shard's rows are in URL order: its bounds are its first and last row's URL.
                ends = _EndUrls([i for s in in_part for i in (s.row_start or 0,
                                                               (s.row_start or 0) + s.urls - 1)])
                offset = 0
                for batch in open_parquet(uri).iter_batches(columns=_PART_COLUMNS):
                    rows_of_batch = slice(offset, offset + batch.num_rows)
                    ends.take(batch.column("url"), offset)
                    offset += batch.num_rows
                    write(batch, pa.array(numbers[rows_of_batch], pa.int32()),
                          pa.array(codes[rows_of_batch], pa.int32()))
                bounds += [[s.section, s.shard, lower, upper, s.urls] for s, lower, upper in zip(
                    in_part, ends.urls[0::2], ends.urls[1::2], strict=True)]
            reused = [s for s in shards if s.reused]
            kept = _reused_bounds(bounds_uri, reused)
            if kept is not None:  # else no bounds: the next run scans the rows for them
                snapshot_writer.add_key_value_metadata(
                    {SHARD_BOUNDS_KEY: json.dumps(sorted(bounds + kept))})
            if reused:
                con = sql.connect()
                register_diffed(con, "diffed", diffed_uris, diffed_view)
                register_parquet(con, "shard_bounds", [bounds_uri])
                register_assigned(con, output_format)
                con.register("reused_shards", pa.table({
                    "section": pa.array([s.section for s in reused], pa.string()),
                    "shard": pa.array([s.shard for s in reused], pa.int32()),
                    "section_code": pa.array([section_code[s.section] for s in reused],
                                             pa.int32())}))
                for batch in con.sql(sql.load_sql("reused_rows")).to_arrow_reader(65_536):
                    write(batch, batch.column("shard"), batch.column("section_code"))
            if unchanged_sections:
                con = sql.connect()
                register_snapshot(con, previous_uri)
                con.register("kept_sections", pa.table({
                    "section": pa.array(list(unchanged_sections), pa.string()),
                    "section_code": pa.array([section_code[s] for s in unchanged_sections],
                                             pa.int32())}))
                for batch in con.sql(sql.load_sql("kept_section_rows")).to_arrow_reader(65_536):
                    write(batch, batch.column("shard"), batch.column("section_code"))
            if fresh is not None:  # the footer is written at close: after every row
                snapshot_writer.add_key_value_metadata(
                    {FRESHNESS_KEY: json.dumps(fresh.to_json())})
        # Hashed here, before the upload: the state step then downloads nothing to hash it.
        described = integrity.describe_file(path)
    return described


def _but_url(schema: pa.Schema) -> list[str]:
    """The columns of a state file whose statistics are written: all but the URL."""
    return [name for name in schema.names if name != "url"]


class _EndUrls:
    """The URLs at given row numbers of a part (ascending), taken batch by batch."""

    def __init__(self, rows: Sequence[int]) -> None:
        self.rows = np.asarray(rows, dtype=np.int64)
        self.urls: list[str] = []

    def take(self, urls: pa.Array, offset: int) -> None:
        """Those of the rows that `urls` holds (the part's rows from `offset` on)."""
        lo, hi = np.searchsorted(self.rows, [offset, offset + len(urls)])
        self.urls += urls.take(pa.array(self.rows[lo:hi] - offset)).to_pylist()


def _reused_bounds(bounds_uri: str, reused: Sequence[Shard]) -> list[list[Any]] | None:
    """The bounds of the shards kept as they were: the same rows, so the live shard's as
    plan read them (`bounds_uri`); None if one is not there."""
    if not reused:
        return []
    table = read_table(bounds_uri, SHARD_BOUNDS_SCHEMA.names)
    live = {(r["section"], r["shard"]): [r["lower"], r["upper"], r["urls"]]
            for r in table.to_pylist()}
    if any((s.section, s.shard) not in live for s in reused):
        return None
    return [[s.section, s.shard, *live[(s.section, s.shard)]] for s in reused]


class Freshness:
    """Per section of a snapshot: its URLs, newest lastmod, and URLs whose lastmod is within
    24 hours and 7 days before `created` (the generation's time), as
    sql/report_freshness.sql counts them, summed batch by batch while the rows are written.
    A row without lastmod counts as a URL only."""

    def __init__(self, sections: Sequence[str], created: datetime) -> None:
        self.sections = list(sections)
        self.created = created
        n = len(self.sections)
        self.urls, self.day, self.week = (np.zeros(n, np.int64) for _ in range(3))
        self.newest = np.full(n, _NO_LASTMOD, np.int64)
        self.day_after, self.week_after = (_micros(created - timedelta(days=days))
                                           for days in (1, 7))

    def take(self, codes: pa.Array, lastmod: pa.Array) -> None:
        """The rows of one batch: their section codes and lastmods."""
        n = len(self.sections)
        code = codes.to_numpy(zero_copy_only=False)
        micros = pc.fill_null(lastmod.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()),
                              _NO_LASTMOD).to_numpy(zero_copy_only=False)
        self.urls += np.bincount(code, minlength=n)
        np.maximum.at(self.newest, code, micros)
        self.day += np.bincount(code[micros > self.day_after], minlength=n)
        self.week += np.bincount(code[micros > self.week_after], minlength=n)

    def to_json(self) -> dict[str, Any]:
        return {"at": format_w3c(self.created), "sections": [
            [section, int(urls), "" if newest == _NO_LASTMOD else format_w3c(
                _EPOCH + timedelta(microseconds=int(newest))), int(day), int(week)]
            for section, urls, newest, day, week in zip(
                self.sections, self.urls, self.newest, self.day, self.week, strict=True)
            if urls]}


#: The newest lastmod of a section none of whose rows has one (and a null's value).
_NO_LASTMOD = np.iinfo(np.int64).min
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1)


def freshness_of(snapshot_uri: str, created: str) -> list[list[Any]] | None:
    """The freshness the snapshot's footer holds for the generation time `created` (W3C),
    or None: a snapshot written without it, or for another time."""
    found = (open_parquet(snapshot_uri).metadata.metadata or {}).get(FRESHNESS_KEY.encode())
    if found is None:
        return None
    recorded = json.loads(found)
    return recorded["sections"] if recorded.get("at") == created else None


def shard_bounds(snapshot_uri: str) -> pa.Table | None:
    """The shards' bounds the snapshot's footer holds (SHARD_BOUNDS_SCHEMA), or None for a
    snapshot written without them."""
    found = (open_parquet(snapshot_uri).metadata.metadata or {}).get(SHARD_BOUNDS_KEY.encode())
    if found is None:
        return None
    rows = json.loads(found)
    return pa.table([pa.array([r[i] for r in rows], f.type)
                     for i, f in enumerate(SHARD_BOUNDS_SCHEMA)], schema=SHARD_BOUNDS_SCHEMA)


def _conform(batch: pa.RecordBatch, shard: pa.Array, section: pa.DictionaryArray
             ) -> pa.RecordBatch:
    """The snapshot's columns of `batch` as the writer takes them (_SNAPSHOT_CODED), with the
    rows' shard numbers and section codes."""
    given = {"shard": shard.cast(pa.int32()), "section": section}
    columns = [given[name] if name in given
               else batch.column(name).cast(SNAPSHOT_SCHEMA.field(name).type)
               for name in SNAPSHOT_COLUMNS]
    return pa.RecordBatch.from_arrays(columns, schema=_SNAPSHOT_CODED)


@dataclass(frozen=True)
class StoredState:
    """The generation's state files as stored, and what the manifest records of them."""

    #: URI of each state file: snapshot, rejects, changes.
    files: dict[str, str]
    #: The manifest's `state_check`: the snapshot's size, sha256, rows and version as stored
    #: (integrity.py), so that the next run can tell a truncated or replaced snapshot.
    check: dict[str, Any]


def save_state(*, planned_uris: Sequence[str], shards: Sequence[Shard], diffed_uris: Sequence[str],
               bounds_uri: str, changes_uris: Sequence[str], work_uri: str, state_uri: str,
               generation: str, output_format: str,
               diffed_view: DiffedView | None = None, previous_uri: str | None = None,
               unchanged_sections: Sequence[str] = (), created: datetime | None = None
               ) -> StoredState:
    """Store the generation's snapshot, rejects and changes under the state prefix.

    The changes go to the state as one `changes.parquet`, whatever the number of diff
    partitions (the feed, IndexNow and the manifest's `state.changes` read one file):
    one part is uploaded as it is, several are written together into one file. No part (a
    first run's diff writes none): every row of the snapshot is added, and they are
    written in the pass that writes the snapshot.
    """
    state = storage.open_storage(state_uri)
    work = storage.open_storage(work_uri)
    snapshot_key = generation_key(generation, SNAPSHOT_KEY)
    rejects_key = generation_key(generation, REJECTS_KEY)
    changes = generation_key(generation, CHANGES_KEY)
    described = write_snapshot(state, snapshot_key, planned_uris=planned_uris, shards=shards,
                   diffed_uris=diffed_uris, bounds_uri=bounds_uri, output_format=output_format,
                   added_key=None if changes_uris else changes, diffed_view=diffed_view,
                   previous_uri=previous_uri, unchanged_sections=unchanged_sections,
                   created=created)
    files = {"snapshot": state.uri(snapshot_key)}
    with work.local_path(REJECTS_KEY) as path:
        state.upload_file(path, rejects_key)
    files["rejects"] = state.uri(rejects_key)
    if len(changes_uris) == 1:
        store, key = storage.open_file(changes_uris[0])
        with store.local_path(key) as path:
            state.upload_file(path, changes)
    elif changes_uris:
        con = sql.connect()
        register_parquet(con, "changes_parts", list(changes_uris))
        write_parquet(con.sql("SELECT url, change, lastmod FROM changes_parts"), state, changes,
                      compression="zstd")
    files["changes"] = state.uri(changes)  # none: written with the snapshot
    # The version as stored lets the next run's begin trust the file from a listing
    # (integrity.verify_unless_same).
    version = integrity.version_of(files["snapshot"])
    return StoredState(files, {"snapshot": {**described, **({"version": version}
                                                             if version else {})}})
