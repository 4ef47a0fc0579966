"""Every step reports what it read and wrote (pipeline.taskio): the CLI's run summary adds
it up per stage, and the numbers are those of the rows each stage must read."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline import run as run_module
from pipeline.config import Limits
from pipeline.run import RunOptions, run
from tests.output_check import write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def _inventory(path: Path, urls: list[str]) -> str:
    return str(write_inventory(path, {"url": urls}))


def _run(inv: str, out: Path, when: datetime) -> Any:
    """The CLI's run; its summary as `sitemaps run --json` prints it."""
    return json.loads(json.dumps(run(RunOptions(
        inventory=inv, site_url=SITE, out=str(out), run_time=when,
        limits=Limits(max_urls=100))), default=str))


def test_each_stage_reports_the_rows_it_reads_and_the_bytes_it_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_module, "STATE_BESIDE_RENDER_ROWS", 0)  # a state stage of its own
    urls = [f"{SITE}{'product' if i % 3 else 'blog'}/{i:05d}" for i in range(1_000)]
    # two inventory files, one bad row (rejected: still read)
    first = tmp_path / "v1"
    _inventory(first / "a.parquet", urls[:600])
    _inventory(first / "b.parquet", urls[600:] + ["not a url"])
    out = tmp_path / "out"
    summary = _run(str(first), out, T0)
    io = summary["stage_io"]
    assert set(io) >= {"begin", "load", "diff", "plan", "render", "publish", "gc"}
    assert io["load"]["rows_read"] == 1_001 and io["load"]["files_read"] == 2
    assert io["begin"]["rows_read"] == 0  # a first run: no identity scan, no snapshot
    assert io["diff"]["rows_read"] == 1_000  # a first run: this run's valid rows only
    assert io["plan"]["rows_read"] == 1_000
    # every shard is new: every row rendered; and the state beside render (the CLI's
    # thread, in render's stage) reads the snapshot's rows from the planned parts
    assert io["render"]["rows_read"] == 1_000 + 1_000
    assert io["render"]["files_read"] >= 2
    assert io["publish"]["rows_read"] == 0  # the state step stored the state
    assert summary["io"] == io["publish"] and io["gc"]["rows_read"] == 0
    # the report's freshness: from the snapshot's footer, which the state step summed
    assert io["notify"]["rows_read"] == 0 and io["notify"]["files_read"] == 1
    if io["load"]["counter"] == "disk":  # the work files, the shards, the manifest: on disk
        for stage in ("load", "render", "publish"):
            assert io[stage]["bytes_written"] > 0, (stage, io[stage])

    # A nightly: 10 URLs changed of 1,000 (one gone, one new); the live snapshot is read.
    second = tmp_path / "v2"
    _inventory(second / "a.parquet", urls[1:600] + [f"{SITE}product/new"])
    _inventory(second / "b.parquet", urls[600:])
    summary = _run(str(second), out, T0 + timedelta(days=1))
    io = summary["stage_io"]
    assert summary["counts"]["added"] == 1 and summary["counts"]["removed"] == 1
    assert io["load"]["rows_read"] == 1_000 + 1_000  # the inventory, then the snapshot's rows
    # the live snapshot: trusted from one listing (the version and size publish recorded)
    assert io["begin"]["rows_read"] == 0
    # this run's 1,000 rows and the snapshot's 1,000 rows, each once by the join
    assert io["diff"]["rows_read"] == 2_000
    # the changed shards' rows only, and the new snapshot's 1,000 rows
    assert 1_000 < io["render"]["rows_read"] < 2_000
