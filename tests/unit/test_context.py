"""The run context crosses processes as JSON (the DAG's XCom) and comes back equal."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pipeline.context import GcCounts, PlanCounts, RunContext
from pipeline.settings import Limits, RunOptions
from pipeline.taskio import TaskIO


def _ctx(run_time: datetime | None) -> RunContext:
    opts = RunOptions(inventory="s3://i/", site_url="https://www.example.com/", out="s3://o/",
                      limits=Limits(max_urls=10), run_time=run_time, force=True)
    return RunContext(options=opts, site_url="https://www.example.com/",
                      public_url="https://www.example.com/", out="s3://o/",
                      state="s3://o/_state", work="s3://o/_state/runs/r1", own_work=False,
                      run_time="2026-12-01T03:00:00+00:00", generation="g1", live_etag=None,
                      live_generation=None, snapshot=None, lease=False, lease_owner="g1",
                      warnings=("w",), dry_run=True)


def test_the_context_survives_json() -> None:
    for when in (None, datetime(2026, 12, 1, 3, tzinfo=UTC)):
        ctx = _ctx(when)
        again = RunContext.from_dict(json.loads(json.dumps(ctx.to_dict())))
        assert again == ctx and again.options.limits.max_urls == 10 and again.options.force


def test_results_carry_what_xcom_and_the_summary_carried_before() -> None:
    assert GcCounts(skipped=True).to_dict() == {"skipped": True, "io": TaskIO().to_dict()}
    assert GcCounts(deleted=2).summary() == "gc: deleted 2, deleted_state 0, aborted_uploads 0"
    plan = PlanCounts(shards=3, to_render=2, split=0, merged=1, seconds=0.5,
                      batches=[["a"], ["b"]])
    assert plan.counts() == {"shards": 3, "to_render": 2, "split": 0, "merged": 1,
                             "seconds": 0.5, "batches": 2, "io": TaskIO().to_dict()}
    assert plan.summary() == "plan: 3 shards, 2 to render in 2 batches (0 split, 1 merged)"
