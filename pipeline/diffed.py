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
query (pipeline.diff.first_run_rows) over the buckets it needs. Against a live snapshot
every row is joined, so an incremental run writes them once, for plan and the snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from pipeline.errors import InternalError
from pipeline.extensions import NO_EXTENSION_XML, NO_NEWS
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
        from pipeline.diff import first_run_rows  # the diff's query: diff imports this module

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
