"""The byte counters of pipeline.taskio: the disks' where the kernel has them, else the
read() and write() calls', else none (and the rows and files still counted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import taskio
from pipeline.taskio import Meter, TaskIO


def _proc(path: Path, **fields: int) -> None:
    path.write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))


@pytest.mark.parametrize(("fields", "counter", "read", "written"), [
    ({"rchar": 10, "wchar": 20, "read_bytes": 100, "write_bytes": 200}, "disk", 1_000, 2_000),
    ({"rchar": 10, "wchar": 20}, "syscalls", 1_000, 2_000),
])
def test_a_meter_counts_what_moved_since_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fields: dict[str, int], counter: str,
        read: int, written: int) -> None:
    proc = tmp_path / "io"
    monkeypatch.setattr(taskio, "PROC_IO", proc)
    _proc(proc, **fields)
    meter = Meter()
    meter.read(rows=5, files=1)
    meter.include(TaskIO(rows_read=2, files_read=3, bytes_read=99))  # its bytes: not again
    _proc(proc, **{k: v + (read if k in ("rchar", "read_bytes") else written)
                   for k, v in fields.items()})
    assert meter.done() == TaskIO(7, 4, read, written, counter)


def test_without_proc_the_bytes_are_zero_and_the_rows_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(taskio, "PROC_IO", tmp_path / "missing")
    meter = Meter()
    meter.read(rows=3, files=2)
    done = meter.done()
    assert done == TaskIO(3, 2, 0, 0, "")
    assert done.line() == "read 3 rows in 2 files"
    assert TaskIO(1, 1, 2048, 3 * 1024 ** 2, "disk").line() == (
        "read 1 rows in 1 files, 2.0 KiB read, 3.0 MiB written")


def test_the_real_counters_see_a_write(tmp_path: Path) -> None:
    meter = Meter()
    with open(tmp_path / "f", "wb") as f:
        f.write(b"x" * 1_000_000)
    done = meter.done()
    if done.counter:  # Linux
        assert done.bytes_written >= 1_000_000
