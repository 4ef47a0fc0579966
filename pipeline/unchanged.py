"""An unchanged run: the same inventory rows and options as the live generation's.

Such a run would publish the very files that are live, so it stops after begin: no load,
diff, plan, render or publish, no new generation (the common nightly case of an inventory
that did not change costs a scan of it instead of a build).

The input's identity is a digest of:
- the inventory's rows: their count and two sums over a 64-bit hash of each whole row, of
  the hashes and of a hash of each (changes of rows whose hashes happen to cancel out in
  one sum are told apart by the other). A sum, not an order: the same rows in another
  order or another file layout are the same input (and publish the same rows: dedupe's
  tie rule goes by content, not by order, sql/dedupe_rows.sql); a sum, not an XOR: two
  equal rows added do not cancel out;
- the options that shape the output (site and public URL, limits, section depth,
  deprecated tags, format, the reject guard) and the renderer's version.

Every publish (of a new generation, or of none because nothing changed) records the
identity with the live generation's id in the state (INPUT_IDENTITY_KEY); the next run
compares its own with it. A rollback or another run's publish changes the live
generation, and the record no longer applies.

The record also keeps the inventory's listing (each file's URI, size and version: an S3
object's ETag, a local file's inode, mtime and ctime) with the rows' sums that were taken
from those very files. A run that lists the same files, each of the same size and version,
has the same rows: begin takes their sums from the record and reads no row (an unchanged
nightly costs one listing, O(files)). A listing that differs in anything (a file added,
removed, rewritten, touched, copied into its place) decides nothing: begin scans the rows
as below, and an unchanged run records the new listing with the sums it found, so the next
run decides from the listing again.

begin takes the identity (a scan of every inventory row) only
where it decides something: when nothing else already says the run must do the work
(`work_regardless`: no live generation, no identity recorded for it, --force, --rebuild,
missing files, clamped lastmods, or another number of rows than the live generation's input).
Otherwise load takes it in the pass that reads every row anyway (`row_hash_column`,
sql/classified_counts.sql: each row's hash written beside it and summed once written),
from the very rows it loads.

A run is unchanged only when nothing live depends on the clock as well: no news (an
article leaves the news sitemaps two days after its publication, and one dated ahead
comes in later) and no lastmod clamped to the run's time (a future lastmod that comes
true later). `--force` and `--rebuild` never skip.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from importlib import metadata
from typing import Any

import duckdb

from pipeline import sql, storage
from pipeline.layout import INPUT_IDENTITY_KEY
from pipeline.manifest import Manifest
from pipeline.shards import Shard
from pipeline.sitemap_xml import FORMAT_VERSION

log = logging.getLogger(__name__)



def _version() -> str:
    try:
        return metadata.version("sitemap-pipeline")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "source"


#: load's column of each input row's hash (row_hash_column), summed by
#: sql/classified_counts.sql (whose totals are row_sums' numbers).
ROW_HASH_COLUMN = "_input_row_hash"


def row_hash_column(columns: Sequence[str]) -> str:
    """SQL of ROW_HASH_COLUMN over a view of the inventory's `columns` (in file order, Hive
    partition columns included): the hash of the row value that row_sums hashes."""
    row = "row(" + ", ".join('"' + c.replace('"', '""') + '"' for c in columns) + ")"
    return f"hash({row}) AS {ROW_HASH_COLUMN}"


def row_sums(files: Sequence[str], *, hive: bool = True
             ) -> tuple[int, int, int, list[str]] | None:
    """(rows, sum of hash(row), sum of hash(hash(row)), column names) of the inventory
    files (`hive`: with their Hive folders' columns, as load reads them); None when DuckDB
    cannot read them as they are (invalid UTF-8: the load cleans a copy)."""
    from pipeline.parquet import register_parquet

    con = sql.connect()
    try:
        register_parquet(con, "inventory_rows", list(files), hive=hive, every_schema=True)
        # hash(t): the whole row as one struct value, Hive partition columns included.
        columns = con.sql("SELECT * FROM inventory_rows LIMIT 0").columns
        rows, first, second = sql.first_row(
            con, "SELECT count(*) AS n, coalesce(sum(h::HUGEINT), 0) AS a, "
                 "coalesce(sum(hash(h)::HUGEINT), 0) AS b "
                 "FROM (SELECT hash(t) AS h FROM inventory_rows t)").values()
    except duckdb.Error as exc:
        # load reports the inventory's problem (or cleans the rows) in its own words
        log.debug("begin: no identity of the inventory (%s)", " ".join(str(exc).split())[:200])
        return None
    finally:
        con.close()
    return int(rows), int(first), int(second), list(columns)


def input_identity(files: Sequence[str], options: dict[str, Any]) -> str | None:
    """The digest of the inventory's rows and the options. None when the rows are
    unreadable as they are, or when the output depends on the clock whatever the rows:
    an inventory with news (an article dated ahead comes into the news sitemaps later)."""
    return identity_of(row_sums(files), options)


def identity_of(sums: tuple[int, int, int, list[str]] | None, options: dict[str, Any]
                ) -> str | None:
    """input_identity from the rows' sums (row_sums, or load's: the same numbers)."""
    if sums is None or "news" in sums[3]:
        return None
    return _digest(rows=list(sums), options=options)


def _digest(**payload: Any) -> str:
    """A digest of `payload` with the format's and the renderer's version."""
    payload = {**payload, "format": FORMAT_VERSION, "version": _version()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()
                          ).hexdigest()[:32]


Sums = tuple[int, int, int, list[str]]


def listing(files: Sequence[storage.ListedFile]) -> list[list[Any]]:
    """The inventory's listing as the record keeps it: [uri, size, version] per file."""
    return [[f.uri, f.size, f.version] for f in files]


def inventory_record(files: list[list[Any]] | None, listed_after: list[list[Any]] | None,
                     sums: Sums | None) -> dict[str, Any] | None:
    """What `record` keeps of the inventory: its listing `files` (`listing`, begin's,
    before the rows were read) with the rows' `sums`; None unless the listing taken once
    they were read (`listed_after`) is the same: the sums of a file added, removed or
    rewritten meanwhile are not those of begin's listing (and that file, put back to its
    old bytes later, has its old ETag again)."""
    if files is None or sums is None or listed_after is None:
        return None
    if files != listed_after:
        return None
    return {"files": files, "row_sums": list(sums)}


def record(state_uri: str, generation: str, identity: str | None,
           sections: dict[str, Any] | None = None, run_time: str | None = None,
           inventory: dict[str, Any] | None = None) -> None:
    """Note that `identity` is the input of the live `generation`, `sections` (each
    section's identity and shards, `sections_to_record`) its sections' made at `run_time`,
    and `inventory` (`inventory_record`) the listing its rows' sums come from (nothing when
    neither identity nor sections are known)."""
    if identity is None and not sections:
        return
    storage.open_storage(state_uri).write_bytes(INPUT_IDENTITY_KEY, json.dumps(
        {"generation": generation, "identity": identity, "sections": sections or {},
         "run_time": run_time, "inventory": inventory}, sort_keys=True).encode())


def record_listing(state_uri: str, generation: str, inventory: dict[str, Any]) -> None:
    """An unchanged run's new listing of the same rows (`inventory_record`) into the live
    `generation`'s record, the rest of it kept."""
    rec = _record(state_uri, generation)
    if rec is None or rec.get("inventory") == inventory:
        return
    storage.open_storage(state_uri).write_bytes(INPUT_IDENTITY_KEY, json.dumps(
        {**rec, "inventory": inventory}, sort_keys=True).encode())


def recorded_with_sums(state_uri: str, generation: str | None, files: list[list[Any]]
                       ) -> tuple[str | None, Sums | None]:
    """(`recorded`'s identity, the rows' sums recorded with it when the inventory's listing
    is `files` (`listing`): the same files, sizes and versions hold the same rows), from
    one read of the record; the sums None otherwise, or when the record has no listing."""
    rec = _record(state_uri, generation) or {}
    identity = rec.get("identity") if isinstance(rec.get("identity"), str) else None
    inventory = rec.get("inventory")
    if not isinstance(inventory, dict) or inventory.get("files") != files:
        return identity, None
    sums = inventory.get("row_sums")
    if not (isinstance(sums, list) and len(sums) == 4 and isinstance(sums[3], list)):
        return identity, None
    return identity, (int(sums[0]), int(sums[1]), int(sums[2]), [str(c) for c in sums[3]])


def _record(state_uri: str, generation: str | None) -> dict[str, Any] | None:
    if generation is None:
        return None
    try:
        rec = storage.open_storage(state_uri).read_json_or_none(INPUT_IDENTITY_KEY)
    except ValueError as e:  # torn (a full disk, a cut copy): only the skip is lost
        log.warning("%s: cannot read it (%s): the run does the full work and writes it again",
                    storage.join(state_uri, INPUT_IDENTITY_KEY), e)
        return None
    if not isinstance(rec, dict) or rec.get("generation") != generation:
        return None
    return rec


def recorded(state_uri: str, generation: str | None) -> str | None:
    """The identity recorded for the live `generation`, if any."""
    identity = (_record(state_uri, generation) or {}).get("identity")
    return identity if isinstance(identity, str) else None


# Unchanged sections -------------------------------------------------------------------
#
# A run whose inventory changed in a few sections does the work only for those. A section
# is unchanged when its rows (those that publish in it and its duplicates) are the very
# rows of the live generation's, by the same sums of row hashes as the whole input's
# identity (its rows that publish and its duplicates apart), under the same options and
# version, and it has no lastmod after either run's time (one is clamped to the run's
# time). The rows of an unchanged section then make the same diffed rows (all unchanged,
# with the live snapshot's lastmod, first seen and last changed times) and plan gives them
# the same shards (planning its own output is a fixed point), all of them live: the diff
# and plan leave the section out, its live shards are kept as they are, and the snapshot
# takes its rows from the live one. An inventory with news has no section identities (the
# news sitemaps depend on the clock), nor does one whose rows load had to clean.


def sums_by_section(groups: Sequence[dict[str, Any]], slugs: dict[str, str]
                    ) -> list[tuple[str, int, int, int, str | None]]:
    """Each section's rows, two sums of their hashes and newest lastmod, from load's counts
    by reject reason and path segments (sql/classified_counts.sql): the rows that passed the
    checks (to publish, or duplicates), the duplicates' hashes counted hashed once more; the
    path segments named as sql/section_slugs.sql names them (`slugs`: none is 'root', as
    sql/valid_rows.sql has it)."""
    found: dict[str, list[Any]] = {}
    for g in groups:
        if g["reason"] not in (None, "duplicate"):
            continue
        acc = found.setdefault(slugs.get(g["raw_section"], "root"), [0, 0, 0, None])
        newest = g["newest"]
        if newest is not None and (acc[3] is None or newest > acc[3]):
            acc[3] = newest
        if g["reason"] is None:
            acc[0] += int(g["rows"])
            acc[1] += int(g["hash_sum"])
            acc[2] += int(g["hash_hash_sum"])
        else:
            acc[1] += int(g["tagged_hash_sum"])
            acc[2] += int(g["tagged_hash_hash_sum"])
    return [(section, rows, first, second, None if newest is None else newest.isoformat())
            for section, (rows, first, second, newest) in sorted(found.items())]


def section_identities(section_sums: Sequence[Sequence[Any]] | None,
                       row_sums: tuple[int, int, int, list[str]] | None,
                       options: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """Each section's identity (digest, rows, newest lastmod) from load's section sums
    (LoadResult.section_sums); None where sections cannot be told unchanged."""
    if section_sums is None or row_sums is None or "news" in row_sums[3]:
        return None
    identities = {}
    for section, rows, first, second, newest in section_sums:
        digest = _digest(section=section, rows=[rows, first, second], columns=row_sums[3],
                         options=options)
        identities[section] = {"digest": digest, "rows": rows, "newest": newest}
    return identities


def sections_to_record(identities: dict[str, dict[str, Any]] | None,
                       shards: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What `record` keeps of each section with an identity: its digest and its shards
    (as the plan gives them, kept as published: no part)."""
    if not identities:
        return {}
    by_section: dict[str, list[dict[str, Any]]] = {}
    for shard in shards:
        by_section.setdefault(shard["section"], []).append(
            {**shard, "part": None, "row_start": None, "planned_shard": None,
             "changed_rows": 0})
    return {section: {"digest": ident["digest"], "shards": by_section[section]}
            for section, ident in identities.items() if section in by_section}


def unchanged_sections(identities: dict[str, dict[str, Any]] | None, state_uri: str,
                       live_generation: str | None, live_keys: set[str], run_time: str
                       ) -> dict[str, dict[str, Any]]:
    """The sections of this run that are those of the live generation (see above), each
    with its rows and its live shards; none without a record for the live generation."""
    rec = _record(state_uri, live_generation)
    if not identities or rec is None or not isinstance(rec.get("sections"), dict):
        return {}
    live_time = rec.get("run_time")
    if not isinstance(live_time, str):
        return {}
    # A lastmod up to both runs' times is published as it is by both.
    limit = min(datetime.fromisoformat(run_time), datetime.fromisoformat(live_time))
    found: dict[str, dict[str, Any]] = {}
    for section, ident in identities.items():
        live = rec["sections"].get(section)
        if (not isinstance(live, dict) or live.get("digest") != ident["digest"]
                or not ident["rows"]):
            continue
        if ident["newest"] is not None and datetime.fromisoformat(ident["newest"]) > limit:
            continue
        try:
            keys = [Shard(**s).key for s in live.get("shards") or []]
        except TypeError:  # recorded by a version of other shard fields
            continue
        # a live file missing: plan gives its rows again, and render uploads it
        if not keys or any(key not in live_keys for key in keys):
            continue
        found[section] = {"rows": ident["rows"], "shards": live["shards"]}
    return found


def work_regardless(live: Manifest | None, live_identity: str | None, *, force: bool,
                    missing_files: int, rebuild: bool = False, rows: int | None = None
                    ) -> str | None:
    """Why this run must do the work whatever its input's identity (begin then takes none:
    load does); None when only the identity can tell. `live_identity`: the identity recorded
    for the live generation (`recorded`); `rows`: the inventory's rows (its files' footers),
    None if unknown."""
    if force:
        return "--force"
    if rebuild:
        return "--rebuild"
    if live is None:
        return "no live generation"
    if live_identity is None:
        return "no input identity is recorded for the live generation"
    live_rows = (live.get("counts") or {}).get("input_rows")
    if rows is not None and live_rows is not None and rows != live_rows:
        return f"the inventory has {rows:,} rows, the live generation's input {live_rows:,}"
    if missing_files:
        return f"{missing_files} live file(s) are missing"
    if (live.get("counts") or {}).get("lastmod_clamped"):
        return "future lastmods were clamped to the last run's time"
    return None


def why_not_skipped(live: Manifest | None, live_identity: str | None, identity: str | None, *,
                    force: bool, missing_files: int, rebuild: bool = False,
                    rows: int | None = None) -> str | None:
    """Why this run must do the work; None when it can stop (the input is unchanged)."""
    reason = work_regardless(live, live_identity, force=force, missing_files=missing_files,
                             rebuild=rebuild, rows=rows)
    if reason is not None:
        return reason
    if identity is None:
        return "the inventory has news, or its rows need cleaning"
    if live_identity != identity:
        return "the inventory or the options changed"
    return None
