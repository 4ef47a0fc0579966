"""bench/run.py's measurement of a child: its own peak RSS, not the harness's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[2] / "bench" / "run.py"


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_child_peak_is_its_own_not_the_harness_s(harness, tmp_path: Path) -> None:
    # The harness holds 400 MiB (as it does after an in-process DuckDB export); a fork copies
    # its high-water mark, which rusage then reports for a child that never used it.
    ballast = bytearray(400 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])
    child = [sys.executable, "-c", "import time; b = bytearray(64 * 2**20); b[::4096] = "
             "b'y' * len(b[::4096]); time.sleep(0.6)"]
    m = harness.run_measured(child, env={}, log_dir=tmp_path, name="child", poll=0.05)
    assert m["returncode"] == 0
    assert 64 <= m["peak_rss_mib"] < 200, m["peak_rss_mib"]
    assert m["rusage_maxrss_mib"] >= 400  # what the kernel says: the inherited peak
    assert m["peak_rss_source"] == "VmHWM (sampled)"
    del ballast
