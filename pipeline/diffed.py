"""The diffed rows: what the diff writes (`diffed/part-NNNNN.parquet`) and plan and the
snapshot read, each through `register_diffed`.

A first run's parts leave out the columns that hold one value there (FIRST_RUN_OMITTED),
and any run's those that hold one value for its inventory (PLAIN_OMITTED: no news, no
extension XML); `register_diffed` puts them back, so every reader sees DIFFED_COLUMNS. The
parts say which they are: a first run's have no `status`. A first run also writes its rows
in buckets of sections (Hive folders `bucket=K`, K = hash(section) % DIFFED_BUCKETS): a plan
slice reads the files of its sections' buckets only (`files_of_sections`), so no slice scans
every row and none of them need to be split by slice first.

A first run in one diff partition writes no diffed rows at all (`DiffedView`): load wrote
its rows in buckets of their sections' path segments, and each reader runs the diff's
query (`first_run_rows`) over the buckets it needs. Against a live snapshot
every row is joined, so an incremental run writes them once, for plan and the snapshot.

It also holds what the diff's query reads of load (`ValidRows`, `register_valid`), so that
a reader runs that query over a first run's rows without importing the load or diff stage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from pipeline import sql
from pipeline.errors import InternalError
from pipeline.extensions import NEWS_MAX_AGE_DAYS, NEWS_SECTION, NO_EXTENSION_XML, NO_NEWS
from pipeline.layout import DIFF_PARTITION_COLUMN
from pipeline.parquet import register_parquet

#: The columns of sql/diff_rows.sql, in its order: the diffed rows as every reader sees them.
DIFFED_COLUMNS = ("url", "section", "ext", "is_news", "changefreq", "priority", "fingerprint",
                  "status", "lastmod_clamped", "lastmod", "first_seen", "last_changed",
                  "prev_shard")
#: The columns a first run's diffed parts leave out, and the value each has there (writing
#: these constants was a sixth of the write).
FIRST_RUN_OMITTED = {
    "status": "'added'",
    "last_changed": "first_seen",  # changed last when first seen: the run's time
    "prev_shard": "NULL::INTEGER",
}
#: The columns any run's diffed parts leave out when the inventory gives them one value
#: (`plain_omitted`), and that value: no news, and no extension XML either.
PLAIN_OMITTED = {"is_news": "false", "ext": "''"}


#: Buckets of sections a first run's diffed rows are written in (one file each, at most).
DIFFED_BUCKETS = 64
#: The Hive partition column of those buckets (not one of DIFFED_COLUMNS).
BUCKET = "bucket"


@dataclass(frozen=True)
class DiffedView:
    """A first run's diffed rows, not written: the diff's query (diff_rows, against no
    snapshot) over load's valid rows, which load wrote in buckets (`bucket=K`, K =
    hash(raw_section) % DIFFED_BUCKETS: the path segments a section is named from).

    The diff takes its counts and `section_stats` from load's, or from one pass over them
    (pipeline.diff.first_run_stats); plan reads each slice's buckets through the query, so
    a first run writes its rows once instead of twice.
    """

    #: load's ValidRows, as load.json holds it; `register_diffed` reads the files it is
    #: given, all of these or some.
    valid: Mapping[str, Any]
    #: The run's time (ISO 8601) and whether its sitemaps have news (the query's parameters).
    run_time: str
    with_news: bool
    #: The buckets that hold each section's rows. The news section is in none (its rows
    #: come from any bucket): every file is read for a section not named here.
    section_buckets: Mapping[str, Sequence[int]]
    #: Each section's rows and smallest and largest URL (section, urls, min_url, max_url),
    #: in section order: prepare's section counts and a first run's new_section_stats.
    section_stats: Sequence[Sequence[Any]]

    @classmethod
    def from_json(cls, view: Mapping[str, Any] | None) -> DiffedView | None:
        return None if view is None else cls(**view)


def plain_omitted(constant_columns: Sequence[str], with_news: bool) -> tuple[str, ...]:
    """The PLAIN_OMITTED columns that hold their one value in every diffed row, from the
    columns load found constant (ValidRows.constant_columns): is_news when no row can have
    a news element (none asked for, or no news), ext when, besides, no row has extension
    XML (pipeline.extensions' constants)."""
    if with_news and NO_NEWS not in constant_columns:
        return ()
    return ("is_news", "ext") if NO_EXTENSION_XML in constant_columns else ("is_news",)


def bucketed(uris: Sequence[str]) -> bool:
    """The diffed parts (or a first run's view's files) are in buckets of sections."""
    return any(f"/{BUCKET}=" in u for u in uris)


def files_of_sections(con: duckdb.DuckDBPyConnection, uris: Sequence[str],
                      sections: Sequence[str], view: DiffedView | None = None) -> list[str]:
    """The diffed files that can hold rows of `sections`: those of the sections' buckets
    when the parts are bucketed (none when no such bucket was written), else all."""
    if not bucketed(uris):
        return list(uris)
    if view is not None:
        if any(s not in view.section_buckets for s in sections):
            return list(uris)
        wanted = {f"/{BUCKET}={b}/" for s in sections for b in view.section_buckets[s]}
    else:
        wanted = {f"/{BUCKET}={b}/" for (b,) in con.sql(
            f"SELECT DISTINCT hash(s) % {DIFFED_BUCKETS} FROM unnest($sections::VARCHAR[]) t(s)",
            params={"sections": list(sections)}).fetchall()}
    return [u for u in uris if any(w in u for w in wanted)]


def register_diffed(con: duckdb.DuckDBPyConnection, name: str, uris: Sequence[str],
                    view: DiffedView | None = None) -> None:
    """The view `name`: the diffed parts at `uris` with DIFFED_COLUMNS, those a first run
    left out (FIRST_RUN_OMITTED) and those of the inventory's one value (PLAIN_OMITTED) put
    back. The parts say which they are: a first run's have no `status`. With `view`, `uris`
    are load's files of a first run's rows (some or all): the diff's query over them."""
    if view is not None:
        first_run_rows(con, view, uris).create_view(name, replace=True)
        return
    register_parquet(con, f"{name}_parts", list(uris))
    columns = con.sql(f"SELECT * FROM {name}_parts").columns
    if all(c in columns for c in DIFFED_COLUMNS):
        con.sql(f"SELECT * FROM {name}_parts").create_view(name, replace=True)
        return
    fills = {**({} if "status" in columns else FIRST_RUN_OMITTED), **PLAIN_OMITTED}
    missing = [c for c in DIFFED_COLUMNS if c not in columns and c not in fills]
    if missing:
        raise InternalError(f"the diffed parts have no {', '.join(missing)}")
    con.sql("SELECT " + ", ".join(c if c in columns else f"{fills[c]} AS {c}"
                                  for c in DIFFED_COLUMNS)
            + f" FROM {name}_parts").create_view(name, replace=True)


#: A column expression that is one literal for every row: `NULL::TYPE`, false, 0 or ''.
CONSTANT_COLUMN = re.compile(r"(NULL::[A-Z]+|false|0|'') AS (\w+)")


#: The snapshot's view with no rows (a first run's previous_rows; pipeline.snapshot).
EMPTY_SNAPSHOT = (
    "SELECT NULL::VARCHAR AS url, NULL::VARCHAR AS section, NULL::INTEGER AS shard, "
    "NULL::UBIGINT AS fingerprint, NULL::TIMESTAMPTZ AS lastmod, "
    "NULL::TIMESTAMPTZ AS first_seen, NULL::TIMESTAMPTZ AS last_changed, "
    "NULL::VARCHAR AS legacy_fingerprint WHERE false"
)


@dataclass(frozen=True)
class ValidRows:
    """Where the valid rows are and how their sections are cut: `register_valid` reads it."""

    #: The normalised rows' files: one, or those of each diff partition (`split`).
    normalized_uris: tuple[str, ...]
    duplicates_uri: str
    site_prefix: str
    section_depth: int = 1
    #: The normalised columns that are one constant for this inventory (e.g. the drop counts
    #: of an extension it does not have), as `<literal> AS <name>`: not written, put back by
    #: `register_normalized`.
    constant_columns: tuple[str, ...] = ()
    #: The diff partitions the files are cut by (DIFF_PARTITION_COLUMN: url_hash % split);
    #: 1: not cut.
    split: int = 1
    #: A first run's sample of these rows' URLs by section, one in `sample_every`
    #: (pipeline.load.LoadResult.sample_uri), from which plan cuts large sections; "": none.
    sample_uri: str = ""
    sample_every: int = 0

    def normalized_files(self, partition: int, partitions: int) -> list[str]:
        """The files that hold the valid rows of diff partition `partition` of `partitions`:
        its own when the rows were cut by as many partitions, else all of them. A partition
        that got no row (a few URLs in many partitions) has no file: then one file of
        another, for its columns, of which the diff's filter (current_partition) keeps no
        row."""
        if self.split != partitions or self.split == 1:
            return list(self.normalized_uris)
        own = f"/{DIFF_PARTITION_COLUMN}={partition}/"
        return [u for u in self.normalized_uris if own in u] or list(self.normalized_uris[:1])

    @classmethod
    def from_json(cls, valid: dict[str, Any]) -> ValidRows:
        """From load.json's `valid` (lists for tuples); one of a run begun before the rows
        could be cut names its one file `normalized_uri`."""
        fields = dict(valid)
        if "normalized_uri" in fields:
            fields["normalized_uris"] = [fields.pop("normalized_uri")]
        return cls(**{**fields, "normalized_uris": tuple(fields["normalized_uris"]),
                      "constant_columns": tuple(fields.get("constant_columns", ()))})


def register_normalized(con: duckdb.DuckDBPyConnection, uris: str | Sequence[str],
                        constants: tuple[str, ...] = (), name: str = "normalized") -> None:
    """The view `name` (`normalized`): what load wrote (one file, or some or all of the
    files of its diff partitions or buckets), with its constant columns put back, and the
    same columns whichever files it reads. They are read from load.json by later steps:
    anything but a literal is refused, never run."""
    odd = [c for c in constants if not CONSTANT_COLUMN.fullmatch(c)]
    if odd:
        raise InternalError(f"load's constant columns hold {odd[0]!r}, not a literal")
    register_parquet(con, f"{name}_file", [uris] if isinstance(uris, str) else list(uris))
    rel = con.sql(f"SELECT * FROM {name}_file")
    cut_by = [c for c in (DIFF_PARTITION_COLUMN, BUCKET) if c in rel.columns]  # Hive folders
    hive = f" EXCLUDE ({', '.join(cut_by)})" if cut_by else ""
    con.sql(f"SELECT *{hive}" + "".join(f", {c}" for c in constants) + f" FROM {name}_file"
            ).create_view(name, replace=True)


def register_valid(con: duckdb.DuckDBPyConnection, name: str, valid: ValidRows,
                   files: Sequence[str] | None = None) -> None:
    """The view `name`: the rows to publish, with their section (sql/valid_rows.sql), from
    what load wrote (`files`: some of its files, ValidRows.normalized_files; default all)."""
    register_normalized(con, valid.normalized_uris if files is None else files,
                        valid.constant_columns)
    register_parquet(con, "duplicate_rows", [valid.duplicates_uri])
    con.execute(sql.load_sql("classified_rows"))
    con.sql("SELECT raw_section FROM normalized WHERE reason IS NULL"
            ).create_view("section_names", replace=True)
    con.execute(sql.load_sql("section_slugs"))
    con.sql(sql.load_sql("valid_rows")).create_view(name, replace=True)


def diff_rows(con: duckdb.DuckDBPyConnection, run_time: datetime, with_news: bool
              ) -> duckdb.DuckDBPyRelation:
    """sql/diff_rows.sql over the views `current_rows` and `previous_rows`, not yet run."""
    return con.sql(sql.load_sql("diff_rows"), params={
        "run_time": run_time, "news_section": NEWS_SECTION,
        "news_max_age_days": NEWS_MAX_AGE_DAYS, "with_news": with_news})


def first_run_rows(con: duckdb.DuckDBPyConnection, view: DiffedView, files: Sequence[str]
                   ) -> duckdb.DuckDBPyRelation:
    """A first run's diffed rows in `files` (some or all of load's, DiffedView): the diff's
    query against no snapshot, with DIFFED_COLUMNS, those that hold one value here as that
    value."""
    valid = ValidRows.from_json({**view.valid, "normalized_uris": list(files)})
    register_valid(con, "current_rows", valid)
    con.sql(EMPTY_SNAPSHOT).create_view("previous_rows", replace=True)
    rel = diff_rows(con, datetime.fromisoformat(view.run_time), view.with_news)
    return rel.project(", ".join(f"{FIRST_RUN_OMITTED[c]} AS {c}" if c in FIRST_RUN_OMITTED
                                 else c for c in DIFFED_COLUMNS))
