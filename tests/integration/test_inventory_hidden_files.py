"""An inventory folder is read as Spark and Hive read it: a name starting with `_` or `.`
below it (an uncommitted `_temporary/` attempt, a dot file) is not part of it, a Hive
partition folder is. Locally and on S3, for the rows loaded and for the input identity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline.run import RunOptions, run
from tests.output_check import read_output, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
COMMITTED = 1_000


def _spark_folder(root: Path) -> list[Path]:
    """A folder as a Spark job leaves it mid-write: 1,000 committed rows in two Hive
    partitions, and 50 rows of an attempt not yet committed (or of a copy in progress)."""
    for day in (1, 2):
        write_inventory(root / f"day={day}" / "part-00000.parquet",
                        {"url": [f"{SITE}d{day}/{i}" for i in range(COMMITTED // 2)]})
    (root / "_SUCCESS").write_bytes(b"")
    hidden = [root / "_temporary" / "0" / "_temporary" / "attempt_1" / "day=1" / "part-1.parquet",
              root / "day=2" / ".part-00001.parquet", root / ".staging" / "part-2.parquet",
              root / "day=1" / "_part-3.parquet"]
    for n, path in enumerate(hidden):
        write_inventory(path, {"url": [f"{SITE}uncommitted/{n}/{i}" for i in range(50)]})
    return hidden


def test_a_local_folder_or_glob_leaves_out_hidden_files(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    _spark_folder(inv)
    for n, inventory in enumerate((str(inv), f"{inv}/**/*.parquet", f"{inv}/*/*.parquet")):
        out = tmp_path / f"out{n}"
        summary = run(RunOptions(inventory=inventory, site_url=SITE, out=str(out), run_time=T0))
        assert summary["counts"]["input_rows"] == COMMITTED, inventory
        locs = read_output(str(out)).locs
        assert len(locs) == COMMITTED and not any("/uncommitted/" in u for u in locs)


def test_a_hidden_file_added_leaves_the_input_unchanged(tmp_path: Path) -> None:
    inv, out = tmp_path / "inv", tmp_path / "out"
    _spark_folder(inv)
    first = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0))
    assert first["published"]
    # the next attempt of the job is under way: its files are not the inventory yet
    write_inventory(inv / "_temporary" / "1" / "part-9.parquet", {"url": [f"{SITE}x/1"]})
    again = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out),
                           run_time=T0 + timedelta(days=1)))
    assert again["unchanged"] and again["generation"] == first["generation"]


def test_an_s3_folder_or_glob_leaves_out_hidden_files(s3_bucket: Any, tmp_path: Path) -> None:
    local = tmp_path / "inv"
    _spark_folder(local)
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        s3_bucket.client.upload_file(str(path), s3_bucket.name,
                                     f"inv/{path.relative_to(local).as_posix()}")
    for n, inventory in enumerate((s3_bucket.url("inv"), s3_bucket.url("inv/*/*.parquet"))):
        out = s3_bucket.url(f"out{n}")
        summary = run(RunOptions(inventory=inventory, site_url=SITE, out=out, run_time=T0))
        assert summary["counts"]["input_rows"] == COMMITTED, inventory
        locs = read_output(out).locs
        assert len(locs) == COMMITTED and not any("/uncommitted/" in u for u in locs)
