"""The whole pipeline in one process: the steps of `pipeline.steps`, one after the other.

The CLI calls `run`; the DAGs call the same steps one task each, so both
publish the same files for the same inventory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pipeline import hugepages, steps
from pipeline.context import PublishSummary, RunContext
from pipeline.progress import QUIET, Progress
from pipeline.settings import RunOptions
from pipeline.taskio import Meter, TaskIO

__all__ = ["RunOptions", "dry_run", "run"]

log = logging.getLogger(__name__)

#: From this many valid rows, the state is stored beside render; below, the overlap saves
#: nothing to measure, and publish
#: stores it after render, so that a run's storage requests come in one order (which the
#: fault tests replay one by one).
STATE_BESIDE_RENDER_ROWS = 100_000


def run(opts: RunOptions, progress: Progress = QUIET) -> dict[str, Any]:
    """Run every step; returns the run summary (its counts are also in the manifest).

    Each step's result is logged as its `line()`, the line the DAG's task logs. The
    summary's `stage_io` adds up what each stage read and wrote (pipeline.taskio): the rows
    and files its steps counted, the process's bytes while it ran.
    A run of the live generation's own input and options (pipeline.unchanged) runs no
    stage before notify: its summary says `unchanged`.
    """
    started, started_cpu = time.monotonic(), time.process_time()
    hugepages.decline_on_request()
    # begin reads the live generation and, where that tells whether anything can change,
    # every inventory row once (pipeline.unchanged; otherwise load takes the input's
    # identity): a line of its own.
    progress.step("begin")
    ctx = steps.begin(opts)
    progress.done(f"generation {ctx.generation}, live {ctx.live_generation or 'none'}"
                  + (": the inventory's rows and the options are the live generation's"
                     if ctx.unchanged else ""))
    seconds: dict[str, float] = {}
    io: dict[str, TaskIO] = {"begin": ctx.io}
    # Each stage's CPU (user and system, every thread of the process): with its wall time,
    # how many cores the stage kept busy.
    cpu = {"begin": round(time.process_time() - started_cpu, 3)}
    try:
        if ctx.unchanged:
            progress.step("publish")
            published = steps.publish_step(ctx, [])
            io["publish"] = published.io
            log.info("%s", published.line())
            progress.done(f"generation {published.generation} unchanged, still live: the "
                          "inventory's rows and the options are its own")
        else:
            published = _build(ctx, progress, seconds, cpu, io)
        summary = published.to_dict()
        summary["unchanged"] = ctx.unchanged
        if steps.notifies(ctx):
            progress.step("notify")
            with _stage("notify", seconds, cpu, io) as meter:
                notified = steps.notify_step(ctx, published)
                meter.include(notified.io)
            log.info("%s", notified.line())
            summary["notify"] = notified.to_dict()
            progress.done(_notify_line(summary["notify"]))
        progress.step("gc")
        collected = steps.gc_step(ctx)
        io["gc"] = collected.io
        log.info("%s", collected.line())
        summary["gc"] = collected.to_dict()
        progress.done(_gc_line(summary["gc"]))
    finally:
        steps.finish(ctx)
    summary["seconds"] = round(time.monotonic() - started, 3)
    summary["stage_seconds"] = seconds
    summary["stage_cpu_seconds"] = cpu
    summary["stage_io"] = {stage: stage_io.to_dict() for stage, stage_io in io.items()}
    log.info("run: generation %s %s in %.1f s", summary["generation"],
             "published" if summary["published"] else "unchanged", summary["seconds"])
    return summary


@contextlib.contextmanager
def _stage(stage: str, seconds: dict[str, float], cpu: dict[str, float],
           io: dict[str, TaskIO]) -> Iterator[Meter]:
    """Puts the wall seconds within into `seconds[stage]`, the process's CPU seconds (every
    thread) into `cpu[stage]`, and what the stage read and wrote into `io[stage]`: the
    rows and files of the steps given to the meter it yields (`include`), the process's
    bytes within (counted once, though state runs beside render)."""
    started, started_cpu = time.monotonic(), time.process_time()
    meter = Meter()
    try:
        yield meter
    finally:
        seconds[stage] = round(time.monotonic() - started, 3)
        cpu[stage] = round(time.process_time() - started_cpu, 3)
        io[stage] = meter.done()


def _build(ctx: RunContext, progress: Progress, seconds: dict[str, float],
           cpu: dict[str, float], io: dict[str, TaskIO]) -> PublishSummary:
    """load, diff, plan, render, publish; each stage's wall seconds go to `seconds`, its CPU
    seconds to `cpu`, what it read and wrote to `io` (_stage)."""
    with _stage("load", seconds, cpu, io) as meter:
        loaded = steps.load_step(ctx, progress)
        meter.include(loaded.io)
    log.info("%s", loaded.line())
    partitions = steps.diff_partitions(ctx)
    progress.step("diff against the live generation"
                  + (f" ({partitions} partitions)" if partitions > 1 else ""))
    with _stage("diff", seconds, cpu, io) as meter:
        diffed = steps.diff_step(ctx)  # the partitions one after the other, each join bounded
        meter.include(diffed.io)
    log.info("%s", diffed.line())
    c = diffed.counts
    progress.done(f"{c['added']:,} added, {c['changed']:,} changed, {c['removed']:,} removed")
    progress.step("plan shards")
    with _stage("plan", seconds, cpu, io) as meter:
        planned = steps.plan_step(ctx)
        meter.include(planned.io)
    log.info("%s", planned.line())
    progress.done(f"{planned.shards:,} shards, {planned.to_render:,} to write")
    progress.step("render")  # render shows its own line only when it has shards to write
    # The state (the snapshot above all) needs only the plan: it is stored on a thread of
    # its own while render writes the shards, as the DAG's state task runs beside render's.
    with _stage("render", seconds, cpu, io) as meter, \
            ThreadPoolExecutor(1, thread_name_prefix="state") as beside:
        stored = beside.submit(steps.state_step, ctx) \
            if loaded.valid_rows >= STATE_BESIDE_RENDER_ROWS else None
        rendered = steps.render_step(ctx, None, progress=progress)
        meter.include(rendered.io)
        log.info("%s", rendered.line())
        if stored is not None:
            meter.include(stored.result().io)
            log.info("%s", stored.result().line())
    progress.step("publish")
    with _stage("publish", seconds, cpu, io) as meter:
        published = steps.publish_step(ctx, [rendered.uri])
        meter.include(published.io)
    log.info("%s", published.line())
    progress.done(f"generation {published.generation} "
                  + ("live" if published.published else "unchanged, still live"))
    return published


def _gc_line(gc: dict[str, Any]) -> str:
    if gc.get("skipped"):
        return "skipped (--no-gc)"
    return (f"{gc['deleted']:,} output and {gc['deleted_state']:,} state file(s) deleted, "
            f"{gc['aborted_uploads']:,} incomplete upload(s) aborted")


def _notify_line(notify: dict[str, Any]) -> str:
    parts = [f"feed {notify['feed_entries']:,} entries" if "feed_entries" in notify else "",
             "report written" if notify.get("report") else "",
             "unchanged" if notify.get("skipped") == "unchanged" else ""]
    return ", ".join(p for p in parts if p) or "nothing to do"


def dry_run(opts: RunOptions) -> dict[str, Any]:
    """Load, diff and plan; report what a run would change, publishing nothing."""
    hugepages.decline_on_request()
    ctx = steps.begin(dataclasses.replace(opts, check_writable=False))
    try:
        log.info("%s", steps.load_step(ctx).line())  # each step's one line, as run logs it
        log.info("%s", steps.diff_step(ctx).line())
        log.info("%s", steps.plan_step(ctx).line())
        return steps.dry_run_summary(ctx).to_dict()
    finally:
        steps.finish(ctx)
