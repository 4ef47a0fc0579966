"""The whole pipeline in one process: the steps of `pipeline.steps`, one after the other.

The CLI calls `run`; the DAGs call the same steps one task each, so both
publish the same files for the same inventory.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from pipeline import steps
from pipeline.progress import QUIET, Progress
from pipeline.steps import RunOptions

__all__ = ["RunOptions", "dry_run", "run"]

log = logging.getLogger(__name__)


def run(opts: RunOptions, progress: Progress = QUIET) -> dict[str, Any]:
    """Run every step; returns the run summary (its counts are also in the manifest)."""
    started = time.monotonic()
    ctx = steps.begin(opts)
    try:
        seconds = {"load": steps.load_step(ctx, progress)["seconds"]}
        partitions = steps.diff_partitions(ctx)
        progress.step("diff against the live generation"
                      + (f" ({partitions} partitions)" if partitions > 1 else ""))
        t = time.monotonic()
        diffed = steps.diff_step(ctx)  # the partitions one after the other, each join bounded
        seconds["diff"] = round(time.monotonic() - t, 3)
        progress.done(f"{diffed['added']:,} added, {diffed['changed']:,} changed, "
                      f"{diffed['removed']:,} removed")
        progress.step("plan shards")
        planned = steps.plan_step(ctx)
        progress.done(f"{planned['shards']:,} shards, {planned['to_render']:,} to write")
        seconds["plan"] = planned["seconds"]
        t = time.monotonic()
        progress.step("render")  # render shows its own line only when it has shards to write
        rendered = steps.render_step(ctx, None, progress=progress)
        seconds["render"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        progress.step("publish")
        summary = steps.publish_step(ctx, [rendered["uri"]])
        progress.done(f"generation {summary['generation']} "
                      + ("live" if summary["published"] else "unchanged, still live"))
        seconds["publish"] = round(time.monotonic() - t, 3)
        if steps.notifies(ctx):
            t = time.monotonic()
            progress.step("notify")
            summary["notify"] = steps.notify_step(ctx, summary)
            progress.done(_notify_line(summary["notify"]))
            seconds["notify"] = round(time.monotonic() - t, 3)
        progress.step("gc")
        summary["gc"] = steps.gc_step(ctx)
        progress.done(_gc_line(summary["gc"]))
    finally:
        steps.finish(ctx)
    summary["seconds"] = round(time.monotonic() - started, 3)
    summary["stage_seconds"] = seconds
    log.info("run: generation %s %s in %.1f s", summary["generation"],
             "published" if summary["published"] else "unchanged", summary["seconds"])
    return summary


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
    ctx = steps.begin(dataclasses.replace(opts, check_writable=False))
    try:
        steps.load_step(ctx)
        steps.diff_step(ctx)
        steps.plan_step(ctx)
        return steps.dry_run_summary(ctx)
    finally:
        steps.finish(ctx)
