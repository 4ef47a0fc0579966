"""The whole pipeline in one process: load, diff, plan, render, publish, gc.

The CLI calls `run`; the DAGs call the same stage functions one task each.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pipeline import storage
from pipeline.config import Limits
from pipeline.diff import diff, save_state
from pipeline.errors import TooManyRejects
from pipeline.load import load
from pipeline.plan import plan
from pipeline.progress import QUIET, Progress
from pipeline.publish import (
    DEFAULT_SHRINK_THRESHOLD,
    cross_submission_warning,
    new_generation_id,
    public_join,
    publish,
    read_live,
)
from pipeline.render import render
from pipeline.urls import Site

log = logging.getLogger(__name__)

#: Fail before publishing when more than this share of input rows is rejected.
DEFAULT_MAX_REJECT_SHARE = 0.05


@dataclass
class RunOptions:
    """Everything one run needs; the CLI flags and the DAG's site config map onto it."""

    inventory: str
    site_url: str
    out: str
    public_url: str | None = None
    state: str | None = None
    work: str | None = None
    limits: Limits = field(default_factory=Limits)
    run_id: str | None = None
    run_time: datetime | None = None
    section_depth: int = 1
    allow_shrink: bool = False
    shrink_threshold: float = DEFAULT_SHRINK_THRESHOLD
    max_reject_share: float = DEFAULT_MAX_REJECT_SHARE
    force: bool = False

    @property
    def state_uri(self) -> str:
        """Default: the private `_state/` folder beside the sitemaps (never serve it)."""
        return self.state or storage.join(self.out, "_state")

    @property
    def public(self) -> str:
        return self.public_url or Site.parse(self.site_url).prefix


def check_rejects(input_rows: int, rejected: dict[str, int], max_share: float) -> None:
    """Fails the run when rejects exceed `max_share` of the input."""
    n = sum(rejected.values())
    if input_rows and n / input_rows > max_share:
        detail = ", ".join(f"{k}: {v:,}" for k, v in sorted(rejected.items()))
        raise TooManyRejects(
            f"{n:,} of {input_rows:,} input rows ({n / input_rows:.1%}) were rejected ({detail}), "
            f"more than the {max_share:.0%} allowed; nothing was published; see the rejects "
            "Parquet for the rows, fix the inventory or raise --max-reject-share")


def run(opts: RunOptions, progress: Progress = QUIET) -> dict[str, Any]:
    """Run every stage; returns the run summary (also recorded in the manifest)."""
    started = time.monotonic()
    run_time = (opts.run_time or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    site = Site.parse(opts.site_url)
    warnings = [w for w in [cross_submission_warning(site, opts.public)] if w]
    for w in warnings:
        log.warning("%s", w)
    live = read_live(opts.out)
    generation = new_generation_id(run_time)
    own_work = opts.work is None
    work = opts.work or tempfile.mkdtemp(prefix="sitemaps-work-")
    if not own_work:
        work = storage.join(work, opts.run_id or generation)
    try:
        loaded = load(opts.inventory, opts.site_url, work, section_depth=opts.section_depth,
                      progress=progress)
        check_rejects(loaded.input_rows, loaded.rejected, opts.max_reject_share)
        snapshot = (live.manifest or {}).get("state", {}).get("snapshot")
        diffed = diff(loaded.valid_uri, snapshot, run_time, work)
        planned = plan(diffed.diffed_uri, snapshot, work, opts.limits)
        live_keys = frozenset(s["key"] for s in (live.manifest or {}).get("sitemaps", []))
        rendered = render(planned.planned_uri, planned.shards, opts.out,
                          skip_keys=frozenset() if opts.force else live_keys, progress=progress)
        written = [r for r in rendered if r.written]
        counts = {
            "input_rows": loaded.input_rows,
            "rejected": loaded.rejected,
            "rejected_rows": loaded.rejected_rows,
            "dropped_fields": loaded.field_issues,
            **diffed.counts(),
            "shards_written": len(written),
            "shards_reused": len(rendered) - len(written),
            "shards_removed": len(live_keys - {s.key for s in planned.shards}),
            "shards_split": planned.split,
            "shards_merged": planned.merged,
            "bytes_written": sum(r.gzip_bytes for r in written),
        }
        result = publish(
            opts.out, rendered=rendered, live=live, site=site, public_url=opts.public,
            generation=generation, created=run_time, counts=counts,
            max_sitemaps_per_index=opts.limits.max_sitemaps_per_index,
            save_state=lambda: save_state(planned.planned_uri, work, opts.state_uri, generation),
            allow_shrink=opts.allow_shrink, shrink_threshold=opts.shrink_threshold,
            warnings=warnings)
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)
    manifest = result.manifest
    summary = {
        "generation": result.generation,
        "published": result.published,
        "out": opts.out,
        "root_indexes": [i["url"] for i in manifest["indexes"]],
        "root_index_files": [storage.join(opts.out, i["key"]) for i in manifest["indexes"]],
        "manifest": public_join(opts.out, "manifest.json"),
        "counts": {**counts, "published": sum(s["urls"] for s in manifest["sitemaps"]),
                   "sitemaps": len(manifest["sitemaps"])},
        "seconds": round(time.monotonic() - started, 3),
        "warnings": warnings,
    }
    log.info("run: generation %s %s in %.1f s", result.generation,
             "published" if result.published else "unchanged", summary["seconds"])
    return summary
