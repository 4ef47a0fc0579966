"""bench/project.py: the scaling of measured task times and their list scheduling.

A hand-made celery.py-like run of 1,000 rows, projected to 10,000 (a ratio of 10) on two
slots; every expected figure is worked out in the comments.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

PROJECT = Path(__file__).resolve().parents[2] / "bench" / "project.py"


@pytest.fixture(scope="module")
def project() -> Any:
    spec = importlib.util.spec_from_file_location("bench_project", PROJECT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _ti(task: str, start: float, seconds: float, rows: int | None = 0, *, map_index: int = -1,
        worker: str | None = None, counts: dict[str, int] | None = None) -> dict[str, Any]:
    return {"task": task, "map_index": map_index, "state": "success",
            "worker": worker or f"{task}-{map_index}",  # one worker each: no dispatch wait
            "try": 1, "seconds": seconds, "start": f"2026-12-07T00:00:{start:09.6f}Z",
            "io": None if rows is None else {"rows_read": rows, "files_read": 0},
            "counts": counts or {}}


#: begin 0-1, load 1-12, diff 12-14, plan 15-20 (1 s gap before it), render 20-24 beside
#: state 20-24, publish 24-25; the run 27 s: 2 s of head and tail.
RUN: dict[str, Any] = {
    "workers": 2, "state": "success", "run_seconds": 27.0, "urls": 1000,
    "inventory_rows": 1000,
    "summary": {"counts": {"added": 1000, "changed": 0, "unchanged": 0, "removed": 0}},
    "tasks": [
        _ti("begin", 0, 1.0),  # the shortest task: the fixed cost, 1 s
        _ti("load", 1, 11.0, 1000),
        _ti("diff", 12, 2.0, 1000, map_index=0),
        _ti("plan", 15, 3.0, 400, map_index=0),
        _ti("plan", 15, 5.0, 600, map_index=1),
        _ti("render", 20, 2.0, 300, map_index=0, counts={"bytes": 1000}),
        _ti("render", 20, 2.0, 300, map_index=1, counts={"bytes": 1000}),
        _ti("render", 22, 2.0, 400, map_index=2, counts={"bytes": 1000}),
        _ti("state", 20, 4.0, 1000),
        _ti("publish", 24, 1.0, None),
    ],
}


def _opts(project: Any, **kw: Any) -> Any:
    return project.Options(**{"target_rows": 10_000, "workers": 2, "slots": 1,
                              "plan_slice_rows": 2_500, "render_batch_bytes": 10_000, **kw})


def _stages(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["task"]: s for s in result["stages"]}


def test_scaling_and_schedule(project: Any) -> None:
    result = project.project(RUN, _opts(project))
    stages = _stages(result)
    assert result["overhead_seconds"] == 1.0
    assert result["dispatch_seconds"] == 0.0
    assert result["gap_seconds"] == pytest.approx(1.0)
    assert result["head_tail_seconds"] == pytest.approx(2.0)
    assert result["first_run"]
    # load: one task, (11 - 1) x 10 + 1
    assert stages["load"]["task_seconds"] == [pytest.approx(101.0)]
    assert stages["load"]["basis"] == "rows"
    # a first run's diff: kept as measured
    assert stages["diff"]["task_seconds"] == [2.0]
    assert stages["diff"]["basis"].startswith("as measured")
    # plan: 10,000 URLs / 2,500 = 4 tasks of (8 - 2) x 10 / 4 + 1 = 16 s; two rounds
    assert stages["plan"]["task_seconds"] == [pytest.approx(16.0)] * 4
    assert stages["plan"]["wall"] == pytest.approx(32.0)
    # render: 3,000 bytes of <url> lines measured, 30,000 at the target: 3 batches of
    # 10,000; work (6 - 3) x 10 = 30 s: 3 tasks of 10 + 1 = 11 s
    assert stages["render"]["task_seconds"] == [pytest.approx(11.0)] * 3
    # state: (4 - 1) x 10 + 1 = 31 s, beside render on the same two slots, longest first:
    # state on one (ends 31), two renders on the other (ends 22), the third there too: 33
    assert stages["state"]["task_seconds"] == [pytest.approx(31.0)]
    assert stages["render"]["wall"] == pytest.approx(33.0)
    assert stages["state"]["beside"] and not stages["render"]["beside"]
    # publish read nothing (no io): as measured
    assert stages["publish"]["task_seconds"] == [1.0]
    # 1 + 101 + 2 + gap 1 + 32 + 33 + 1 + head and tail 2
    assert result["critical_path_seconds"] == pytest.approx(173.0)
    # 1 + 101 + 2 + 64 + 33 + 31 + 1
    assert result["task_seconds_sum"] == pytest.approx(233.0)
    assert result["ideal_seconds"] == pytest.approx(116.5)
    # the measured tasks on 2 workers: 1 + 11 + 2 + 1 + 5 (3 beside 5) + 6 (state 4 on
    # one, renders 2 + 2 on the other, the third at 4) + 1 + 2
    assert result["model_at_measured_size_seconds"] == pytest.approx(29.0)
    assert stages["load"]["share"] == pytest.approx(101.0 / 173.0)


def test_longest_first(project: Any) -> None:
    # 1, 1, 4 on two slots: longest first 4 | 1 + 1 -> 4 (in the given order 1 + 4 | 1 -> 5)
    stage = project.Stage(task="plan", mapped=True, measured_tasks=3, measured_seconds=6.0,
                          rows_read=0, task_seconds=[1.0, 1.0, 4.0])
    assert project.schedule([[stage]], 2, 0.0, []) == pytest.approx(4.0)
    # a dispatch wait holds the slot after each task: 4 | 1 + 0.5 + 1 -> 4; 2, 2, 2: the
    # third starts at 2.5 -> 4.5
    assert project.schedule([[stage]], 2, 0.5, []) == pytest.approx(4.0)
    stage.task_seconds = [2.0, 2.0, 2.0]
    assert project.schedule([[stage]], 2, 0.5, []) == pytest.approx(4.5)


def test_diff_scaled_when_not_fixed(project: Any) -> None:
    result = project.project(RUN, _opts(project, fixed=[], diff_partitions=5))
    diff = _stages(result)["diff"]
    # (2 - 1) x 10 / 5 + 1 = 3 s a partition, 5 on two slots: three rounds
    assert diff["task_seconds"] == [pytest.approx(3.0)] * 5
    assert diff["wall"] == pytest.approx(9.0)
    assert result["critical_path_seconds"] == pytest.approx(173.0 - 2.0 + 9.0)


def test_render_batches_doubled_past_max_map_length(project: Any) -> None:
    # 30,000 bytes at the target: 3 batches of 10,000; at most 2: batches of 20,000, 2
    result = project.project(RUN, _opts(project, max_map_length=2))
    assert len(_stages(result)["render"]["task_seconds"]) == 2
    urls = project.project(RUN, _opts(project, render_batch_urls=4_000))
    assert len(_stages(urls)["render"]["task_seconds"]) == 3  # 10,000 URLs / 4,000


def test_split_load_and_unknown_task(project: Any) -> None:
    run = json.loads(json.dumps(RUN))
    tasks = run["tasks"]
    # a split load: two normalize groups of 500 rows, 3 s each, before load (now 1 s)
    tasks[1] = _ti("load", 7, 1.0, None)
    tasks[1:1] = [_ti("load_groups", 1, 1.0), _ti("normalize", 2, 3.0, 500, map_index=0),
                  _ti("normalize", 2, 3.0, 500, map_index=1)]
    tasks.append(_ti("audit", 8.5, 1.0))  # unknown: a stage where it started
    result = project.project(run, _opts(project, load_group_rows=2_500))
    order = [s["task"] for s in result["stages"]]
    assert order[:5] == ["begin", "load_groups", "normalize", "load", "audit"]
    normalize = _stages(result)["normalize"]
    # 10,000 / 2,500 = 4 groups of (6 - 2) x 10 / 4 + 1 = 11 s; two rounds
    assert normalize["task_seconds"] == [pytest.approx(11.0)] * 4
    assert normalize["wall"] == pytest.approx(22.0)
    assert _stages(result)["load"]["task_seconds"] == [1.0]


def test_dispatch_wait(project: Any) -> None:
    run = {"tasks": [_ti("render", 0, 1.0, 1, map_index=0, worker="w"),
                     _ti("render", 3, 1.0, 1, map_index=1, worker="w"),
                     _ti("render", 4, 1.0, 1, map_index=2, worker="w"),
                     _ti("render", 0, 1.0, 1, map_index=3, worker="v")]}
    # on w: 1 -> 3 and 4 -> 4: a mean of 1 s
    assert project.dispatch_seconds(run) == pytest.approx(1.0)


def test_marginal_cost_from_a_smaller_run(project: Any) -> None:
    smaller = {"workers": 2, "run_seconds": 20.0, "urls": 500, "inventory_rows": 500,
               "tasks": [_ti("begin", 0, 1.0), _ti("load", 1, 8.0, 500),
                         _ti("plan", 9, 2.5, 200, map_index=0),
                         _ti("plan", 9, 3.5, 300, map_index=1),
                         _ti("state", 13, 5.0, 500)]}
    result = project.project(RUN, _opts(project), smaller)
    stages = _stages(result)
    assert result["smaller_rows"] == 500
    # load: work 10 at 1,000 rows, 7 at 500: 0.006 s a row; 10 + 0.006 x 9,000 = 64, + 1
    assert stages["load"]["task_seconds"] == [pytest.approx(65.0)]
    assert stages["load"]["basis"] == "rows, marginal"
    # plan: work 6 and 4: 0.004 s a row; 6 + 36 = 42 over 4 tasks, + 1 each
    assert stages["plan"]["task_seconds"] == [pytest.approx(11.5)] * 4
    # state: more work in the smaller run (4 > 3): linear, as without it
    assert stages["state"]["task_seconds"] == [pytest.approx(31.0)]
    assert stages["state"]["basis"] == "rows"
    # render is not in the smaller run: linear
    assert stages["render"]["task_seconds"] == [pytest.approx(11.0)] * 3
