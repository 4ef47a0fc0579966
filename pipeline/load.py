"""Stage 1, load: read the inventory, check its schema, normalise and validate rows.

Writes under the run's work prefix `normalized.parquet` (every input row,
normalised, with its reject reason and its URL's hash: streamed, never held in memory;
its columns that are one literal for this inventory are left out, and
`register_normalized` puts them back; when the diff has several hash partitions, cut by
them instead, `normalized/diff_partition=K/*.parquet`, so that each diff partition reads
its own rows only; on a first run in one partition, in buckets of sections,
`normalized/bucket=K/*.parquet`, which plan reads through the diff's query,
pipeline.diffed.DiffedView),
`duplicates.parquet` (the row ids that dedupe_rows ranks as duplicates: small)
and `rejects.parquet` (row_id, reason, the original fields, the reject's detail and a
duplicate's winner: sql/rejected_rows.sql), and returns the
counts. The valid rows are the normalised rows without a reason that are not
duplicates: `register_valid` makes them a view (sql/valid_rows.sql), which the
diff reads, so they are never written twice.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from pipeline import sql, storage, tables
from pipeline.diffed import (
    BUCKET,
    CONSTANT_COLUMN,
    DIFFED_BUCKETS,
    ValidRows,
    register_normalized,
)
from pipeline.errors import InternalError, InventoryError, out_of_space
from pipeline.extensions import extension_columns
from pipeline.layout import (
    DIFF_PARTITION_COLUMN,
    DUPLICATE_PARTS_FOLDER,
    DUPLICATES_KEY,
    NORMALIZED_KEY,
    REJECT_PARTS_FOLDER,
    REJECTS_KEY,
    SAMPLE_PARTS_FOLDER,
    SECTION_SAMPLE_KEY,
)
from pipeline.limits import (
    CHANGEFREQ_ENUM,
    EARLIEST_LASTMOD,
    MAX_URL_LENGTH,
    W3C_DATETIME_REGEX,
)
from pipeline.parquet import (
    ROW_ID,
    open_parquet,
    register_parquet,
    write_parquet,
    write_partitioned,
)
from pipeline.progress import QUIET, Progress
from pipeline.unchanged import ROW_HASH_COLUMN, row_hash_column, sums_by_section
from pipeline.urls import CLEAN_URL_REGEX, IRI_PATH_REGEX, Site, check_url, reject_detail

log = logging.getLogger(__name__)


_STRING = ("VARCHAR",)
_TIMESTAMPS = ("TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "DATE")
_INTEGERS = ("INTEGER", "BIGINT", "SMALLINT", "TINYINT", "HUGEINT", "UTINYINT", "USMALLINT",
             "UINTEGER", "UBIGINT")
_NUMBERS = ("DOUBLE", "FLOAT", "DECIMAL", *_INTEGERS)


@dataclass
class LoadResult:
    """What the load stage wrote and counted."""

    input_rows: int
    valid_rows: int
    rejected: dict[str, int]
    field_issues: dict[str, int]
    #: Every input row normalised, and the row ids of duplicates: see register_valid.
    normalized_uris: tuple[str, ...]
    duplicates_uri: str
    rejects_uri: str
    files: list[str] = field(default_factory=list)
    seconds: float = 0.0
    site_prefix: str = ""
    section_depth: int = 1
    constant_columns: tuple[str, ...] = ()
    #: The diff partitions the normalised rows are cut by (ValidRows.split).
    split: int = 1
    #: The input rows' sums for their identity, as pipeline.unchanged.row_sums gives them
    #: (`row_hashes`); None when not asked, or when rows needed cleaning.
    row_sums: tuple[int, int, int, list[str]] | None = None
    #: Each section's rows (pipeline.unchanged.sums_by_section: section, rows, two sums of
    #: the row hashes, newest lastmod as ISO 8601), with `row_sums`; None without them.
    section_sums: list[tuple[str, int, int, int, str | None]] | None = None
    #: A first run's (`bucket_sections`) rows to publish by section: first_run_sections.
    first_run_sections: list[list[Any]] | None = None
    #: How dedupe read the URL hashes: each group's rows and passes (dedupe_groups).
    dedupe_passes: tuple[tuple[int, int], ...] = ()
    #: A first run's sample of the valid URLs by section (SECTION_SAMPLE_KEY, one URL in
    #: `sample_every`: ValidRows.sample_uri); "" when not taken.
    sample_uri: str = ""
    sample_every: int = 0

    @property
    def rejected_rows(self) -> int:
        return sum(self.rejected.values())

    @property
    def not_indexable(self) -> int:
        """Rows the indexability gate left out (part of rejected_rows)."""
        return sum(v for k, v in self.rejected.items() if k in GATE_REASONS)

    @property
    def valid(self) -> ValidRows:
        return ValidRows(self.normalized_uris, self.duplicates_uri, self.site_prefix,
                         self.section_depth, self.constant_columns, self.split,
                         self.sample_uri, self.sample_every)


def list_inventory_files(inventory: str) -> list[str]:
    """The Parquet files of a file, a glob or a (Hive-partitioned) folder, local or S3."""
    return [f.uri for f in list_inventory(inventory)]


def list_inventory(inventory: str) -> list[storage.ListedFile]:
    """list_inventory_files' files with their sizes and versions, from one listing (a
    table's: its current data files, from its metadata, pipeline.tables)."""
    if tables.is_table(inventory):
        return tables.resolve(inventory).files
    files = storage.find_listed(inventory, ".parquet")
    if not files:
        raise InventoryError(f"inventory {inventory!r} matches no Parquet file")
    return files


def inventory_rows(files: list[str]) -> int:
    """The inventory's rows, from its files' footers: no row is read (a scan of the view
    load reads an S3 inventory through would read every row)."""
    import pyarrow.dataset as ds

    filesystem, paths = storage.arrow_files(files)
    try:
        return int(ds.dataset(paths, format="parquet", filesystem=filesystem).count_rows())
    except (pa.ArrowException, OSError) as exc:
        raise InventoryError(f"cannot read the inventory's row count: {exc}") from exc


def _believable(ts: str) -> str:
    """A finite lastmod no earlier than the web (later than now is clamped by the diff)."""
    return f"(isfinite({ts}) AND {ts} >= TIMESTAMPTZ '{EARLIEST_LASTMOD}')"


def constant_columns(typed: list[str], normalized: list[str]) -> tuple[str, ...]:
    """The columns of `normalized` (normalize_inventory's) that come as they are from an
    expression of `typed` that is a literal: the same value in every row, which need not be
    written (the demo inventory has 10: content_hash and the extensions' columns, about a
    fifth of the normalized file's write)."""
    names = set(normalized)
    return tuple(expr for expr in typed
                 if (m := CONSTANT_COLUMN.fullmatch(expr)) is not None and m.group(2) in names)


def _typed_columns(types: dict[str, str], duck_types: dict[str, Any],
                   keep_deprecated_tags: bool = False) -> list[str]:
    """Column expressions (code constants chosen by type) for `inventory_typed`."""
    url_t = types.get("url")
    if url_t is None:
        raise InventoryError("the inventory has no `url` column (a string column is required)")
    if url_t not in _STRING:
        raise InventoryError(f"the inventory's `url` column is {url_t}; it must be a string")
    # invalid_utf8: false, unless load reads cleaned copies of the files (clean_utf8)
    cols = ["url", f"{ROW_ID} AS row_id", "false AS invalid_utf8"]

    lm = types.get("lastmod")
    if lm is None:
        cols += ["NULL::TIMESTAMPTZ AS lastmod", "false AS lastmod_raw_invalid"]
    elif lm in _STRING:
        # A year or a month (W3C's YYYY, YYYY-MM) is its first instant: DuckDB casts dates.
        parsed = ("try_cast(CASE strlen(trim(lastmod)) WHEN 4 THEN trim(lastmod) || '-01-01' "
                  "WHEN 7 THEN trim(lastmod) || '-01' ELSE trim(lastmod) END AS TIMESTAMPTZ)")
        ok = (f"coalesce(regexp_full_match(trim(lastmod), '{W3C_DATETIME_REGEX}') "
              f"AND {_believable(parsed)}, false)")
        cols += [f"CASE WHEN {ok} THEN {parsed} END AS lastmod",
                 f"(lastmod IS NOT NULL AND NOT {ok}) AS lastmod_raw_invalid"]
    elif lm.startswith("TIMESTAMP") or lm in _TIMESTAMPS:
        ok = f"coalesce({_believable('lastmod::TIMESTAMPTZ')}, false)"
        cols += [f"CASE WHEN {ok} THEN lastmod::TIMESTAMPTZ END AS lastmod",
                 f"(lastmod IS NOT NULL AND NOT {ok}) AS lastmod_raw_invalid"]
    else:
        raise InventoryError(
            f"the inventory's `lastmod` column is {lm}; use a timestamp, a date or a W3C datetime string")

    cf = types.get("changefreq")
    if cf is None:
        cols += ["NULL::VARCHAR AS changefreq", "false AS changefreq_invalid"]
    elif cf in _STRING:
        # An ENUM of the allowed values: the cast is the check, and the normalised rows'
        # write takes its one-byte codes;
        # the file holds the text, which every reader sees.
        code = f"try_cast(lower(trim(changefreq)) AS {CHANGEFREQ_ENUM})"
        cols += [f"{code} AS changefreq",
                 f"(changefreq IS NOT NULL AND {code} IS NULL) AS changefreq_invalid"]
    else:
        raise InventoryError(f"the inventory's `changefreq` column is {cf}; it must be a string")

    pr = types.get("priority")
    if pr is None:
        cols += ["NULL::DOUBLE AS priority", "false AS priority_invalid"]
    elif pr in _STRING or pr.split("(")[0] in _NUMBERS:
        val = "try_cast(priority AS DOUBLE)"
        cols += [f"CASE WHEN {val} BETWEEN 0 AND 1 THEN {val} END AS priority",
                 f"(priority IS NOT NULL AND NOT coalesce({val} BETWEEN 0 AND 1, false)) "
                 "AS priority_invalid"]
    else:
        raise InventoryError(f"the inventory's `priority` column is {pr}; it must be a number 0.0-1.0")

    ch = types.get("content_hash")
    if ch is None:
        cols.append("NULL::VARCHAR AS content_hash")
    elif ch == "BLOB":
        cols.append("hex(content_hash) AS content_hash")
    else:
        cols.append("content_hash::VARCHAR AS content_hash")
    return cols + _gate_columns(types) + extension_columns(
        {k: v for k, v in duck_types.items() if k in ("images", "videos", "alternates", "news")},
        keep_deprecated_tags)


#: The longest <url> line without extensions: a <loc> of MAX_URL_LENGTH characters all
#: escaped to &apos; (6 bytes), a lastmod, the longest changefreq and a priority of 5
#: characters, with their tags (sql/url_line.sql, url_line_bytes). A line whose extension
#: XML is shorter than the file's budget less this always fits (sql/normalize_inventory.sql).
MAX_PLAIN_LINE_BYTES = 23 + 6 * MAX_URL_LENGTH + 39 + 25 + 7 + 21 + 5


#: The indexability gate's optional columns: the types accepted, the type of the NULL column
#: that stands for a missing one, and what the column must be (for the error).
GATE_COLUMNS = {
    "http_status": (_INTEGERS, "INTEGER", "an integer (the page's HTTP status)"),
    "canonical_url": (_STRING, "VARCHAR", "a string (the page's canonical URL)"),
    "noindex": (("BOOLEAN",), "BOOLEAN", "a boolean (the page says noindex)"),
    "redirect_to": (_STRING, "VARCHAR", "a string (where the page redirects)"),
}
#: The reject reasons of the gate: the site's own signals, not bad data (steps.bad_rejects).
GATE_REASONS = ("not_200", "redirect", "noindex", "not_canonical")


def _gate_columns(types: dict[str, str]) -> list[str]:
    """The indexability gate's columns, NULL when the inventory has none (then they cost
    nothing: DuckDB folds the gate away); a column of another type is refused."""
    cols = []
    for name, (accepted, as_type, what) in GATE_COLUMNS.items():
        t = types.get(name)
        if t is None:
            cols.append(f"NULL::{as_type} AS {name}")
        elif t.split("(")[0] in accepted:
            cols.append(name)  # as it is: a HUGEINT status is compared, never cast
        else:
            raise InventoryError(f"the inventory's `{name}` column is {t}; it must be {what}")
    return cols


@dataclass(frozen=True)
class LoadPlan:
    """What every group of load reads its files with, decided once from the inventory's
    listing and its files' footers (no row is read): each group normalises its rows as one
    load of every file would, numbers them as it would (row ids stay global, so the
    duplicates' tie rule is the same) and cuts them by the same diff partitions.
    JSON as it is (`asdict`): the DAG's load_groups task saves it for the normalize tasks."""

    inventory: str
    files: list[str]
    #: Each file's rows, from its footer: a group's row ids follow those of earlier files.
    file_rows: list[int]
    #: The inventory's columns (all its files') and their DuckDB types: a group whose files
    #: lack one reads it as NULL, as a load of every file does.
    columns: dict[str, str]
    #: The typed view's column expressions (code constants chosen by type, _typed_columns).
    typed_columns: list[str]
    #: normalize_inventory's parameters.
    params: dict[str, Any]
    site_prefix: str
    section_depth: int
    #: The diff partitions the normalised rows are cut by (ValidRows.split).
    split: int
    bucket_sections: bool
    row_hashes: bool
    #: Each group's files (indexes into `files`, consecutive).
    groups: list[list[int]]
    #: The parts the duplicate search is cut in (the DAG's mapped dedupe task): part P
    #: reads the normalised rows of the partitions K with K % dedupe_parts = P (dedupe_part).
    dedupe_parts: int = 1
    #: Hive folders (`key=value`) are columns (pipeline.tables.hive_partitioned).
    hive: bool = True
    #: A first run's groups sample one valid URL in this many (sql/group_sample.sql) for
    #: plan's cuts; 0: no sample.
    sample_every: int = 0

    @property
    def input_rows(self) -> int:
        return sum(self.file_rows)

    def group_rows(self, group: int) -> int:
        return sum(self.file_rows[i] for i in self.groups[group])


@dataclass
class GroupResult:
    """What one group of load wrote and counted (JSON as it is: the DAG's normalize task
    saves it, `load-NNNNN.json`)."""

    group: int
    rows: int
    files: int
    normalized_uris: list[str]
    constant_columns: list[str]
    #: sql/classified_counts.sql over the group's rows, as JSON (duplicates not yet known:
    #: combine_groups moves them out of the rows to publish).
    counts: list[dict[str, Any]]
    #: Its files were read again through clean_utf8: its row hashes are not the raw rows'.
    cleaned: bool
    seconds: float
    #: Its rejected rows (sql/rejected_rows.sql; the duplicates are dedupe_part's).
    rejects_uri: str = ""
    #: Its sample of valid URLs (sql/group_sample.sql; LoadPlan.sample_every), or "".
    sample_uri: str = ""


@dataclass
class DedupeResult:
    """What one part of the duplicate search found (JSON as it is: the DAG's dedupe task
    saves it, `dedupe-NNNNN.json`)."""

    part: int
    #: The normalised files it read (whole partitions: every copy of a URL is in one).
    files: int
    #: How it read their URL hashes: [rows, passes] of each dedupe_groups group.
    passes: list[list[int]]
    #: Its duplicates as rejected rows (sql/duplicate_rejects.sql); None: it had no file.
    duplicates_uri: str | None
    #: sql/classified_counts.sql over its duplicates (reason 'duplicate'), as JSON.
    counts: list[dict[str, Any]]
    seconds: float

    @property
    def rows(self) -> int:
        return sum(rows for rows, _ in self.passes)


def plan_load(inventory: str, site_url: str, *, section_depth: int = 1,
              keep_deprecated_tags: bool = False, max_line_bytes: int | None = None,
              diff_partitions: Callable[[int], int] | None = None,
              bucket_sections: bool = False, row_hashes: bool = False,
              group_rows: int | None = None, dedupe_rows: int | None = None,
              sample_every: int = 0,
              con: duckdb.DuckDBPyConnection | None = None) -> LoadPlan:
    """List the inventory, check its schema and choose how its rows are cut (see `load`
    for the options): the LoadPlan every group follows. `group_rows`: cut the files into
    consecutive groups of about that many rows (a file is never split); None: one group.
    `dedupe_rows`: the rows each part of the duplicate search reads, about (default
    DEDUPE_PASS_ROWS: one pass each), as far as the cut allows (dedupe_part_count).
    `sample_every`: a first run's (`bucket_sections`, one partition) groups also sample one
    valid URL in this many for plan's cuts (LoadResult.sample_uri); 0: none."""
    site = Site.parse(site_url)
    files = list_inventory_files(inventory)
    hive = tables.hive_partitioned(inventory)
    con = con or sql.connect()
    try:
        register_parquet(con, "inventory_raw", files, row_ids=True, hive=hive, every_schema=True)
        probe = con.sql("SELECT * FROM inventory_raw LIMIT 0")
        duck_types = {k: v for k, v in zip(probe.columns, probe.types, strict=True) if k != ROW_ID}
        types = {k: str(v).upper() for k, v in duck_types.items()}
    except duckdb.Error as exc:
        if "magic bytes" in str(exc):  # DuckDB's words for a file that is not Parquet
            raise InventoryError(f"cannot read the inventory {inventory!r}: a file is not a "
                                 f"Parquet file ({_one_line(exc)})") from exc
        raise InventoryError(f"cannot read the inventory {inventory!r}: {_one_line(exc)}") from exc
    except OSError as exc:
        raise InventoryError(f"cannot read the inventory {inventory!r}: {exc}") from exc
    typed_columns = _typed_columns(types, duck_types, keep_deprecated_tags)
    # Each raw row's hash: written with it, summed once it is written (classified_counts);
    # not asked for, a NULL that is not written.
    typed_columns.append(row_hash_column(list(duck_types)) if row_hashes
                         else f"NULL::UBIGINT AS {ROW_HASH_COLUMN}")
    file_rows = inventory_file_rows(files)
    params = {"site_prefix": site.prefix, "clean_regex": CLEAN_URL_REGEX,
              "iri_regex": IRI_PATH_REGEX, "max_len": MAX_URL_LENGTH,
              "section_depth": section_depth, "max_line_bytes": max_line_bytes,
              "ext_budget": None if max_line_bytes is None
              else max_line_bytes - MAX_PLAIN_LINE_BYTES}
    split = max(1, diff_partitions(sum(file_rows))) if diff_partitions else 1
    dedupe_parts = dedupe_part_count(sum(file_rows), split, bucket_sections,
                                     dedupe_rows or DEDUPE_PASS_ROWS)
    return LoadPlan(
        inventory=inventory, files=files, file_rows=file_rows,
        columns={k: str(v) for k, v in duck_types.items()}, typed_columns=typed_columns,
        params=params, site_prefix=site.prefix, section_depth=section_depth, split=split,
        bucket_sections=bucket_sections, row_hashes=row_hashes,
        groups=file_groups(file_rows, group_rows), dedupe_parts=dedupe_parts, hive=hive,
        sample_every=sample_every if bucket_sections and split == 1 else 0)


def dedupe_part_count(rows: int, split: int, bucket_sections: bool, part_rows: int) -> int:
    """How many parts the duplicate search is cut in: about `part_rows` rows each, but no
    more than the partitions the rows are cut by (a part reads whole ones)."""
    cuts = split if split > 1 else DIFFED_BUCKETS if bucket_sections else 1
    return max(1, min(cuts, -(-rows // max(1, part_rows))))


def file_groups(file_rows: Sequence[int], group_rows: int | None) -> list[list[int]]:
    """The inventory's files (their rows, in order) in consecutive groups of about
    `group_rows` rows each (a file larger than that is a group alone); None: one group."""
    if not group_rows or len(file_rows) <= 1:
        return [list(range(len(file_rows)))]
    groups: list[list[int]] = [[]]
    rows = 0
    for i, n in enumerate(file_rows):
        if groups[-1] and rows + n > group_rows:
            groups.append([])
            rows = 0
        groups[-1].append(i)
        rows += n
    return groups


def inventory_file_rows(files: list[str]) -> list[int]:
    """Each inventory file's rows, from its footer: no row is read."""
    import pyarrow.dataset as ds

    filesystem, paths = storage.arrow_files(files)
    try:
        dataset = ds.dataset(paths, format="parquet", filesystem=filesystem)
        return [int(f.count_rows()) for f in dataset.get_fragments()]
    except (pa.ArrowException, OSError) as exc:
        raise InventoryError(f"cannot read the inventory's row count: {exc}") from exc


def load_group(plan: LoadPlan, group: int, work_uri: str, *,
               con: duckdb.DuckDBPyConnection | None = None,
               progress: Progress = QUIET) -> GroupResult:
    """Normalise and validate one group of the inventory's files (LoadPlan.groups): write
    its rows under `work_uri`, cut as the plan says, and count them. Several groups write
    side by side (their files' names start with the group's number); combine_groups finds
    the duplicates among all of them."""
    started = time.monotonic()
    con = con or sql.connect()
    indexes = plan.groups[group]
    files = [plan.files[i] for i in indexes]
    several = len(plan.groups) > 1
    progress.step(f"load {len(files)} file(s)" + (f" (group {group})" if several else ""))
    first_file = indexes[0] if indexes else 0

    def register(uris: list[str]) -> None:
        _register_inventory(con, plan, uris, first_file, "inventory_raw")

    try:
        register(files)
    except duckdb.Error as exc:
        raise InventoryError(f"cannot read the inventory {plan.inventory!r}: {_one_line(exc)}") from exc
    except OSError as exc:
        raise InventoryError(f"cannot read the inventory {plan.inventory!r}: {exc}") from exc
    register_url_rules(con)
    work = storage.open_storage(work_uri)
    typed = f"SELECT {', '.join(plan.typed_columns)} FROM inventory_raw"
    con.sql(typed).create_view("inventory_typed", replace=True)
    constants: tuple[str, ...] = ()
    prefix = f"g{group:05d}-" if several else ""
    unsplit_key = (f"{NORMALIZED_KEY.removesuffix('.parquet')}/{prefix}rows.parquet"
                   if several else NORMALIZED_KEY)

    def write_normalized() -> list[str]:
        nonlocal constants
        rel = con.sql(sql.load_sql("normalize_inventory"), params=plan.params)
        constants = constant_columns(plan.typed_columns, rel.columns)
        left_out = {c.rpartition(" AS ")[2] for c in constants}
        rel = rel.project(", ".join(f'"{c}"' for c in rel.columns if c not in left_out))
        if plan.split > 1:  # a row without a URL hash (a rejected one): DuckDB's default partition
            column, key = DIFF_PARTITION_COLUMN, f"url_hash % {plan.split}"
        elif plan.bucket_sections:
            column, key = BUCKET, f"hash(raw_section) % {DIFFED_BUCKETS}"
        else:
            return [write_parquet(rel, work, unsplit_key)]
        written = write_partitioned(con, rel.project(f"*, {key} AS {column}"), work,
                                    NORMALIZED_KEY.removesuffix(".parquet"), column,
                                    file_prefix=prefix)
        if not written:  # no row: one empty file, with the columns
            return [write_parquet(rel, work, unsplit_key)]
        return [u for part in sorted(written, key=_partition_order) for u in written[part]]

    cleaned = False
    with tempfile.TemporaryDirectory(prefix="sitemaps-utf8-") as cleaned_dir:
        try:
            try:
                normalized_uris = write_normalized()
            except duckdb.InvalidInputException as exc:
                if "not valid UTF8" not in str(exc):
                    raise
                # DuckDB refuses a file with one string that is not UTF-8: read it again with
                # pyarrow, which does not, and reject just those rows (invalid_utf8).
                log.warning("load: the inventory holds strings that are not valid UTF-8; "
                            "reading it again to reject those rows (%s)", _one_line(exc))
                register(clean_utf8(files, Path(cleaned_dir), plan.files))
                con.sql(typed.replace("false AS invalid_utf8", f"{INVALID_UTF8} AS invalid_utf8")
                        ).create_view("inventory_typed", replace=True)
                normalized_uris = write_normalized()
                cleaned = True  # hashes of the cleaned rows: not row_sums' numbers
            # The group's counts; its duplicates are found with every group's rows
            # (combine_groups), which moves them out of the rows to publish.
            register_normalized(con, normalized_uris, constants)
            bounds = plan.bucket_sections and plan.split == 1
            con.sql(f"SELECT *, {'url' if bounds else 'NULL::VARCHAR'} AS bounded_url "
                    "FROM normalized").create_view("counted", replace=True)
            counts = [_json_counts(g) for g in _counts(con)]
            rejected = con.sql(sql.load_sql("rejected_rows"),
                               params={"site_prefix": plan.site_prefix})
            rejects_uri = write_parquet(rejected, work,
                                        f"{REJECT_PARTS_FOLDER}/g{group:05d}.parquet")
            # Plan's cuts of a first run's large sections come from these few rows, taken
            # in this pass, not from a scan of the sections' rows (pipeline.plan.slices).
            sample_uri = "" if not plan.sample_every else write_parquet(
                con.sql(sql.load_sql("group_sample"), params={"every": plan.sample_every}),
                work, f"{SAMPLE_PARTS_FOLDER}/g{group:05d}.parquet")
        except duckdb.Error as exc:
            # a full disk under the work folder or the spill is not the inventory's fault
            raise out_of_space(exc, sql.spill_dir_for_errors()) or InventoryError(
                f"cannot read the inventory {plan.inventory!r}: {_one_line(exc)}") from exc
    result = GroupResult(
        group=group, rows=plan.group_rows(group), files=len(files),
        normalized_uris=normalized_uris, constant_columns=list(constants), counts=counts,
        cleaned=cleaned, seconds=round(time.monotonic() - started, 3), rejects_uri=rejects_uri,
        sample_uri=sample_uri)
    if several:
        progress.done(f"{result.rows:,} rows")
    return result


def dedupe_part(plan: LoadPlan, results: Sequence[GroupResult], part: int, parts: int,
                work_uri: str, *, con: duckdb.DuckDBPyConnection | None = None,
                progress: Progress = QUIET) -> DedupeResult:
    """Find the duplicates among the groups' rows (`results`: every group's) of the
    partitions K with K % `parts` = `part` (whole diff partitions or buckets: every copy
    of a URL is in one; find_duplicates); write them as rejected rows,
    `duplicate-parts/dNNNNN.parquet`, and count them. The DAG's mapped dedupe task runs one
    part (LoadPlan.dedupe_parts); the CLI runs one part of all."""
    started = time.monotonic()
    con = con or sql.connect()
    constants = _constant_columns(results)
    uris = [u for u in sorted((u for r in results for u in r.normalized_uris),
                              key=_normalized_order)
            if _partition_number(u) % parts == part]
    if parts > 1:
        progress.step(f"find the duplicates of dedupe part {part} ({len(uris)} file(s))")
    if not uris:
        return DedupeResult(part=part, files=0, passes=[], duplicates_uri=None, counts=[],
                            seconds=round(time.monotonic() - started, 3))
    try:
        read_by = dedupe_groups(uris, _file_rows)
        find_duplicates(con, read_by, constants, plan.split)
        con.sql("SELECT * EXCLUDE (reason), 'duplicate' AS reason, NULL::VARCHAR AS bounded_url "
                "FROM duplicate_rows").create_view("counted", replace=True)
        counts = [_json_counts(g) for g in _counts(con)]
        duplicates_uri = write_parquet(con.sql(sql.load_sql("duplicate_rejects")),
                                       storage.open_storage(work_uri),
                                       f"{DUPLICATE_PARTS_FOLDER}/d{part:05d}.parquet")
    except duckdb.Error as exc:
        raise out_of_space(exc, sql.spill_dir_for_errors()) or InventoryError(
            f"cannot read the inventory {plan.inventory!r}: {_one_line(exc)}") from exc
    result = DedupeResult(part=part, files=len(uris),
                          passes=[[g.rows, g.passes] for g in read_by],
                          duplicates_uri=duplicates_uri, counts=counts,
                          seconds=round(time.monotonic() - started, 3))
    if parts > 1:
        progress.done(f"{result.rows:,} rows, {sum(int(c['rows']) for c in counts):,} duplicates")
    return result


def _constant_columns(results: Sequence[GroupResult]) -> tuple[str, ...]:
    if not results:
        raise InternalError("load wrote no normalised file")
    constants = tuple(results[0].constant_columns)
    if any(tuple(r.constant_columns) != constants for r in results):
        # the same expressions over other rows: a literal in one group is one in all
        raise InternalError("load's groups left out different constant columns")
    return constants


def _partition_number(uri: str) -> int:
    """The partition of a normalised file (its Hive folder's value, `_CUT_FOLDER`); 0 for a
    file not cut and for DuckDB's NULL partition (rejected rows: no URL hash)."""
    m = _CUT_FOLDER.search(uri)
    value = m.group(1).partition("=")[2] if m else ""
    return int(value) if value.isdigit() else 0


def combine_groups(plan: LoadPlan, results: Sequence[GroupResult],
                   dedupes: Sequence[DedupeResult], work_uri: str, *,
                   con: duckdb.DuckDBPyConnection | None = None, progress: Progress = QUIET,
                   started: float | None = None) -> LoadResult:
    """Add up the groups' counts and the dedupe parts' (`dedupes`: every part's), move the
    duplicates out of the rows to publish, write `duplicates.parquet` and `rejects.parquet`
    from their parts: the LoadResult of the whole inventory. It reads no normalised row
    but where the inventory has alternates (alternates_not_reciprocal reads them all)."""
    started = time.monotonic() if started is None else started
    con = con or sql.connect()
    work = storage.open_storage(work_uri)
    constants = _constant_columns(results)
    uris = sorted((u for r in results for u in r.normalized_uris), key=_normalized_order)
    duplicate_parts = [d.duplicates_uri for d in dedupes if d.duplicates_uri]
    if not duplicate_parts:
        raise InternalError("load's dedupe parts read no normalised file")
    if len(results) > 1 or len(dedupes) > 1:  # else: the one group's step ends here
        progress.step(f"add up {len(results)} group(s) and {len(dedupes)} dedupe part(s)")
    try:
        groups = _moved_duplicates([g for r in results for g in r.counts],
                                   [g for d in dedupes for g in d.counts])
        register_parquet(con, "duplicate_rejects", duplicate_parts)
        con.execute("DROP TABLE IF EXISTS duplicate_rows")  # the CLI's dedupe_part's, here too
        con.sql("SELECT row_id FROM duplicate_rejects").create_view("duplicate_rows")
        bounds = plan.bucket_sections and plan.split == 1
        row_hashes = plan.row_hashes and not any(r.cleaned for r in results)
        sums = section_sums = sections = None
        sample_uri = ""
        if row_hashes or bounds:
            slugs = section_slugs(con, [g["raw_section"] for g in groups if g["reason"] is None])
            if bounds:
                sections = first_run_sections(groups, slugs)
            if bounds and plan.sample_every and all(r.sample_uri for r in results):
                # section_slugs' table is still there: the samples' sections named with it
                register_parquet(con, "sample_parts", [r.sample_uri for r in results])
                sample_uri = write_parquet(con.sql(sql.load_sql("section_sample")), work,
                                           SECTION_SAMPLE_KEY)
            if row_hashes:  # the input's, and each section's (pipeline.unchanged)
                sums = (sum(g["rows"] for g in groups),
                        sum(int(g["hash_sum"]) for g in groups),
                        sum(int(g["hash_hash_sum"]) for g in groups), list(plan.columns))
                section_sums = sums_by_section(groups, slugs)
        not_reciprocal = 0
        if "alternates" in plan.columns:  # pages of any group name each other
            register_normalized(con, uris, constants)
            con.execute(sql.load_sql("classified_rows"))
            not_reciprocal = _not_reciprocal(con, plan)
        duplicates_uri = write_parquet(con.sql("SELECT row_id FROM duplicate_rows ORDER BY row_id"),
                                       work, DUPLICATES_KEY)
        # in row order, whatever the cut: a DAG run's rejects are the CLI's
        register_parquet(con, "reject_parts", [r.rejects_uri for r in results] + duplicate_parts)
        rejects_uri = write_parquet(con.sql("SELECT * FROM reject_parts ORDER BY row_id"),
                                    work, REJECTS_KEY)
    except duckdb.Error as exc:
        raise out_of_space(exc, sql.spill_dir_for_errors()) or InventoryError(
            f"cannot read the inventory {plan.inventory!r}: {_one_line(exc)}") from exc

    # No rows is not an error here: the shrink guard refuses to publish an empty generation.
    valid_counts = dict.fromkeys(ISSUE_COUNTS, 0)  # the rows to publish (reason NULL)
    by_reason: dict[str, dict[str, int]] = {}
    for g in groups:  # each reason's counts, its sections added up
        acc = valid_counts if g["reason"] is None else by_reason.setdefault(
            g["reason"], dict.fromkeys(ISSUE_COUNTS, 0))
        for name in ISSUE_COUNTS:
            acc[name] += int(g[name])
    rejected = {reason: int(c["rows"]) for reason, c in by_reason.items()}
    input_rows = int(valid_counts["rows"]) + sum(rejected.values())
    issues = {k: int(v) for k, v in valid_counts.items() if k not in ("rows", "lastmod_given")}
    issues["alternates_not_reciprocal"] = not_reciprocal
    if plan.columns.get("lastmod", "").upper() in _STRING:
        given = valid_counts["lastmod_given"]
        if given and issues["lastmod_invalid"] == given:
            raise InventoryError(
                f"no `lastmod` value of the inventory {plan.inventory!r} parses as a date or "
                "W3C datetime (for example 2026-12-02T03:00:00Z)")
    valid_rows = input_rows - sum(rejected.values())
    result = LoadResult(
        input_rows=input_rows, valid_rows=valid_rows, rejected=rejected,
        field_issues=issues, normalized_uris=tuple(uris),
        duplicates_uri=duplicates_uri, rejects_uri=rejects_uri, site_prefix=plan.site_prefix,
        section_depth=plan.section_depth, files=plan.files,
        seconds=time.monotonic() - started,
        constant_columns=constants, split=plan.split, row_sums=sums, section_sums=section_sums,
        first_run_sections=sections, sample_uri=sample_uri,
        sample_every=plan.sample_every if sample_uri else 0,
        dedupe_passes=tuple((rows, passes) for d in dedupes for rows, passes in d.passes))
    progress.done(f"{input_rows:,} rows, {valid_rows:,} valid, {result.rejected_rows:,} rejected")
    log.debug("load: %d input rows, %d valid, rejected %s, dropped fields %s (%.1f s); "
              "duplicates found in %d part(s), %d pass(es), %d hashes read",
              input_rows, valid_rows, rejected or "none", result.field_issues, result.seconds,
              len(dedupes), sum(p for _, p in result.dedupe_passes),
              sum(r * p for r, p in result.dedupe_passes))
    return result


def load(inventory: str, site_url: str, work_uri: str, *, section_depth: int = 1,
         keep_deprecated_tags: bool = False, max_line_bytes: int | None = None,
         con: duckdb.DuckDBPyConnection | None = None,
         progress: Progress = QUIET,
         diff_partitions: Callable[[int], int] | None = None,
         bucket_sections: bool = False, row_hashes: bool = False,
         sample_every: int = 0) -> LoadResult:
    """Read, check and validate the inventory; write valid rows and rejects under `work_uri`:
    plan_load, load_group of every file at once, combine_groups, in one process.

    `keep_deprecated_tags`: write the image tags Google no longer uses (extensions).
    `max_line_bytes`: the longest <url> line a sitemap file can hold (Limits.body_budget;
    None for plain-text sitemaps): a row whose line would be longer is rejected as
    `too_large` (only extensions can make one).
    `diff_partitions`: how many hash partitions the diff will have, from the inventory's
    row count; more than one cuts the normalised rows by them (ValidRows.split), so that
    each diff partition reads its own rows instead of every row.
    `bucket_sections` (a first run): in one partition, write the rows in buckets of the
    path segments their section is named from (`normalized/bucket=K/`, K =
    hash(raw_section) % DIFFED_BUCKETS), which plan reads through the diff's query
    (pipeline.diffed.DiffedView) instead of a copy of them written by the diff; and count
    them by section for that diff (`LoadResult.first_run_sections`).
    `row_hashes`: also sum a hash of every input row, as pipeline.unchanged.row_sums does
    (`LoadResult.row_sums`), in the pass that reads them anyway, and each section's
    (`LoadResult.section_sums`). `sample_every`: see plan_load."""
    started = time.monotonic()
    con = con or sql.connect()
    progress.step("list the inventory")
    plan = plan_load(inventory, site_url, section_depth=section_depth,
                     keep_deprecated_tags=keep_deprecated_tags, max_line_bytes=max_line_bytes,
                     diff_partitions=diff_partitions, bucket_sections=bucket_sections,
                     row_hashes=row_hashes, sample_every=sample_every, con=con)
    progress.done(f"{len(plan.files)} file(s), {plan.input_rows:,} rows")
    return load_planned(plan, work_uri, con=con, progress=progress, started=started)


def load_planned(plan: LoadPlan, work_uri: str, *, con: duckdb.DuckDBPyConnection | None = None,
                 progress: Progress = QUIET, started: float | None = None) -> LoadResult:
    """Every file of the plan in one group, its duplicates found in one part, then
    combined, in one process and connection (the CLI's load)."""
    con = con or sql.connect()
    groups = [load_group(plan, 0, work_uri, con=con, progress=progress)]
    dedupes = [dedupe_part(plan, groups, 0, 1, work_uri, con=con, progress=progress)]
    return combine_groups(plan, groups, dedupes, work_uri, con=con, progress=progress,
                          started=started)


def _register_inventory(con: duckdb.DuckDBPyConnection, plan: LoadPlan, uris: list[str],
                        first_file: int, name: str) -> None:
    """Inventory files (`uris`: a group's, or cleaned copies of them) as the view `name`,
    with the inventory's columns (NULL where these files lack one) and their row ids (from
    `first_file`, the group's first file)."""
    base = None
    if len(plan.groups) > 1 and len(plan.files) > 1 and "://" in plan.files[0]:
        # a store's Hive folders are read below the inventory's folder, not the group's
        base = plan.files[0].partition("://")[0] + "://" + os.path.commonpath(
            storage.arrow_files(plan.files)[1])
    register_parquet(con, f"{name}_files", uris, row_ids=True, first_file=first_file,
                     partition_base=base, hive=plan.hive, every_schema=True)
    have = set(con.sql(f"SELECT * FROM {name}_files LIMIT 0").columns)
    missing = [f'NULL::{t} AS "{c}"' for c, t in plan.columns.items() if c not in have]
    con.sql("SELECT *" + "".join(f", {m}" for m in missing) + f" FROM {name}_files"
            ).create_view(name, replace=True)


def _not_reciprocal(con: duckdb.DuckDBPyConnection, plan: LoadPlan) -> int:
    """sql/alternates_not_reciprocal.sql over every group's rows (`classified`) and every
    inventory file (`inventory_raw`, numbered as the groups numbered them); files DuckDB
    cannot read (a string that is not UTF-8) are read through clean_utf8 copies."""
    def count(files: list[str]) -> int:
        parts = []
        for g, indexes in enumerate(plan.groups):
            if indexes:
                _register_inventory(con, plan, [files[i] for i in indexes], indexes[0],
                                    f"inventory_group_{g}")
                parts.append(f"SELECT * FROM inventory_group_{g}")
        con.sql(" UNION ALL BY NAME ".join(parts)).create_view("inventory_raw", replace=True)
        return int(sql.scalar(con, sql.load_sql("alternates_not_reciprocal")))

    try:
        return count(plan.files)
    except duckdb.InvalidInputException as exc:
        if "not valid UTF8" not in str(exc):
            raise
        with tempfile.TemporaryDirectory(prefix="sitemaps-utf8-") as folder:
            return count(clean_utf8(plan.files, Path(folder), plan.files))


def _counts(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """sql/classified_counts.sql over the view `counted`, as dicts."""
    rel = con.sql(sql.load_sql("classified_counts"))
    names = rel.columns
    return [dict(zip(names, row, strict=True)) for row in rel.fetchall()]


def _json_counts(g: dict[str, Any]) -> dict[str, Any]:
    """One row of classified_counts as JSON holds it: numbers as ints, times in ISO 8601."""
    return {k: v.isoformat() if isinstance(v, datetime)
            else int(v) if isinstance(v, Decimal) else v for k, v in g.items()}


def _moved_duplicates(counts: Sequence[dict[str, Any]], duplicates: Sequence[dict[str, Any]]
                      ) -> list[dict[str, Any]]:
    """The groups' counts (each group's classified_counts rows, in JSON) added up by reason
    and path segments, the `duplicates`' counts (theirs, reason 'duplicate') moved out of
    the rows to publish: what classified_counts gives over every row with its duplicates
    known. Their URLs and lastmods change no bound: each has a copy that stays, of the same
    URL and no older lastmod. Times come back as datetimes."""
    merged: dict[tuple[Any, Any], dict[str, Any]] = {}

    def add(g: dict[str, Any], reason: str | None) -> None:
        acc = merged.get((reason, g["raw_section"]))
        if acc is None:
            merged[(reason, g["raw_section"])] = dict(g)
            return
        for k in _SUMMED:
            acc[k] = int(acc[k]) + int(g[k])
        for k, pick in (("newest", max), ("min_url", min), ("max_url", max)):
            given = [v for v in (acc[k], g[k]) if v is not None]
            acc[k] = pick(given) if given else None

    for g in counts:
        add(g, g["reason"])
    for d in duplicates:  # a section's duplicates may come from several dedupe parts
        kept = merged[(None, d["raw_section"])]
        for k in _SUMMED:
            kept[k] = int(kept[k]) - int(d[k])
        add(d, "duplicate")
    rows = []
    for _, g in sorted(merged.items(), key=lambda kv: (
            kv[0][0] is not None, kv[0][0] or "", kv[0][1] is None, kv[0][1] or "")):
        if g["newest"] is not None:
            g["newest"] = datetime.fromisoformat(g["newest"])
        rows.append(g)
    return rows


def section_slugs(con: duckdb.DuckDBPyConnection, raw_sections: Sequence[str | None]
                  ) -> dict[str, str]:
    """The slug of each of the valid rows' path segments (`raw_sections`, from load's
    counts: no row is read), as sql/section_slugs.sql names them for the diff."""
    names = sorted({r for r in raw_sections if r is not None})
    con.register("section_names", pa.table({"raw_section": pa.array(names, pa.string())}))
    try:
        con.execute(sql.load_sql("section_slugs"))
    finally:
        con.unregister("section_names")
    return dict(con.sql("SELECT raw_section, section FROM section_slugs").fetchall())


def _partition_order(part: str) -> tuple[bool, str]:
    """write_partitioned's partitions in number order (DuckDB's NULL partition last)."""
    return (not part.isdigit(), part.zfill(20))


def _normalized_order(uri: str) -> tuple[tuple[bool, str], str]:
    """load's normalised files by partition (the Hive folder's value), then by name."""
    m = _CUT_FOLDER.search(uri)
    return (_partition_order(m.group(1).partition("=")[2]) if m else (False, ""), uri)



def reject_examples(rejects_uri: str, reasons: Sequence[str], per_reason: int = 3
                    ) -> dict[str, list[dict[str, Any]]]:
    """The first `per_reason` rejected rows (row_id, url) of each of `reasons`, by row id,
    from a rejects Parquet (sql/reject_examples.sql): what the reject guard shows."""
    con = sql.connect()
    register_parquet(con, "rejects", [rejects_uri])
    found: dict[str, list[dict[str, Any]]] = {r: [] for r in reasons}
    for reason, row_id, url in con.execute(sql.load_sql("reject_examples"), {
            "reasons": list(reasons), "per_reason": per_reason}).fetchall():
        found[reason].append({"row_id": row_id, "url": url})
    return found


def first_run_sections(groups: Sequence[dict[str, Any]], slugs: dict[str, str]
                       ) -> list[list[Any]]:
    """A first run's rows to publish by section, from load's counts by reject reason and
    path segments (sql/classified_counts.sql, with their URLs' bounds): [section, rows,
    smallest URL, largest URL, newest lastmod as ISO 8601], in section order; the path
    segments named as sql/section_slugs.sql names them (`slugs`: none is 'root', as
    sql/valid_rows.sql has it). The diff of a first run takes its counts from these
    (pipeline.diff.first_run_stats)."""
    found: dict[str, list[Any]] = {}
    for g in groups:
        if g["reason"] is not None:
            continue
        section = slugs.get(g["raw_section"], "root")
        acc = found.setdefault(section, [section, 0, g["min_url"], g["max_url"], None])
        acc[1] += int(g["rows"])
        acc[2], acc[3] = min(acc[2], g["min_url"]), max(acc[3], g["max_url"])
        if g["newest"] is not None and (acc[4] is None or g["newest"] > acc[4]):
            acc[4] = g["newest"]
    return [[*acc[:4], None if acc[4] is None else acc[4].isoformat()]
            for _, acc in sorted(found.items())]


#: The counts of sql/classified_counts.sql that load reports (each reason's, its sections
#: added up): rows, rows that gave a lastmod, and the fields dropped.
ISSUE_COUNTS = ("rows", "lastmod_given", "lastmod_invalid", "changefreq_invalid",
                "priority_invalid", "images_dropped", "videos_dropped",
                "alternates_without_self", "deprecated_tags", "extension_fields_invalid",
                "news_dropped")

#: classified_counts' fields that add up (the rest: reason, raw_section, newest, min_url,
#: max_url).
_SUMMED = (*ISSUE_COUNTS, "hash_sum", "hash_hash_sum", "tagged_hash_sum", "tagged_hash_hash_sum")


#: URL hashes sorted at once by dedupe (8 bytes each: 128 MiB at most): the rows of one
#: group of whole partitions (dedupe_groups); a partition of more rows takes several passes
#: over its own rows, each over one hash range.
DEDUPE_PASS_ROWS = 16_000_000

#: The Hive folder of a normalised file (load's `write_normalized`): its diff partition
#: (url_hash % split) or its bucket (of the path segments of its section, which come from
#: the URL). Either way every copy of one URL is in the same folder.
_CUT_FOLDER = re.compile(rf"/((?:{DIFF_PARTITION_COLUMN}|{BUCKET})=[^/]+)/")


@dataclass(frozen=True)
class DedupeGroup:
    """Files of normalised rows that dedupe ranks together: whole partitions."""

    files: tuple[str, ...]
    rows: int
    #: Passes of url_hashes over these files (rows / DEDUPE_PASS_ROWS, rounded up).
    passes: int


def dedupe_groups(uris: Sequence[str], rows_of: Callable[[str], int]) -> list[DedupeGroup]:
    """load's normalised files (`uris`, in partition order) in the groups dedupe reads one at
    a time: whole partitions (as load cut them, `_CUT_FOLDER`; files not cut are one),
    consecutive ones together up to DEDUPE_PASS_ROWS rows, so that a small inventory cut in
    many takes one pass as an uncut one does; a partition of more rows is a group alone,
    read in as many passes over its own rows as keep each within DEDUPE_PASS_ROWS.
    `rows_of`: a file's rows (its footer's)."""
    partitions: dict[str, list[str]] = {}
    for uri in uris:
        m = _CUT_FOLDER.search(uri)
        partitions.setdefault(m.group(1) if m else "", []).append(uri)
    groups: list[DedupeGroup] = []
    files: list[str] = []
    rows = 0
    for part in partitions.values():
        part_rows = sum(rows_of(u) for u in part)
        if files and rows + part_rows > DEDUPE_PASS_ROWS:
            groups.append(DedupeGroup(tuple(files), rows, 1))
            files, rows = [], 0
        if part_rows > DEDUPE_PASS_ROWS:
            groups.append(DedupeGroup(tuple(part), part_rows, -(-part_rows // DEDUPE_PASS_ROWS)))
            continue
        files += part
        rows += part_rows
    if files:
        groups.append(DedupeGroup(tuple(files), rows, 1))
    return groups


def find_duplicates(con: duckdb.DuckDBPyConnection, groups: Sequence[DedupeGroup],
                    constants: tuple[str, ...], split: int = 1) -> None:
    """The table `duplicate_rows` (sql/dedupe_rows.sql), one group of partitions at a time
    (the view `dedupe_group`): each row is read once, by one group, and memory holds one
    group's hashes. `split`: the diff partitions the files are cut by (a pass within one
    partition takes a range of the rest of the hash, url_hashes)."""
    created = False
    for group in groups:
        register_normalized(con, group.files, constants, name="dedupe_group")
        repeated = repeated_url_hashes(con, group.passes, split)
        if created and not repeated.num_rows:
            continue
        con.register("repeated_url_hashes", repeated)
        rel = con.sql(sql.load_sql("dedupe_rows"))
        if created:
            rel.insert_into("duplicate_rows")
        else:
            con.execute("DROP TABLE IF EXISTS duplicate_rows")
            rel.create("duplicate_rows")
            created = True
        con.unregister("repeated_url_hashes")
    if not created:  # no file: the columns of no row (write_normalized writes one file)
        raise InternalError("load wrote no normalised file")


def repeated_url_hashes(con: duckdb.DuckDBPyConnection, passes: int = 1, split: int = 1
                        ) -> pa.Table:
    """The 64-bit hashes of the normalised URLs (`dedupe_group`) that occur more than once.

    A sort of integers in numpy, in `passes` passes (dedupe_groups): a third of the time
    of DuckDB's hash aggregate over every URL, whose table is also larger.
    Each pass sorts its lower and upper half of the hash range at once, on two threads
    (numpy's sort releases the GIL; a repeated hash is in one half).
    """
    repeated: list[np.ndarray] = []
    with ThreadPoolExecutor(2) as pool:
        for k in range(passes):
            hashes = np.asarray(con.sql(sql.load_sql("url_hashes"), params={
                "pass": k, "passes": passes, "split": split}
            ).fetchnumpy()["url_hash"], dtype=np.uint64)
            low = hashes < np.uint64(2**63)
            repeated += pool.map(_repeated, (hashes[low], hashes[~low]))
    return pa.table({"url_hash": pa.array(np.concatenate(repeated), pa.uint64())})


def _repeated(hashes: np.ndarray) -> np.ndarray:
    """The values that occur more than once in `hashes`, once each."""
    hashes = np.sort(hashes)
    return np.unique(hashes[1:][hashes[1:] == hashes[:-1]])


#: The column clean_utf8 adds: the row held a string that is not valid UTF-8.
INVALID_UTF8 = "_invalid_utf8"


def clean_utf8(files: list[str], folder: Path, all_files: list[str] | None = None) -> list[str]:
    """Copies of the inventory's files under `folder` (same rows, same order, so the same row
    ids) where a row with a top-level string that is not valid UTF-8 has INVALID_UTF8 set:
    its bad strings become readable text (the bytes escaped, for the rejects file) and the
    row is rejected as `invalid_utf8`. pyarrow reads such strings, DuckDB does not.
    `all_files`: the inventory's, whose common folder the copies' folders start below."""
    import pyarrow.parquet as pq

    fs, paths = storage.arrow_files(files)
    every = storage.arrow_files(all_files)[1] if all_files else paths
    base = os.path.commonpath(every) if len(every) > 1 else ""
    cleaned: list[str] = []
    for path in paths:
        # keep the folders below the common base: Hive partition values live there
        rel = os.path.relpath(path, base) if base else os.path.basename(path)
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        source = pq.ParquetFile(fs.open_input_file(path) if fs else path)
        schema = source.schema_arrow.append(pa.field(INVALID_UTF8, pa.bool_()))
        with pq.ParquetWriter(str(target), schema, compression="lz4") as writer:
            for batch in source.iter_batches(batch_size=65_536):
                writer.write_batch(_flag_invalid_utf8(batch, schema))
        cleaned.append(str(target))
    return cleaned


def _flag_invalid_utf8(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    bad = np.zeros(batch.num_rows, dtype=bool)
    columns = []
    for column in batch.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                raw = column.view(pa.large_binary() if pa.types.is_large_string(column.type)
                                  else pa.binary()).to_pylist()
                fixed = []
                for i, value in enumerate(raw):
                    try:
                        fixed.append(None if value is None else value.decode("utf-8"))
                    except UnicodeDecodeError:
                        bad[i] = True
                        fixed.append(value.decode("utf-8", errors="backslashreplace"))
                column = pa.array(fixed, column.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays([*columns, pa.array(bad)], schema=schema)


def register_url_rules(con: duckdb.DuckDBPyConnection) -> None:
    """The URL rules of normalize_inventory on `con`: the UDF check_url and the macro
    normalized_url (sql/normalize_macros.sql), for load and for whoever must spell a URL
    as load does (pipeline.explain); and the UDF url_reject_detail, which says what made a
    rejected URL one (sql/rejected_rows.sql)."""
    con.create_function("check_url", _check_url_batch, ["VARCHAR", "VARCHAR"], "VARCHAR",
                        type="arrow", null_handling="special",  # type: ignore[call-overload]
                        side_effects=False)
    con.create_function("url_reject_detail", _reject_detail_batch,
                        ["VARCHAR", "VARCHAR", "VARCHAR"], "VARCHAR", type="arrow",
                        null_handling="special",  # type: ignore[call-overload]
                        side_effects=False)
    con.execute(sql.load_sql("normalize_macros"))


def _reject_detail_batch(reasons: Any, urls: Any, prefixes: Any) -> Any:
    return pa.array([reject_detail(r, u, p) for r, u, p in zip(
        reasons.to_pylist(), urls.to_pylist(), prefixes.to_pylist(), strict=True)],
        type=pa.string())


def _check_url_batch(urls: Any, prefixes: Any) -> Any:
    prefix_list = prefixes.to_pylist()
    return pa.array([check_url(u, p) for u, p in zip(urls.to_pylist(), prefix_list, strict=True)],
                    type=pa.string())


def _file_rows(uri: str) -> int:
    return int(open_parquet(uri).metadata.num_rows)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
