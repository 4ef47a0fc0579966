"""Projects one measured DAG run (bench/celery.py's JSON) to a larger inventory on W workers.

    .venv/bin/python bench/project.py celery-1M.json --target-rows 1000000000 --workers 10

A model, not a measurement; it is meant to say which stages bound a billion-URL run and
by how much, from task times measured on a small one. What it assumes:

- **Stages.** The task instances are grouped by task id; a stage is mapped when its
  instances have a map index of 0 or more. Stages run one after the other in the DAG's
  order (`DAG_ORDER`: begin, load_groups, normalize, dedupe_parts, dedupe, load,
  diff_partitions, diff, diff_counts, plan_slices, plan_splits, plan_split, plan,
  plan_counts, render beside state, publish, then announce, gc, notify, finish and verify
  beside each other); a task id of neither order is put in a stage of its own where it
  started in the measured run.
- **Fixed cost of a task.** Every task instance pays the same fixed cost (process start,
  imports, S3 connection): the measured run's shortest task (`--overhead` overrides it).
  The rest of its time is work.
- **Scaling.** A stage whose tasks read rows (their XCom `io.rows_read` sums to at least 1%
  of the measured inventory's rows) does work proportional to the rows: its work is
  multiplied by target rows / measured rows. A mapped one is then cut into the number of
  tasks that the pipeline's options give at the target size (below), each taking an equal
  share plus the fixed cost; a single task stays one task, however long. A stage that read
  no rows (counts, JSON files, a footer: O(files) or O(shards)) keeps its measured tasks
  and times, which underestimates publish and plan_counts (they handle every shard: a
  thousand times more at 1B than at 1M). `--fixed TASK` keeps a stage as measured
  whatever it read; a first run's diff is kept by default: it takes load's counts and
  reads no row, though its `io` counts them, and a first run has one diff partition at any
  size (pipeline.diff.partitions_for).
- **Marginal cost** (`--smaller JSON`). Linear scaling from a small run also multiplies
  what a step spends regardless of its rows (DuckDB's start, a few S3 round trips inside
  the step), which the fixed cost of a task does not cover. Given a second run of fewer
  rows whose options were scaled down alike (the same number of tasks a stage), a stage
  that read rows grows instead by its marginal cost: measured work + (work - the smaller
  run's work) / (rows - its rows) x (target - rows); linear scaling where the difference
  is not positive (noise).
- **Task counts at the target.** normalize: target rows / `--load-group-rows`; dedupe:
  target rows / pipeline.load.DEDUPE_PASS_ROWS, at most one per diff partition (a first
  run's: one per section bucket, 64); diff:
  `--diff-partitions` (default: pipeline.diff.partitions_for at the target, in this
  process's memory budget: about 6.1M rows a partition under the default 1.5 GB, 164 at
  1B; an assumption about the workers' memory); plan_split: one per section bucket (64) in
  a first run, else one per diff partition; plan: the planned URLs (the plan tasks' `urls`,
  else their rows read) at the target / `--plan-slice-rows`; render: the rendered `<url>`
  bytes at the target / `--render-batch-bytes` (bytes per URL as measured), doubled while
  more than `--max-map-length` (as plan_counts does), or rendered URLs /
  `--render-batch-urls`;
  another mapped stage: its measured count times the size ratio.
- **Scheduling.** Each of `--workers` workers runs `--slots` tasks at a time (default 1: a
  2-core worker, whose DuckDB uses both cores). Within a stage the tasks are list-scheduled
  longest first on the earliest free slot, and a stage ends when its last task ends; the
  stages beside each other (render and state) share the slots. A task's slot is also
  held for the measured dispatch gap (the mean wait between two tasks of one stage on one
  worker), and between two stages the scheduler's gap is added as measured, as are the
  run's head and tail (its start to the first task's, the last task's end to its end):
  these gaps are taken not to grow with the inventory.
- **Not modelled.** The measured run shared 2 cores between its workers and every Airflow
  part, so its task times are those of about one core each: a dedicated 2-core worker may
  be faster. S3 throughput, the metadata DB and the scheduler under thousands of mapped
  tasks are taken to scale freely.

The output: a table per stage (tasks measured and at the target, seconds per task, the
stage's wall seconds and its share of the critical path), the critical path in minutes,
the sum of all task-seconds and the ideal (that sum over every slot), and a check: the same
schedule over the measured tasks as they were, on the measured run's workers, against the
measured run's wall time. `--json FILE` writes it all.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: The DAG's stages in dependency order (dags/sitemaps_dag.py); a tuple of several ids runs
#: them beside each other. load_groups, normalize, dedupe_parts and dedupe: a split load
#: (absent from older runs).
DAG_ORDER: tuple[tuple[str, ...], ...] = (
    ("rollback",), ("begin",), ("load_groups",), ("normalize",), ("dedupe_parts",),
    ("dedupe",), ("load",),
    ("diff_partitions",), ("diff",), ("diff_counts",), ("plan_slices",), ("plan_splits",),
    ("plan_split",), ("plan",),
    ("plan_counts",), ("render", "state"), ("publish",),
    ("announce", "gc", "notify", "finish", "verify"),
)
#: A stage whose rows read are below this share of the inventory's rows did no row work.
ROWS_SHARE = 0.01
DEFAULTS = {"target_rows": 1_000_000_000, "workers": 10, "slots": 1,
            "load_group_rows": 20_000_000, "plan_slice_rows": 4_000_000,
            "render_batch_bytes": 256 * 1024 * 1024, "max_map_length": 1024}


@dataclass
class Options:
    target_rows: int = DEFAULTS["target_rows"]
    workers: int = DEFAULTS["workers"]
    slots: int = DEFAULTS["slots"]
    load_group_rows: int = DEFAULTS["load_group_rows"]
    #: None: pipeline.diff.partitions_for(target_rows).
    diff_partitions: int | None = None
    plan_slice_rows: int = DEFAULTS["plan_slice_rows"]
    render_batch_bytes: int = DEFAULTS["render_batch_bytes"]
    #: When set, render's task count is rendered URLs / this (not bytes).
    render_batch_urls: int | None = None
    max_map_length: int = DEFAULTS["max_map_length"]
    #: None: the measured run's shortest task.
    overhead: float | None = None
    #: Stages kept as measured; None: diff on a first run.
    fixed: list[str] | None = None


@dataclass
class Stage:
    task: str
    mapped: bool
    measured_tasks: int
    measured_seconds: float  # the sum of its tasks' durations
    rows_read: int
    #: "rows" (scaled by the size ratio) or why it was kept as measured.
    basis: str = ""
    #: Each task's seconds at the target (its slot is held dispatch seconds more).
    task_seconds: list[float] = field(default_factory=list)
    start: float = 0.0
    wall: float = 0.0
    share: float = 0.0
    #: Another stage of its group ended later: this one is not on the critical path.
    beside: bool = False


def load_run(path: Path, index: int = -1) -> dict[str, Any]:
    """One run of a celery.py JSON (a list of runs, one per worker count): the last one."""
    data = json.loads(path.read_text())
    run: dict[str, Any] = data[index] if isinstance(data, list) else data
    return run


def measured_rows(run: dict[str, Any]) -> int:
    return int(run.get("inventory_rows") or run["urls"])


def _done(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in run["tasks"] if t.get("seconds") is not None]


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def groups_of(run: dict[str, Any]) -> list[tuple[str, ...]]:
    """The run's task ids in stages of DAG_ORDER; an unknown id is a stage of its own,
    placed before the first known stage that started after it."""
    tasks = _done(run)
    present = {t["task"] for t in tasks}
    first = {tid: min(_time(t["start"]) for t in tasks if t["task"] == tid) for tid in present}
    groups = [tuple(tid for tid in g if tid in present) for g in DAG_ORDER]
    groups = [g for g in groups if g]
    known = {tid for g in DAG_ORDER for tid in g}
    for tid in sorted(present - known, key=first.__getitem__):
        at = next((i for i, g in enumerate(groups) if min(first[x] for x in g) > first[tid]),
                  len(groups))
        groups.insert(at, (tid,))
    return groups


def first_run(run: dict[str, Any]) -> bool:
    """The measured run published every URL as added (no snapshot to diff against)."""
    counts = (run.get("summary") or {}).get("counts") or {}
    return bool(counts) and not (counts.get("changed") or counts.get("unchanged")
                                 or counts.get("removed"))


def dispatch_seconds(run: dict[str, Any]) -> float:
    """The mean wait between two tasks of one stage on one worker (0 without a pair): the
    scheduler's queueing, now and then a loop of several seconds, not a mapped task's own."""
    waits = []
    by_key: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for t in _done(run):
        start = _time(t["start"])
        by_key.setdefault((t["task"], t["worker"] or ""), []).append((start, start + t["seconds"]))
    for spans in by_key.values():
        spans.sort()
        waits += [max(0.0, b[0] - a[1]) for a, b in zip(spans, spans[1:], strict=False)]
    return statistics.fmean(waits) if waits else 0.0


def stage_gaps(run: dict[str, Any], groups: list[tuple[str, ...]]) -> list[float]:
    """The scheduler's gap before each stage after the first: its first start less the
    previous stage's last end, at least 0."""
    tasks = _done(run)
    spans = []
    for g in groups:
        mine = [t for t in tasks if t["task"] in g]
        spans.append((min(_time(t["start"]) for t in mine),
                      max(_time(t["start"]) + t["seconds"] for t in mine)))
    return [max(0.0, spans[i][0] - spans[i - 1][1]) for i in range(1, len(spans))]


def head_tail_seconds(run: dict[str, Any]) -> float:
    """The run's time outside its tasks: its start to the first task's start, the last
    task's end to its end (the run's wall less its tasks' span)."""
    tasks = _done(run)
    if not run.get("run_seconds") or not tasks:
        return 0.0
    span = (max(_time(t["start"]) + float(t["seconds"]) for t in tasks)
            - min(_time(t["start"]) for t in tasks))
    return max(0.0, float(run["run_seconds"]) - span)


def task_count(stage: Stage, run: dict[str, Any], opts: Options, ratio: float) -> int:
    """How many tasks the mapped stage has at the target size (see the module's doc)."""
    target = opts.target_rows
    tasks = [t for t in _done(run) if t["task"] == stage.task]
    if stage.task == "normalize":
        return max(1, math.ceil(target / opts.load_group_rows))
    if stage.task == "dedupe":  # at most a part per diff partition (a first run's: bucket)
        from pipeline.diffed import DIFFED_BUCKETS
        from pipeline.load import DEDUPE_PASS_ROWS
        cuts = DIFFED_BUCKETS if first_run(run) else opts.diff_partitions or _partitions(target)
        return max(1, min(cuts, math.ceil(target / DEDUPE_PASS_ROWS)))
    if stage.task == "diff":
        if opts.diff_partitions:
            return opts.diff_partitions
        return _partitions(target)
    if stage.task == "plan_split":  # a unit per bucket (a first run's) or diff partition
        from pipeline.diffed import DIFFED_BUCKETS
        return DIFFED_BUCKETS if first_run(run) else opts.diff_partitions or _partitions(target)
    if stage.task == "plan":  # the URLs planned; a plan task's rows read may be more
        urls = sum(int((t.get("counts") or {}).get("urls", 0)) for t in tasks)
        return max(1, math.ceil((urls or stage.rows_read) * ratio / opts.plan_slice_rows))
    if stage.task == "render":
        if opts.render_batch_urls:
            return max(1, math.ceil(stage.rows_read * ratio / opts.render_batch_urls))
        body = sum(int((t.get("counts") or {}).get("bytes", 0)) for t in tasks)
        if not body:
            raise SystemExit("render: the run has no `bytes` of its render tasks (a celery.py "
                             "JSON from before they were kept): pass --render-batch-urls")
        batch_bytes = opts.render_batch_bytes
        while True:  # plan_counts doubles the batches' bytes until they fit max_map_length
            count = max(1, math.ceil(body * ratio / batch_bytes))
            if count <= opts.max_map_length:
                return count
            batch_bytes *= 2
    return max(1, math.ceil(stage.measured_tasks * ratio))


def _partitions(rows: int) -> int:
    from pipeline.diff import partitions_for
    return int(partitions_for(rows))


def _work(tasks: list[dict[str, Any]], tid: str, overhead: float) -> float | None:
    """The stage's measured work: its tasks' seconds less their fixed cost (None: absent)."""
    mine = [float(t["seconds"]) for t in tasks if t["task"] == tid]
    return max(0.0, sum(mine) - overhead * len(mine)) if mine else None


def scale(run: dict[str, Any], opts: Options,
          smaller: dict[str, Any] | None = None) -> tuple[list[list[Stage]], float]:
    """The stages at the target size, in groups that run beside each other; and the fixed
    cost of a task used. With `smaller` (a run of fewer rows, the same options scaled down),
    a stage that read rows grows by its marginal cost between the two runs."""
    tasks = _done(run)
    rows = measured_rows(run)
    ratio = opts.target_rows / rows
    overhead = opts.overhead if opts.overhead is not None else min(t["seconds"] for t in tasks)
    fixed = opts.fixed if opts.fixed is not None else (["diff"] if first_run(run) else [])
    out = []
    for g in groups_of(run):
        group = []
        for tid in g:
            mine = [t for t in tasks if t["task"] == tid]
            durations = [float(t["seconds"]) for t in mine]
            stage = Stage(task=tid, mapped=any(t["map_index"] >= 0 for t in mine),
                          measured_tasks=len(mine), measured_seconds=sum(durations),
                          rows_read=sum(int((t.get("io") or {}).get("rows_read", 0))
                                        for t in mine))
            measured_work = _work(tasks, tid, overhead) or 0.0
            work, basis = measured_work * ratio, "rows"
            small = _work(_done(smaller), tid, overhead) if smaller else None
            if smaller and small is not None and measured_rows(smaller) < rows:
                per_row = (measured_work - small) / (rows - measured_rows(smaller))
                if per_row > 0:  # noise can make it 0 or less: then the linear scaling
                    work = measured_work + per_row * (opts.target_rows - rows)
                    basis = "rows, marginal"
            if tid in fixed:
                stage.basis = "as measured (first run)" if opts.fixed is None else "as measured"
                stage.task_seconds = durations
            elif stage.rows_read < ROWS_SHARE * rows:
                stage.basis = "as measured (no rows)"
                stage.task_seconds = durations
            elif stage.mapped:
                count = task_count(stage, run, opts, ratio)
                stage.basis = basis
                stage.task_seconds = [work / count + overhead] * count
            else:
                stage.basis = basis
                stage.task_seconds = [work + overhead]
            group.append(stage)
        out.append(group)
    return out, overhead


def schedule(groups: list[list[Stage]], slots: int, dispatch: float,
             gaps: list[float]) -> float:
    """List-schedules each group's tasks, longest first, on `slots` slots that all free up
    when the group starts; sets each stage's start, wall and share; returns the critical
    path: the groups' walls plus the gaps between them (gaps[i]: before group i + 1)."""
    now = 0.0
    for i, group in enumerate(groups):
        if i:
            now += gaps[i - 1] if i - 1 < len(gaps) else 0.0
        free = [0.0] * slots  # when each slot frees up, from the group's start
        heapq.heapify(free)
        ends = {s.task: 0.0 for s in group}
        jobs = sorted(((sec, s.task) for s in group for sec in s.task_seconds),
                      key=lambda j: (-j[0], j[1]))
        for sec, tid in jobs:
            at = heapq.heappop(free)
            ends[tid] = max(ends[tid], at + sec)
            heapq.heappush(free, at + sec + dispatch)
        wall = max(ends.values())
        for s in group:
            s.start, s.wall, s.beside = now, ends[s.task], ends[s.task] < wall
        now += wall
    return now


def project(run: dict[str, Any], opts: Options,
            smaller: dict[str, Any] | None = None) -> dict[str, Any]:
    """The projection as a dict (what --json writes)."""
    groups, overhead = scale(run, opts, smaller)
    order = [tuple(s.task for s in g) for g in groups]
    gaps = stage_gaps(run, order)
    dispatch = dispatch_seconds(run)
    head_tail = head_tail_seconds(run)
    critical = schedule(groups, opts.workers * opts.slots, dispatch, gaps) + head_tail
    for s in (s for g in groups for s in g):
        s.share = s.wall / critical if critical else 0.0
    task_sum = sum(sec for g in groups for s in g for sec in s.task_seconds)
    # The check: the measured tasks as they were, on the measured run's workers.
    check = [[Stage(task=s.task, mapped=s.mapped, measured_tasks=s.measured_tasks,
                    measured_seconds=s.measured_seconds, rows_read=s.rows_read,
                    task_seconds=[float(t["seconds"]) for t in _done(run)
                                  if t["task"] == s.task]) for s in g] for g in groups]
    check_path = schedule(check, int(run.get("workers") or 1), dispatch, gaps) + head_tail
    return {
        "measured_rows": measured_rows(run), "measured_workers": run.get("workers"),
        "measured_run_seconds": run.get("run_seconds"), "options": asdict(opts),
        "smaller_rows": measured_rows(smaller) if smaller else None,
        "overhead_seconds": overhead, "dispatch_seconds": dispatch,
        "gap_seconds": sum(gaps), "head_tail_seconds": head_tail, "first_run": first_run(run),
        "stages": [asdict(s) | {"tasks": len(s.task_seconds)} for g in groups for s in g],
        "critical_path_seconds": critical, "task_seconds_sum": task_sum,
        "ideal_seconds": task_sum / (opts.workers * opts.slots),
        "model_at_measured_size_seconds": check_path,
    }


def _seconds(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:,.1f}"


def markdown(p: dict[str, Any]) -> str:
    o = p["options"]
    marginal = (f" (marginal cost from a {p['smaller_rows']:,}-row run)"
                if p["smaller_rows"] else "")
    lines = [f"Projection of a {p['measured_rows']:,}-row run{marginal} to "
             f"{o['target_rows']:,} rows on "
             f"{o['workers']} workers x {o['slots']} slot(s); a task's fixed cost "
             f"{p['overhead_seconds']:.2f} s, dispatch {p['dispatch_seconds']:.2f} s, "
             f"gaps between stages {p['gap_seconds']:.1f} s and the run's head and tail "
             f"{p['head_tail_seconds']:.1f} s (as measured).", "",
             "| stage | tasks (measured → target) | scaled by | s per task | stage wall s | "
             "share |", "| --- | ---: | --- | ---: | ---: | ---: |"]
    for s in p["stages"]:
        per = s["task_seconds"]
        each = (_seconds(per[0]) if len(set(per)) == 1
                else f"{_seconds(min(per))}–{_seconds(max(per))}")
        name = s["task"] + ("[]" if s["mapped"] else "")
        share = "beside" if s["beside"] else f"{s['share']:.1%}"
        lines.append(f"| {name} | {s['measured_tasks']} → {s['tasks']:,} | {s['basis']} | "
                     f"{each} | {_seconds(s['wall'])} | {share} |")
    lines += ["",
              f"critical path: {p['critical_path_seconds'] / 60:,.1f} min "
              f"({p['critical_path_seconds']:,.0f} s, the gaps, head and tail included); "
              f"sum of task-seconds: {p['task_seconds_sum']:,.0f} s; ideal (sum / "
              f"{o['workers'] * o['slots']} slots): {p['ideal_seconds'] / 60:,.1f} min",
              f"check: the model at the measured size, {p['measured_workers']} workers: "
              f"{p['model_at_measured_size_seconds']:,.1f} s; the measured run: "
              f"{p['measured_run_seconds'] or 0:,.1f} s"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a bench/celery.py JSON (its last run is used)")
    p.add_argument("--target-rows", type=int, default=DEFAULTS["target_rows"],
                   help="inventory rows to project to (default 1,000,000,000)")
    p.add_argument("--workers", type=int, default=DEFAULTS["workers"],
                   help="virtual workers (default 10)")
    p.add_argument("--slots", type=int, default=DEFAULTS["slots"],
                   help="tasks a worker runs at a time (default 1: one per 2-core worker)")
    p.add_argument("--load-group-rows", type=int, default=DEFAULTS["load_group_rows"],
                   help="rows per mapped normalize task (default 20,000,000)")
    p.add_argument("--diff-partitions", type=int, default=None,
                   help="diff partitions at the target (default: the pipeline's automatic "
                        "count at that size in this process's memory budget)")
    p.add_argument("--plan-slice-rows", type=int, default=DEFAULTS["plan_slice_rows"],
                   help="URLs per mapped plan task (default 4,000,000)")
    p.add_argument("--render-batch-bytes", type=int, default=DEFAULTS["render_batch_bytes"],
                   help="bytes of <url> lines per mapped render task (default 256 MiB)")
    p.add_argument("--render-batch-urls", type=int, default=None,
                   help="URLs per mapped render task, instead of the bytes")
    p.add_argument("--max-map-length", type=int, default=DEFAULTS["max_map_length"],
                   help="Airflow's [core] max_map_length (default 1024)")
    p.add_argument("--overhead", type=float, default=None,
                   help="a task's fixed seconds (default: the measured run's shortest task)")
    p.add_argument("--fixed", nargs="*", default=None, metavar="TASK",
                   help="stages kept as measured (default: diff on a first run; give the "
                        "flag alone to scale every stage by its io)")
    p.add_argument("--smaller", type=Path, default=None, metavar="JSON",
                   help="a celery.py JSON of fewer rows (its task-count options scaled down "
                        "alike): stages grow by their marginal cost between the two runs")
    p.add_argument("--json", type=Path, help="write the projection as JSON to this file")
    args = p.parse_args(argv)
    opts = Options(target_rows=args.target_rows, workers=args.workers, slots=args.slots,
                   load_group_rows=args.load_group_rows, diff_partitions=args.diff_partitions,
                   plan_slice_rows=args.plan_slice_rows,
                   render_batch_bytes=args.render_batch_bytes,
                   render_batch_urls=args.render_batch_urls,
                   max_map_length=args.max_map_length, overhead=args.overhead,
                   fixed=args.fixed)
    result = project(load_run(args.run), opts,
                     load_run(args.smaller) if args.smaller else None)
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
