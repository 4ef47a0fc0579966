"""Hostile rows (issue 14): impossible lastmods are dropped and counted, never published."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.run import RunOptions, run
from tests.output_check import read_output, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def test_impossible_string_lastmods_are_dropped_and_counted(tmp_path: Path) -> None:
    values = ["-infinity", "infinity", "epoch", "0001-01-01", "1970-01-01T00:00:00Z",
              "1990-12-31", "2026-11-30T09:15:30+01:00", "2026-11-29", "1991-01-01",
              "today", None]
    urls = [f"{SITE}p/{i}" for i in range(len(values))]
    inv = write_inventory(tmp_path / "inv.parquet", {"url": urls, "lastmod": values})
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0))
    assert summary["counts"]["dropped_fields"]["lastmod_invalid"] == 7
    lastmods = read_output(str(out)).lastmods
    assert lastmods[urls[6]] == "2026-11-30T08:15:30Z"
    assert lastmods[urls[7]] == "2026-11-29T00:00:00Z"
    assert lastmods[urls[8]] == "1991-01-01T00:00:00Z"
    # Dropped: the row's lastmod is the run's (a first run), never 1970 or year 1.
    for i in (0, 1, 2, 3, 4, 5, 9):
        assert lastmods[urls[i]] == "2026-12-01T03:00:00Z", (values[i], lastmods[urls[i]])


def test_impossible_timestamp_lastmods_are_dropped_and_counted(tmp_path: Path) -> None:
    values = [datetime(1, 1, 1, tzinfo=UTC), datetime(1970, 1, 1, tzinfo=UTC),
              datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)]
    urls = [f"{SITE}t/{i}" for i in range(len(values))]
    inv = write_inventory(tmp_path / "inv.parquet", {"url": urls, "lastmod": values},
                          pa.schema([("url", pa.string()), ("lastmod", pa.timestamp("us", "UTC"))]))
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0))
    assert summary["counts"]["dropped_fields"]["lastmod_invalid"] == 2
    lastmods = read_output(str(out)).lastmods
    assert [lastmods[u] for u in urls] == ["2026-12-01T03:00:00Z", "2026-12-01T03:00:00Z",
                                           "2026-01-02T03:04:05Z"]
