"""The run as a chain of steps that exchange a run context, URIs and counts.

Each step reads its inputs from URIs recorded in the run context (`pipeline.context`)
and writes its outputs under the run's work prefix, so any process, on any
machine, can run any step: the CLI runs them one after the other
(`pipeline.run`), the DAG runs each as a task and passes the context and counts, as dicts, through
XCom. Nothing but URIs and counts is ever passed between steps.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from pipeline import storage
from pipeline.context import (
    DedupeCounts,
    DiffCounts,
    DryRunReport,
    GcCounts,
    LoadCounts,
    LoadGroupCounts,
    NotifyCounts,
    PlanCounts,
    PlanSliceCounts,
    PlanSplitCounts,
    PublishSummary,
    RenderCounts,
    RunContext,
    StateCounts,
)
from pipeline.diffed import DiffedView
from pipeline.errors import InternalError, InventoryError, PublishConflict, TooManyRejects
from pipeline.extensions import ext_always_empty
from pipeline.layout import INVENTORY_LISTING, LIVE_KEYS, REJECTS_KEY, UNCHANGED_SECTIONS_KEY
from pipeline.manifest import Manifest
from pipeline.parts import Parts
from pipeline.publish import (
    cross_submission_warning,
    missing_files,
    new_generation_id,
    publish,
    read_live,
    repair_hint,
    snapshot_uri,
)
from pipeline.render import RenderedFile
from pipeline.settings import RunOptions, environment
from pipeline.snapshot import StoredState, save_state
from pipeline.state_owner import check_owner, resolve_state
from pipeline.taskio import Meter
from pipeline.urls import Site
from pipeline.w3c import parse_w3c

log = logging.getLogger(__name__)

#: What the state step stored (pipeline.snapshot.StoredState), under the work prefix.
STATE_JSON = "state.json"


def run_work_folder(root: str, run_id: str) -> str:
    """The work folder of run `run_id` below the work root `root`; refuses one that is not
    strictly below it (the end of the run deletes everything in the work folder)."""
    work = storage.join(root, run_id)
    check_below(root, work)
    return work


def check_below(root: str, work: str) -> None:
    """InternalError unless `work` lies strictly below `root` (local paths resolved)."""
    if not storage.is_strictly_below(root, work):
        raise InternalError(f"the work folder {work} is not below the work root {root}: "
                            "nothing was deleted")


def begin(opts: RunOptions) -> RunContext:
    """Reads the live manifest (its version is what the commit will be conditional on).
    Its `io` counts the inventory's footers and, when it takes the input's identity, every
    inventory row; and the live snapshot, which it checks whole when the run will read it
    (not on an unchanged run: then only its size)."""
    meter = Meter()
    environment()  # every SITEMAPS_* variable checked (ConfigError) before any work
    run_time = (opts.run_time or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    site = Site.parse(opts.site_url)
    public = opts.public_url or site.prefix
    from pipeline import preflight

    state = resolve_state(opts.out, opts.state)  # once: the later steps take ctx.state
    preflight.check_run(opts.inventory, opts.out, state, write=opts.check_writable,
                        report_to=opts.report_to)
    if opts.check_writable:  # a dry run (`sitemaps diff`) may read any state
        check_owner(opts.out, state, claim=True)
    generation = new_generation_id(run_time)
    # The lease owner is stable across retries of one run (an Airflow retry of begin
    # must not find itself holding the lease).
    lease_owner = opts.run_id or generation
    if opts.check_conditional_writes:
        storage.open_storage(opts.out).check_conditional_writes()
    if opts.lease_seconds:
        from pipeline import lease

        lease.acquire(opts.out, lease_owner, opts.lease_seconds)
    live = read_live(opts.out)
    if live.manifest and run_time < (live_created := parse_w3c(live.manifest["created"])):
        # A clock behind the live generation's would date this run's changes before what is
        # live already (lastmods going back) and give its generation an id sorting earlier.
        log.warning("begin: this run's time %s is earlier than the live generation %s's (%s); "
                    "the run takes that time instead (check the clock)", run_time.isoformat(),
                    live.generation, live.manifest["created"])
        run_time = live_created
        generation = new_generation_id(run_time)
    snapshot = opts.compare_snapshot or (snapshot_uri(live.manifest, state)
                                         if live.manifest else None)
    # A live shard that is missing (or of another size) is not reused: plan gives it its
    # rows and render uploads it again.
    gone = set(missing_files(storage.open_storage(opts.out), live.manifest)) if live.manifest \
        else set()
    if gone:
        log.warning("begin: %d file(s) of the live generation are missing, e.g. %s; this run "
                    "uploads its shards again", len(gone), min(gone))
    identity, skip_reason, identity_at_load, inventory = _input_identity(
        opts, state, site, public, live.manifest, len(gone), meter)
    if snapshot and not opts.compare_snapshot:
        _check_snapshot(snapshot, live.manifest, live.generation, opts.out, meter,
                        read=skip_reason is not None)
    # Last: nothing after the work folder is made may fail without removing it.
    if opts.work:
        base = opts.work
    else:  # locked while this process lives, so GC removes it only once its run is dead
        from pipeline.gc import make_work_folder

        base = make_work_folder()
    warnings = [w for w in [cross_submission_warning(site, public)] if w]
    for w in warnings:
        log.warning("%s", w)
    ctx = RunContext(
        options=opts, site_url=site.prefix, public_url=public, out=opts.out,
        state=state,
        work=run_work_folder(base, opts.run_id or generation) if opts.work else base,
        own_work=opts.work is None, run_time=run_time.isoformat(), generation=generation,
        live_etag=live.etag, live_generation=live.generation, snapshot=snapshot,
        lease=bool(opts.lease_seconds), lease_owner=lease_owner, warnings=tuple(warnings),
        input_identity=identity, unchanged=skip_reason is None,
        identity_at_load=identity_at_load)
    # The live shard keys go to a work file, not into the context: a 1B-URL site has over
    # 20,000 of them, and the DAG hands the context to every task through XCom.
    try:
        _save(ctx, LIVE_KEYS, sorted(s["key"] for s in (live.manifest["sitemaps"] if live.manifest
                                                         else []) if s["key"] not in gone))
        # the listing too (an S3 inventory may have thousands of files): publish records it
        _save(ctx, INVENTORY_LISTING, inventory)
    except BaseException:
        if ctx.own_work:  # our temp folder: no finish will remove it
            import shutil

            from pipeline.gc import release_work_folder

            shutil.rmtree(base, ignore_errors=True)
            release_work_folder(base)
        raise
    ctx = dataclasses.replace(ctx, io=meter.done())
    log.info("begin: generation %s, live generation %s; %s", generation,
             live.generation or "none", ctx.io.line())
    if ctx.unchanged:
        log.info("begin: the inventory's rows and the options are those of the live generation "
                 "%s: nothing to do (--rebuild does the work anyway)", live.generation)
    elif skip_reason and live.manifest:
        log.info("begin: the work is done: %s", skip_reason)
    return ctx


def _check_snapshot(snapshot: str, live: Manifest | None, generation: str | None, out: str,
                    meter: Meter, *, read: bool) -> None:
    """The live snapshot is what its generation recorded (pipeline.integrity), else
    LiveStateCorrupt: when this run will `read` it, its version and size from a listing,
    or read whole (size, sha256, rows) when they are not those recorded; only its size,
    from a listing, when it will not (an unchanged run loads and diffs nothing)."""
    from pipeline import integrity

    assert live is not None
    expected = (live.get("state_check") or {}).get("snapshot", {})
    what = f"the snapshot of the live generation {generation}"
    recovery = f"nothing was published; restore that file, or {repair_hint(out)}"
    if read:
        rows = integrity.verify_unless_same(snapshot, expected, what, recovery)
        meter.read(rows=rows, files=1 if rows else 0)
    else:
        integrity.verify_size(snapshot, expected, what, recovery)


def _input_identity(opts: RunOptions, state_uri: str, site: Site, public: str,
                    live: Manifest | None, missing: int, meter: Meter
                    ) -> tuple[str | None, str | None, bool, dict[str, Any] | None]:
    """(the input's identity, why the run does the work: None when it can skip it, whether
    load takes the identity instead, the inventory's listing with the rows' sums where begin
    read them). A dry run, or one against another snapshot, always does the work, and
    takes no identity. A listing the live generation's record has (pipeline.unchanged:
    the same files, sizes and versions) gives the rows' sums: no row is read. A run that
    must do the work whatever the identity (pipeline.unchanged.work_regardless: a first
    run, another number of rows, ...) leaves it to load, which takes it from the rows it
    reads: no scan of every row here."""
    from pipeline import tables, unchanged
    from pipeline.load import inventory_rows, list_inventory

    if opts.compare_snapshot or not opts.check_writable:
        return None, "a dry run", False, None
    try:
        listed = list_inventory(opts.inventory)
    except InventoryError:  # load says what is wrong, as it does for a first run
        return None, "the inventory cannot be listed", False, None
    files = [f.uri for f in listed]
    inventory: dict[str, Any] = {"files": unchanged.listing(listed), "row_sums": None}
    live_identity, sums = unchanged.recorded_with_sums(
        state_uri, live["generation"], inventory["files"]) if live else (None, None)
    rows = sums[0] if sums else None
    if live is not None and live_identity is not None and sums is None:
        try:  # from the files' footers: no row is read
            rows = inventory_rows(files)
        except InventoryError:  # load says what is wrong
            rows = None
        meter.read(files=len(files))
    regardless = unchanged.work_regardless(live, live_identity, force=opts.force,
                                           missing_files=missing, rebuild=opts.rebuild, rows=rows)
    if regardless is not None:
        return None, regardless, True, inventory
    if sums is None:
        sums = unchanged.row_sums(files, hive=tables.hive_partitioned(opts.inventory))
        meter.read(rows=rows or 0, files=len(files))  # the identity's scan of every row
        # an unchanged run records this listing with them (publish_step)
        inventory["row_sums"] = list(sums) if sums else None
    else:
        log.info("begin: the inventory's %d file(s) are those the live generation was made "
                 "from (same sizes and versions): no row read", len(files))
    identity = unchanged.identity_of(sums, identity_options(opts, site.prefix, public))
    return identity, unchanged.why_not_skipped(live, live_identity, identity, force=opts.force,
                                              missing_files=missing, rebuild=opts.rebuild,
                                              rows=rows), False, inventory


def identity_options(opts: RunOptions, site_prefix: str, public: str) -> dict[str, Any]:
    """The options that shape the output, as the input's identity holds them."""
    return {"site_url": site_prefix, "public_url": public, "limits": asdict(opts.limits),
            "section_depth": opts.section_depth, "keep_deprecated_tags": opts.keep_deprecated_tags,
            "format": opts.format, "max_reject_share": opts.max_reject_share}


def unchanged_sections(ctx: RunContext) -> dict[str, Any]:
    """The sections load found unchanged (pipeline.unchanged.unchanged_sections): each one's
    rows and live shards; none before load, or for a run begun by an earlier version."""
    found = _work(ctx).read_json_or_none(UNCHANGED_SECTIONS_KEY)
    return found if isinstance(found, dict) else {}


def live_keys(ctx: RunContext) -> set[str]:
    """The shard keys of the generation that was live at begin."""
    return set(_read(ctx, LIVE_KEYS))


def renew_lease(ctx: RunContext) -> None:
    """Long runs renew their lease at each step; PublishConflict if another run took it."""
    if ctx.lease:
        from pipeline import lease

        lease.renew(ctx.out, ctx.lease_owner)


def _work(ctx: RunContext) -> storage.Storage:
    return storage.open_storage(ctx.work)


def _save(ctx: RunContext, name: str, data: Any) -> str:
    _work(ctx).write_bytes(name, json.dumps(data, default=str).encode())
    return _work(ctx).uri(name)


def _read(ctx: RunContext, name: str) -> Any:
    return json.loads(_work(ctx).read_bytes(name))


#: The reject guard's error shows this many reasons, each with REJECT_EXAMPLES rows.
TOP_REJECT_REASONS, REJECT_EXAMPLES = 5, 3


def bad_rejects(input_rows: int, rejected: dict[str, int], max_share: float) -> dict[str, int]:
    """The rejects of bad data, by reason, when they exceed `max_share` of the input; else {}.

    The indexability gate's reasons (GATE_REASONS) do not count: they are the site's own
    signals (404s, redirects, noindex, other canonicals), not bad data.
    """
    from pipeline.load import GATE_REASONS

    bad = {k: v for k, v in rejected.items() if k not in GATE_REASONS}
    n = sum(bad.values())
    return bad if input_rows and n / input_rows > max_share else {}


def refuse_rejects(ctx: RunContext, input_rows: int, bad: dict[str, int]) -> TooManyRejects:
    """The reject guard's error: the rejects are kept where the end of the run does not
    delete them (refused_keep), the top reasons logged with a few rows each, and the
    error names the file."""
    from pipeline.load import reject_examples

    n, max_share = sum(bad.values()), ctx.options.max_reject_share
    store, key = refused_keep(ctx)
    with _work(ctx).local_path(REJECTS_KEY) as path:  # load's, which finish deletes
        store.upload_file(path, key)
    kept = store.uri(key)  # in full: a local path made absolute
    top = sorted(bad, key=lambda r: (-bad[r], r))[:TOP_REJECT_REASONS]
    examples = reject_examples(_work(ctx).uri(REJECTS_KEY), top, REJECT_EXAMPLES)
    for reason in top:
        rows = "; ".join(f"row_id {e['row_id']}: {_shorten(e['url'])}" for e in examples[reason])
        log.warning("load: rejected as %s: %s row(s), e.g. %s", reason, f"{bad[reason]:,}",
                    rows or "(none)")
    detail = ", ".join(f"{r}: {bad[r]:,}" for r in top) + (
        f", and {len(bad) - len(top)} more reason(s)" if len(bad) > len(top) else "")
    return TooManyRejects(
        f"{n:,} of {input_rows:,} input rows ({n / input_rows:.1%}) were rejected ({detail}), "
        f"more than the {max_share:.0%} allowed; nothing was published; the rejected rows "
        f"are in {kept}; fix the inventory or raise --max-reject-share")


def refused_keep(ctx: RunContext) -> tuple[storage.Storage, str]:
    """Where a refused run keeps its rejects: below the state (layout.refused_rejects_key);
    `sitemaps diff`, which writes nothing to the output or the state, in a local temporary
    folder instead (a DAG's dry run, whose work prefix is given, below the state too)."""
    from pipeline.layout import refused_rejects_key

    if ctx.options.check_writable or not ctx.own_work:
        return storage.open_storage(ctx.state), refused_rejects_key(ctx.generation)
    import tempfile

    folder = tempfile.mkdtemp(prefix=f"sitemaps-refused-{ctx.generation}-")
    return storage.open_storage(folder), REJECTS_KEY


def _shorten(url: str | None, at: int = 120) -> str:
    """A URL for one log line: a 2,000-character one cut, an empty or missing one said."""
    if url is None:
        return "(no URL)"
    return repr(url) if len(url) <= at else repr(url[:at]) + f"... ({len(url):,} characters)"


#: Each group's result of the DAG's normalize tasks, `load-NNNNN.json`, with the groups'
#: count (a result of another cut of the files is stale).
LOAD_GROUP_RESULTS = Parts(
    name="load", what="load group", token_field="groups", missing_hint="run them first",
    stale_hint="were normalised for another cut of the files than {count} group(s) "
               "(load_groups ran again?): clear them")
#: Each part's result of the DAG's dedupe tasks, `dedupe-NNNNN.json`, with the parts'
#: count.
DEDUPE_RESULTS = Parts(
    name="dedupe", what="dedupe part", token_field="parts", missing_hint="run them first",
    stale_hint="were found for another cut than {count} part(s) (load_groups ran again?): "
               "clear them")
#: The LoadPlan of a DAG run (load_groups_step), under the work prefix.
LOAD_PLAN_JSON = "load-plan.json"


def _unchanged_load(ctx: RunContext, meter: Meter) -> LoadCounts:
    """An unchanged run (begin) loads nothing: the live generation's counts, no partition."""
    c = _live_counts(ctx)
    return LoadCounts(input_rows=c["input_rows"], valid_rows=c["published"],
                      rejected=c["rejected"], rejected_rows=c["rejected_rows"],
                      not_indexable=c.get("not_indexable", 0),
                      dropped_fields=c["dropped_fields"], seconds=0.0, diff_partitions=0,
                      io=meter.done())


def _load_plan(ctx: RunContext, group_rows: int | None) -> Any:
    """The run's pipeline.load.LoadPlan: how every group of files is read and cut. The
    diff's partitions are chosen from the inventory's rows before load, which cuts the
    rows it writes by them (ValidRows.split)."""
    from pipeline.diff import partitions_for
    from pipeline.load import plan_load
    from pipeline.plan.slices import sample_every

    return plan_load(ctx.options.inventory, ctx.site_url,
                     section_depth=ctx.options.section_depth,
                     keep_deprecated_tags=ctx.options.keep_deprecated_tags,
                     max_line_bytes=ctx.options.limits.body_budget
                     if ctx.options.format == "xml" else None,
                     diff_partitions=lambda rows: ctx.options.diff_partitions or partitions_for(
                         rows, first_run=not ctx.snapshot),
                     bucket_sections=not ctx.snapshot,
                     # a first run's plan cuts its large sections from this sample
                     sample_every=sample_every(ctx.options.plan_slice_rows
                                               or environment().plan_slice_rows),
                     # the rows' hashes also make each section's identity, which the next
                     # run compares with (pipeline.unchanged): not for a dry run
                     row_hashes=ctx.identity_at_load or (
                         ctx.options.check_writable and not ctx.options.compare_snapshot),
                     group_rows=group_rows)


def load_step(ctx: RunContext, progress: Any = None) -> LoadCounts:
    """Loads the inventory in one process (the CLI: every file in one group); its counts
    include `diff_partitions`, the diff's partitions. Its `io`: every inventory row and
    file, and the live snapshot's rows where it counts them by diff partition."""
    meter = Meter()
    renew_lease(ctx)
    if ctx.unchanged:
        return _unchanged_load(ctx, meter)
    from pipeline.load import load_planned
    from pipeline.progress import QUIET

    progress = progress or QUIET
    started = time.monotonic()
    progress.step("list the inventory")
    plan = _load_plan(ctx, None)
    progress.done(f"{len(plan.files)} file(s), {plan.input_rows:,} rows")
    result = load_planned(plan, ctx.work, progress=progress, started=started)
    meter.read(rows=result.input_rows, files=len(result.files))
    return _after_load(ctx, result, meter, progress)


def load_groups_step(ctx: RunContext) -> list[int]:
    """The DAG's first load task: lists the inventory, reads its files' footers and cuts
    them into groups of about `load_group_rows` rows (pipeline.load.LoadPlan, saved for
    the normalize tasks); the groups' numbers, none for an unchanged run."""
    renew_lease(ctx)
    if ctx.unchanged:
        return []
    plan = _load_plan(ctx, ctx.options.load_group_rows or environment().load_group_rows)
    _save(ctx, LOAD_PLAN_JSON, asdict(plan))
    log.info("load: %d file(s), %s rows, in %d group(s) of files", len(plan.files),
             f"{plan.input_rows:,}", len(plan.groups))
    return list(range(len(plan.groups)))


def _read_load_plan(ctx: RunContext) -> Any:
    from pipeline.load import LoadPlan

    return LoadPlan(**_read(ctx, LOAD_PLAN_JSON))


def load_group_step(ctx: RunContext, group: int) -> LoadGroupCounts:
    """Normalises and validates one group of the inventory's files (the DAG's mapped
    normalize task): writes its rows, cut by diff partition, and `load-NNNNN.json`."""
    from pipeline.load import load_group

    meter = Meter()
    plan = _read_load_plan(ctx)
    result = load_group(plan, group, ctx.work)
    meter.read(rows=result.rows, files=result.files)
    LOAD_GROUP_RESULTS.write(_work(ctx), group, len(plan.groups), asdict(result))
    return LoadGroupCounts(group=group, rows=result.rows, files=result.files,
                           seconds=result.seconds, io=meter.done())


def _group_results(ctx: RunContext, plan: Any) -> list[Any]:
    """The normalize tasks' results (pipeline.load.GroupResult), every group's."""
    from pipeline.load import GroupResult

    return [GroupResult(**{k: v for k, v in r.items() if k != "groups"}) for r in
            LOAD_GROUP_RESULTS.gather(_work(ctx), len(plan.groups), len(plan.groups),
                                      where=ctx.work)]


def dedupe_parts_step(ctx: RunContext) -> list[int]:
    """The parts of the duplicate search (LoadPlan.dedupe_parts), 0 .. N-1: what the DAG's
    dedupe task is mapped over (none for an unchanged run)."""
    if ctx.unchanged:
        return []
    return list(range(_read_load_plan(ctx).dedupe_parts))


def dedupe_step(ctx: RunContext, part: int) -> DedupeCounts:
    """Finds the duplicates among the normalised rows of one part of the partitions (the
    DAG's mapped dedupe task): writes them and `dedupe-NNNNN.json`. Its `io`: the URL
    hashes of its own partitions' files."""
    from pipeline.load import dedupe_part

    meter = Meter()
    plan = _read_load_plan(ctx)
    result = dedupe_part(plan, _group_results(ctx, plan), part, plan.dedupe_parts, ctx.work)
    meter.read(rows=result.rows, files=result.files)
    DEDUPE_RESULTS.write(_work(ctx), part, plan.dedupe_parts, asdict(result))
    return DedupeCounts(part=part, rows=result.rows, files=result.files,
                        duplicates=sum(int(c["rows"]) for c in result.counts),
                        seconds=result.seconds, io=meter.done())


def load_combine_step(ctx: RunContext) -> LoadCounts:
    """The DAG's load task after its normalize and dedupe tasks: adds up their counts,
    puts the duplicates and rejects together, applies the reject guard; as load_step
    after its one group and part. Its `io`: the rejected rows it read (every normalised
    row where the inventory has alternates), and the live snapshot's rows where it counts
    them by diff partition."""
    meter = Meter()
    renew_lease(ctx)
    if ctx.unchanged:
        return _unchanged_load(ctx, meter)
    from pipeline.load import DedupeResult, combine_groups

    started = time.monotonic()
    plan = _read_load_plan(ctx)
    groups = _group_results(ctx, plan)
    dedupes = [DedupeResult(**{k: v for k, v in r.items() if k != "parts"}) for r in
               DEDUPE_RESULTS.gather(_work(ctx), plan.dedupe_parts, plan.dedupe_parts,
                                     where=ctx.work)]
    result = combine_groups(plan, groups, dedupes, ctx.work, started=started)
    meter.read(rows=result.rejected_rows, files=len(groups) + len(dedupes))
    if "alternates" in plan.columns:
        meter.read(rows=result.input_rows, files=len(result.normalized_uris))
    return _after_load(ctx, result, meter, None)


def _after_load(ctx: RunContext, result: Any, meter: Meter, progress: Any) -> LoadCounts:
    """load's counts from its LoadResult: the unchanged sections, each diff partition's
    snapshot rows, `load.json`, the reject guard."""
    from pipeline import unchanged
    from pipeline.diff import (
        SNAPSHOT_SPLIT_PARTITIONS,
        previous_partition_rows,
        split_snapshot,
    )
    from pipeline.progress import QUIET

    progress = progress or QUIET
    # The inventory listed again once its rows are read: publish records begin's listing
    # with these rows' sums only when it is still the same. A file rewritten during the
    # load and put back to its old bytes (so its old ETag) later would otherwise match
    # begin's listing while the sums are of the other bytes. (One rewritten and put back
    # both within the load is not seen: no S3 read here says which version it read.)
    listed_after = _listing_now(ctx) if result.row_sums is not None else None
    options = identity_options(ctx.options, ctx.site_url, ctx.public_url)
    identity = unchanged.identity_of(result.row_sums, options) if ctx.identity_at_load else None
    sections = unchanged.section_identities(result.section_sums, result.row_sums, options)
    kept = {} if ctx.options.force or ctx.options.rebuild or not ctx.snapshot else \
        unchanged.unchanged_sections(sections, ctx.state, ctx.live_generation, live_keys(ctx),
                                     ctx.run_time)
    _save(ctx, UNCHANGED_SECTIONS_KEY, kept)
    if kept:
        log.info("load: %d of %d section(s) unchanged since the live generation, %d of %d "
                 "rows: they keep their live shards and snapshot rows", len(kept),
                 len(sections or {}), sum(k["rows"] for k in kept.values()),
                 result.valid_rows)
    partitions = result.split
    started = time.monotonic()
    # Each diff partition's snapshot rows, in one scan: a partition whose rows match them
    # all removes nothing (pipeline.diff). Counted in load's seconds: load's step runs it.
    # With many partitions the scan writes the rows cut by partition, so each diff
    # partition reads its own (split_snapshot).
    previous_split: list[list[str]] | None = None
    if ctx.snapshot and partitions >= SNAPSHOT_SPLIT_PARTITIONS:
        progress.step(f"cut the live snapshot by {partitions} diff partitions")
        previous_split, previous_rows = split_snapshot(ctx.snapshot, partitions, ctx.work,
                                                       unchanged_sections=list(kept))
        progress.done(f"{sum(previous_rows):,} rows")
    else:
        previous_rows = previous_partition_rows(ctx.snapshot, partitions,
                                                unchanged_sections=list(kept))
    if ctx.snapshot:  # one scan of the snapshot's rows (those of unchanged sections left out)
        meter.read(rows=sum(previous_rows), files=1)
    counts = LoadCounts(
        input_rows=result.input_rows, valid_rows=result.valid_rows, rejected=result.rejected,
        rejected_rows=result.rejected_rows, not_indexable=result.not_indexable,
        dropped_fields=result.field_issues,
        seconds=round(result.seconds + time.monotonic() - started, 3),
        diff_partitions=partitions, io=meter.done())
    _save(ctx, "load.json", {**counts.to_dict(), "valid": asdict(result.valid),
                             "rejects_uri": result.rejects_uri,
                             "previous_partition_rows": previous_rows,
                             "previous_split": previous_split, "input_identity": identity,
                             "listed_after": listed_after, "row_sums": result.row_sums,
                             "section_identities": sections,
                             "first_run_sections": result.first_run_sections})
    bad = bad_rejects(result.input_rows, result.rejected, ctx.options.max_reject_share)
    if bad:
        raise refuse_rejects(ctx, result.input_rows, bad)
    return counts


def diff_partitions(ctx: RunContext) -> int:
    """How many hash partitions the diff has (load decided: the run's option, or automatic;
    none for an unchanged run, so that the DAG maps its work tasks over nothing)."""
    if ctx.unchanged:
        return 0
    return int(_read(ctx, "load.json")["diff_partitions"])


#: Each diff partition's result, `diff-NNNNN.json`: its counts and parts, with the number
#: of partitions load chose (a partition diffed for another number is stale).
DIFF_RESULTS = Parts(
    name="diff", what="diff partition", token_field="partitions",
    missing_hint="run them first",
    stale_hint="were diffed in another number of partitions than {count} (load ran "
               "again?): clear them")


def diff_partition_step(ctx: RunContext, partition: int) -> DiffCounts:
    """Diffs one hash partition; writes its parts and `diff-NNNNN.json` (counts and URIs).
    Its `io`: the partition's rows of this run (added, changed or unchanged) and of the
    snapshot (changed, unchanged or removed), each row read once by the join."""
    meter = Meter()
    from pipeline.diff import diff
    from pipeline.diffed import ValidRows

    loaded = _read(ctx, "load.json")
    partitions = int(loaded["diff_partitions"])
    # A load.json of a run begun before these counts existed has none: every partition
    # looks for removed URLs.
    previous_rows = (loaded.get("previous_partition_rows") or [None] * partitions)[partition]
    previous_files = (loaded.get("previous_split") or [None] * partitions)[partition]
    result = diff(ValidRows.from_json(loaded["valid"]),
                  ctx.snapshot, ctx.run_datetime, ctx.work,
                  with_news=ctx.options.format == "xml", partition=partition,
                  partitions=partitions, previous_rows=previous_rows,
                  previous_files=previous_files,
                  unchanged_sections=sorted(unchanged_sections(ctx)),
                  section_stats=loaded.get("first_run_sections"))
    meter.read(rows=result.added + result.changed + result.unchanged,
               files=len(ValidRows.from_json(loaded["valid"]).normalized_files(partition,
                                                                                partitions)))
    if ctx.snapshot:
        meter.read(rows=result.changed + result.unchanged + result.removed,
                   files=len(previous_files) if previous_files else 1)
    counts = DiffCounts(result.counts(), round(result.seconds, 3), partitions, partition,
                        io=meter.done())
    DIFF_RESULTS.write(_work(ctx), partition, partitions, {
        **counts.to_dict(), "diffed_uris": result.diffed_uris,
        "changes_uris": result.changes_uris, "view": result.view})
    return counts


def diff_combine_step(ctx: RunContext) -> DiffCounts:
    """Gathers every partition's `diff-NNNNN.json` into `diff.json`; returns the summed counts.

    Fails, naming them, when partitions are missing (their diff task did not finish).
    """
    meter = Meter()
    renew_lease(ctx)
    from pipeline.diff import DiffResult, combine

    partitions = diff_partitions(ctx)
    parts = DIFF_RESULTS.gather(_work(ctx), partitions, partitions, where=ctx.work)
    result = combine([DiffResult(**{k: v for k, v in d.items()
                                    if k not in ("partition", "partitions", "io")})
                      for d in parts])
    # The rows of the sections left out as unchanged (pipeline.unchanged) are all unchanged.
    result.unchanged += sum(s["rows"] for s in unchanged_sections(ctx).values())
    counts = DiffCounts(result.counts(), round(result.seconds, 3), partitions,
                        io=meter.done())
    _save(ctx, "diff.json", {**counts.to_dict(), "diffed_uris": result.diffed_uris,
                             "changes_uris": result.changes_uris, "view": result.view})
    if partitions > 1:
        log.info("diff: %d partitions: %d added, %d changed, %d unchanged, %d removed (%.1f s "
                 "in all)", partitions, result.added, result.changed, result.unchanged,
                 result.removed, result.seconds)
    return counts


def diff_step(ctx: RunContext) -> DiffCounts:
    """Diffs every partition, one after the other, then combines them (the CLI's way); its
    `io` is the whole stage's, the partitions' rows and files added up."""
    meter = Meter()
    for partition in range(diff_partitions(ctx)):
        part = diff_partition_step(ctx, partition).io
        meter.read(rows=part.rows_read, files=part.files_read)
    return dataclasses.replace(diff_combine_step(ctx), io=meter.done())


def plan_prepare_step(ctx: RunContext, split_tasks: bool = False) -> list[int]:
    """Chooses the plan's slices (`plan-slices.json`); returns their numbers, 0 .. N-1.
    `split_tasks`: the slices are planned by tasks of their own (the DAG's), whose rows are
    split by slice by the split tasks where a slice would read much more than its rows
    (pipeline.plan.slices.prepare)."""
    from pipeline.plan import prepare

    diffed = _read(ctx, "diff.json")
    constants = _read(ctx, "load.json")["valid"].get("constant_columns", [])
    slices = prepare(diffed["diffed_uris"], ctx.snapshot, ctx.work,
                     slice_rows=ctx.options.plan_slice_rows,
                     keeps_shards=not ctx.options.force and bool(live_keys(ctx)),
                     output_format=ctx.options.format,
                     view=DiffedView.from_json(diffed.get("view")), run_time=ctx.run_time,
                     ext_empty=ext_always_empty(constants), split_tasks=split_tasks)
    return list(range(len(slices)))


def plan_split_units(ctx: RunContext) -> list[int]:
    """The numbers of the units that the split tasks are mapped over (plan-slices.json's
    `split_units`): none when every slice reads its own rows without them."""
    from pipeline.plan.slices import read_prepared

    return list(range(len(read_prepared(_work(ctx)).get("split_units") or [])))


def plan_split_step(ctx: RunContext, unit: int) -> PlanSplitCounts:
    """Writes one unit of the diffed rows by plan slice (pipeline.plan.slices.split_input)
    and `plan-split-NNNNN.json`; a retry rewrites both. Its `io`: the unit's rows and files,
    each read once. Nothing when the plan has no unit to split (the DAG still runs one
    plan_split task)."""
    meter = Meter()
    from pipeline.plan.slices import split_input

    started = time.monotonic()
    # None to split (the DAG's one task when the slices read their own rows): nothing read
    rows, files = split_input(ctx.work, unit) if plan_split_units(ctx) else (0, 0)
    meter.read(rows=rows, files=files)
    return PlanSplitCounts(unit=unit, rows=rows, files=files,
                           seconds=round(time.monotonic() - started, 3), io=meter.done())


def plan_slice_step(ctx: RunContext, slice: int) -> PlanSliceCounts:
    """Plans one slice: its part and `plan-slice-NNNNN.json`; a retry rewrites both.
    Its `io`: the rows and files of its input it read (its own rows when they were split by
    slice, else its sections' diffed files)."""
    meter = Meter()
    from pipeline.plan import plan_slice

    result = plan_slice(ctx.work, slice, ctx.options.limits,
                        output_format=ctx.options.format, reuse_keys=_reuse_keys(ctx))
    urls = sum(s.urls for s in result.shards)
    meter.read(rows=result.rows_read, files=result.files_read)
    return PlanSliceCounts(slice=slice, shards=len(result.shards), urls=urls,
                           split=result.split, merged=result.merged,
                           seconds=round(result.seconds, 3), io=meter.done())


def _reuse_keys(ctx: RunContext) -> frozenset[str]:
    """The shard keys plan may keep as published: the live ones, none with --force."""
    return frozenset() if ctx.options.force else frozenset(live_keys(ctx))


def render_batches(shards: Sequence[Any], skip: set[str], batch_bytes: int,
                   max_batches: int | None = None) -> list[list[str]]:
    """The uids of the shards to render (those whose key is not in `skip`), in plan order,
    in batches of about `batch_bytes` of <url> lines; `batch_bytes` doubled until there are
    at most `max_batches` (Airflow's `max_map_length`: a mapped task over more fails)."""
    while True:
        batches: list[list[str]] = []
        size = 0
        for s in shards:
            if s.key in skip:
                continue
            if not batches or size + s.body_bytes > batch_bytes:
                batches.append([])
                size = 0
            batches[-1].append(s.uid)
            size += s.body_bytes
        if max_batches is None or len(batches) <= max(1, max_batches):
            return batches
        batch_bytes *= 2


def plan_combine_step(ctx: RunContext, batch_bytes: int | None = None,
                      max_batches: int | None = None) -> PlanCounts:
    """Gathers the slices into `shards.json` and `plan.json`; returns the counts and the
    render batches (lists of shard uids, by bytes; at most `max_batches`, see
    render_batches). Its `io` counts no row: it reads the slices' results, not their rows."""
    meter = Meter()
    from pipeline.plan import Shard, combine

    result = combine(ctx.work, kept=[Shard(**d) for section in unchanged_sections(ctx).values()
                                     for d in section["shards"]])
    skip = set() if ctx.options.force else live_keys(ctx)
    batches = render_batches(result.shards, skip, batch_bytes or ctx.options.render_batch_bytes,
                             max_batches)
    counts = PlanCounts(shards=len(result.shards), to_render=sum(map(len, batches)),
                        split=result.split, merged=result.merged,
                        seconds=round(result.seconds, 3), batches=batches, io=meter.done())
    # The prepare's token makes a plan made again another plan.json, whose state is stored
    # again (_plan_digest), even when its shards and its seconds come out the same.
    _save(ctx, "plan.json", {**counts.to_dict(), "planned_uris": result.planned_uris,
                             "shards_uri": result.shards_uri, "bounds_uri": result.bounds_uri,
                             "plan_token": result.token})
    return counts


def plan_step(ctx: RunContext, batch_bytes: int | None = None) -> PlanCounts:
    """Plans every slice, one sorted while the one before is cut into shards (plan_slices),
    then combines them (the CLI's way); its `io` is the whole stage's: the URLs planned
    (those of the unchanged sections' kept shards are not read)."""
    meter = Meter()
    from pipeline.plan import plan_slices

    plan_slices(ctx.work, len(plan_prepare_step(ctx)), ctx.options.limits,
                output_format=ctx.options.format, reuse_keys=_reuse_keys(ctx))
    planned = plan_combine_step(ctx, batch_bytes)
    kept = sum(d["urls"] for section in unchanged_sections(ctx).values()
               for d in section["shards"])
    meter.read(rows=sum(s.urls for s in _planned_shards(ctx)) - kept)
    return dataclasses.replace(planned, io=meter.done())


def _planned_shards(ctx: RunContext) -> list[Any]:
    from pipeline.plan import load_shards

    return load_shards(_read(ctx, "plan.json")["shards_uri"])


def render_batch(ctx: RunContext, number: int) -> list[str]:
    """The shard ids of the plan's render batch `number` (plan_combine_step's batches)."""
    batches = _read(ctx, "plan.json")["batches"]
    if not 0 <= number < len(batches):
        raise InternalError(f"render batch {number} is not in the plan ({len(batches)} batches)")
    return list(batches[number])


def render_step(ctx: RunContext, batch: list[str] | None, name: str = "all",
                progress: Any = None) -> RenderCounts:
    """Renders one batch of shards (None: every shard not already published). Its `io`:
    the rows of the shards it wrote, in the planned parts that hold them."""
    meter = Meter()
    renew_lease(ctx)
    from pipeline.plan import load_shards
    from pipeline.progress import QUIET
    from pipeline.render import render

    planned = _read(ctx, "plan.json")
    shards = load_shards(planned["shards_uri"])
    only = set(batch) if batch is not None else None
    files = render(planned["planned_uris"], shards, ctx.out, only=only,
                   skip_keys=frozenset() if ctx.options.force else frozenset(live_keys(ctx)),
                   progress=progress or QUIET)
    uri = _save(ctx, f"render-{name}.json", [asdict(f) for f in files if f.written])
    written = [f for f in files if f.written]
    keys = {f.key for f in written}
    meter.read(rows=sum(f.urls for f in written),
               files=len({s.part for s in shards if s.key in keys}))
    return RenderCounts(uri=uri, written=len(written), urls=sum(f.urls for f in written),
                        bytes=sum(f.bytes for f in written),
                        gzip_bytes=sum(f.gzip_bytes for f in written), name=name,
                        io=meter.done())


def state_step(ctx: RunContext) -> StateCounts:
    """Stores the generation's snapshot, rejects and changes under the state prefix
    (`pipeline.snapshot.save_state`) and records them in `state.json`.

    It needs plan's output only, so it runs beside render: the CLI on a thread of its
    own, the DAG as a task of its own (mostly the snapshot's write, which then does not wait
    for render to end). A run with no shard to render may publish
    nothing (the live generation's content again): its state is left to publish, which
    stores it only for a new generation. Stored for a generation that is never published,
    the files are gc's, as any unpublished generation's state. Its `io`: the snapshot's
    rows, read from the planned parts.
    """
    meter = Meter()
    renew_lease(ctx)
    if ctx.unchanged or ctx.dry_run:
        return StateCounts(deferred="nothing to publish", io=meter.done())
    started = time.monotonic()
    planned = _read(ctx, "plan.json")
    if not planned["to_render"]:
        return StateCounts(deferred="no shard to render", io=meter.done())
    stored = _save_state(ctx)
    seconds = time.monotonic() - started
    rows = stored.check["snapshot"]["rows"]
    meter.read(rows=rows, files=len(planned["planned_uris"]))
    return StateCounts(snapshot_rows=rows, seconds=round(seconds, 3), io=meter.done())


def _save_state(ctx: RunContext) -> StoredState:
    """Stores the state of the plan in `plan.json` and records it in `state.json`, with the
    plan it was made from (a plan made again, on a retry, makes its state again)."""
    from pipeline.plan import load_shards

    diffed, planned = _read(ctx, "diff.json"), _read(ctx, "plan.json")
    stored = save_state(
        planned_uris=planned["planned_uris"], shards=load_shards(planned["shards_uri"]),
        diffed_uris=diffed["diffed_uris"], bounds_uri=planned["bounds_uri"],
        changes_uris=diffed["changes_uris"], work_uri=ctx.work, state_uri=ctx.state,
        generation=ctx.generation, output_format=ctx.options.format,
        diffed_view=DiffedView.from_json(diffed.get("view")), previous_uri=ctx.snapshot,
        unchanged_sections=sorted(unchanged_sections(ctx)), created=ctx.run_datetime)
    _save(ctx, STATE_JSON, {**asdict(stored), "plan": _plan_digest(ctx)})
    return stored


def _stored_state(ctx: RunContext, meter: Meter) -> StoredState:
    """The state the state step stored for this plan, else stored now (publish's way: its
    `meter` then counts the snapshot's rows, as the state step's does)."""
    if _work(ctx).exists(STATE_JSON):
        recorded = _read(ctx, STATE_JSON)
        if recorded.pop("plan", None) == _plan_digest(ctx):
            return StoredState(**recorded)
    stored = _save_state(ctx)
    meter.read(rows=stored.check["snapshot"]["rows"],
               files=len(_read(ctx, "plan.json")["planned_uris"]))
    return stored


def _plan_digest(ctx: RunContext) -> str:
    return hashlib.sha256(_work(ctx).read_bytes("plan.json")).hexdigest()


def publish_step(ctx: RunContext, render_uris: list[str]) -> PublishSummary:
    """Gathers the rendered files, writes indexes and manifest, commits; returns the summary.
    An unchanged run publishes nothing and reports the live generation as a run of the same
    input would (every URL and shard unchanged). Its `io` counts the snapshot's rows when
    it stores the state itself (the state step did not); else no row: it reads the small
    results of the steps before it and writes the indexes and manifests."""
    meter = Meter()
    renew_lease(ctx)
    if ctx.unchanged:
        return dataclasses.replace(_unchanged_summary(ctx), io=meter.done())
    from pipeline import unchanged
    from pipeline.plan import load_shards

    loaded, diffed, planned = _read(ctx, "load.json"), _read(ctx, "diff.json"), _read(ctx, "plan.json")
    written: dict[str, RenderedFile] = {}
    for uri in render_uris:
        root, _, key = uri.rpartition("/")
        for d in json.loads(storage.open_storage(root).read_bytes(key)):
            written[d["key"]] = RenderedFile(**d)
    shards = load_shards(planned["shards_uri"])
    files = [written.get(s.key) or RenderedFile(
        key=s.key, section=s.section, shard=s.shard, urls=s.urls, bytes=s.bytes, gzip_bytes=-1,
        sha256="", lastmod=s.lastmod, written=False) for s in shards]
    was_live = live_keys(ctx)
    missing = [s.key for s in shards if s.key not in written and s.key not in was_live]
    if missing:
        raise InternalError(f"{len(missing)} shard(s) were never rendered, e.g. {missing[0]}")
    counts = {
        "input_rows": loaded["input_rows"], "rejected": loaded["rejected"],
        "rejected_rows": loaded["rejected_rows"], "dropped_fields": loaded["dropped_fields"],
        "not_indexable": loaded.get("not_indexable", 0),
        **{k: diffed[k] for k in ("added", "changed", "unchanged", "removed", "lastmod_clamped",
                                  "news_articles")},
        "shards_written": len(written), "shards_reused": len(shards) - len(written),
        "shards_removed": len(was_live - {s.key for s in shards}),
        "shards_split": planned["split"], "shards_merged": planned["merged"],
        "bytes_written": sum(f.gzip_bytes for f in written.values()),
    }
    live = read_live(ctx.out)
    if live.generation == ctx.generation:
        # A retry of a publish that had committed: report it as published, change nothing.
        assert live.manifest is not None
        return dataclasses.replace(_summary(ctx, live.manifest, True, counts), io=meter.done())
    if live.etag != ctx.live_etag:
        # Published since begin: the conditional write would refuse, and the shards this
        # run reused may be gone from the new live manifest.
        raise PublishConflict(
            f"another generation was published since this run started ({live.generation} is "
            f"live in {ctx.out}); the other run's generation stays live")
    result = publish(
        ctx.out, rendered=files, live=live, site=Site.parse(ctx.site_url),
        public_url=ctx.public_url, generation=ctx.generation,
        created=ctx.run_datetime, counts=counts,
        max_sitemaps_per_index=ctx.options.limits.max_sitemaps_per_index,
        save_state=lambda: _stored_state(ctx, meter),
        allow_shrink=ctx.options.allow_shrink, shrink_threshold=ctx.options.shrink_threshold,
        warnings=list(ctx.warnings))
    # The live generation, new or kept, is what this input makes: the next run of the same
    # input skips the work.
    identity = loaded.get("input_identity") if ctx.identity_at_load else ctx.input_identity
    # and each section's, with its shards: the next run keeps those of its unchanged sections
    sections = unchanged.sections_to_record(loaded.get("section_identities"),
                                            [asdict(s) for s in shards])
    # and the listing those rows' sums were taken from: the next run of these very files
    # reads no row (pipeline.unchanged)
    listed = _work(ctx).read_json_or_none(INVENTORY_LISTING) or {}
    sums = loaded.get("row_sums")
    inventory = unchanged.inventory_record(listed.get("files"), loaded.get("listed_after"),
                                           tuple(sums) if sums else None)
    unchanged.record(ctx.state, result.manifest["generation"], identity, sections, ctx.run_time,
                     inventory)
    return dataclasses.replace(_summary(ctx, result.manifest, result.published, counts),
                               io=meter.done())


def _still_live(ctx: RunContext) -> Manifest:
    """The live manifest of an unchanged run: the one begin found, or PublishConflict."""
    live = read_live(ctx.out).manifest
    if live is None or live["generation"] != ctx.live_generation:
        raise PublishConflict(
            f"another generation was published in {ctx.out} since this run started (it found "
            f"{ctx.live_generation} live, unchanged); the other run's generation stays live")
    return live


def _live_counts(ctx: RunContext) -> dict[str, Any]:
    live = _still_live(ctx)
    return {**live["counts"], "published": sum(s["urls"] for s in live["sitemaps"])}


def _listing_now(ctx: RunContext) -> list[list[Any]] | None:
    """The inventory's listing as it is now (pipeline.unchanged.listing); None when it
    cannot be listed (then no listing is recorded: the next run reads the rows)."""
    from pipeline import unchanged
    from pipeline.load import list_inventory

    try:
        return unchanged.listing(list_inventory(ctx.options.inventory))
    except InventoryError:
        return None


def _unchanged_summary(ctx: RunContext) -> PublishSummary:
    from pipeline import unchanged

    live = _still_live(ctx)
    listed = _work(ctx).read_json_or_none(INVENTORY_LISTING) or {}
    # begin read the rows of a new listing: recorded, the next run need not
    inventory = unchanged.inventory_record(
        listed.get("files"), _listing_now(ctx),
        tuple(listed["row_sums"])) if listed.get("row_sums") else None
    if inventory is not None:
        unchanged.record_listing(ctx.state, live["generation"], inventory)
    c = live["counts"]
    counts = {
        **{k: c[k] for k in ("input_rows", "rejected", "rejected_rows", "dropped_fields")},
        "not_indexable": c.get("not_indexable", 0),
        "added": 0, "changed": 0, "removed": 0,
        "unchanged": sum(s["urls"] for s in live["sitemaps"]),
        "lastmod_clamped": 0, "news_articles": 0,
        "shards_written": 0, "shards_reused": len(live["sitemaps"]), "shards_removed": 0,
        "shards_split": 0, "shards_merged": 0, "bytes_written": 0,
    }
    return _summary(ctx, live, False, counts)


def _summary(ctx: RunContext, m: Manifest, published: bool,
             counts: dict[str, Any]) -> PublishSummary:
    return PublishSummary(
        generation=m["generation"], published=published, out=ctx.out,
        root_indexes=[i["url"] for i in m["indexes"]],
        root_index_files=[storage.join(ctx.out, i["key"]) for i in m["indexes"]],
        counts={**counts, "published": sum(s["urls"] for s in m["sitemaps"]),
                "sitemaps": len(m["sitemaps"])},
        warnings=list(ctx.warnings))


def gc_step(ctx: RunContext, dry_run: bool = False) -> GcCounts:
    """Deletes files no kept generation references (see pipeline.gc); its `io` counts no
    row (it lists and reads manifests)."""
    meter = Meter()
    from pipeline.gc import gc

    if ctx.options.gc_grace_hours is None:
        return GcCounts(skipped=True, io=meter.done())
    result = gc(ctx.out, ctx.state, keep=ctx.options.keep_generations,
                grace_hours=ctx.options.gc_grace_hours, dry_run=dry_run)
    return GcCounts(deleted=len(result.deleted), deleted_state=len(result.deleted_state),
                    aborted_uploads=result.aborted_uploads, io=meter.done())


def notifies(ctx: RunContext) -> bool:
    """Whether the run has anything to notify: a feed, a report or IndexNow."""
    return bool(ctx.options.feed_days or ctx.options.report or ctx.options.indexnow_key)


def notify_step(ctx: RunContext, summary: PublishSummary) -> NotifyCounts:
    """After publish: the feed, the run report, IndexNow, as the run's options say. Its
    `io`: a report it wrote reads the live snapshot's footer (one of an earlier version,
    without the freshness there, its rows' sections and lastmods)."""
    meter = Meter()
    from pipeline.notify import notify_step as notify

    counts = notify(ctx, summary.to_dict(), indexnow_key=ctx.options.indexnow_key,
                    indexnow_endpoint=ctx.options.indexnow_endpoint,
                    key_location=ctx.options.indexnow_key_location,
                    feed_days=ctx.options.feed_days, report=ctx.options.report, meter=meter)
    return NotifyCounts(counts, io=meter.done())


def dry_run_summary(ctx: RunContext) -> DryRunReport:
    """What a run would publish, from the load, diff and plan results; writes nothing live."""
    from pipeline.plan import load_shards

    loaded, diffed, planned = _read(ctx, "load.json"), _read(ctx, "diff.json"), _read(ctx, "plan.json")
    shards = load_shards(planned["shards_uri"])
    live = live_keys(ctx)
    keys = {s.key for s in shards}
    return DryRunReport(
        live_generation=ctx.live_generation,
        counts={
            "input_rows": loaded["input_rows"], "rejected": loaded["rejected"],
            "rejected_rows": loaded["rejected_rows"], "published": sum(s.urls for s in shards),
            "not_indexable": loaded.get("not_indexable", 0),
            **{k: diffed[k] for k in ("added", "changed", "unchanged", "removed",
                                      "lastmod_clamped")},
            "sitemaps": len(shards), "shards_to_write": len(keys - live),
            "shards_reused": len(keys & live), "shards_removed": len(live - keys),
        },
        changes_uris=diffed["changes_uris"])


def finish(ctx: RunContext) -> None:
    """Removes the run's work files (they are only intermediate) and gives the lease back."""
    if ctx.lease:
        from pipeline import lease

        lease.release(ctx.out, ctx.lease_owner)
    work = _work(ctx)
    if ctx.own_work and work.local_dir is not None:
        import shutil

        from pipeline.gc import release_work_folder

        shutil.rmtree(work.local_dir, ignore_errors=True)
        release_work_folder(str(work.local_dir))
    else:
        check_below(ctx.options.work or "", ctx.work)
        work.delete([o.key for o in work.list("")])
