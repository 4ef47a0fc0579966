"""A run whose inventory changed in some sections does the work for those only.

The sections whose input rows are the live generation's keep their live shards and
snapshot rows (pipeline.unchanged). What the run publishes and stores must be exactly
what the same run publishes and stores without that shortcut: here, the same run on a
copy of the output whose record of the sections was removed."""

from __future__ import annotations

import logging
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.layout import default_state
from pipeline.run import RunOptions, run
from pipeline.settings import Limits

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
KEPT = "section(s) unchanged since the live generation"

Row = tuple[str, datetime | None, str | None]


def _write(path: Path, rows: list[Row]) -> str:
    pq.write_table(pa.table({
        "url": [u for u, _, _ in rows],
        "lastmod": pa.array([t for _, t, _ in rows], pa.timestamp("s", "UTC")),
        "changefreq": [c for _, _, c in rows]}), path)
    return str(path)


def _run(inv: str, out: Path, when: datetime) -> dict[str, Any]:
    return run(RunOptions(inventory=inv, site_url=SITE, out=str(out), run_time=when,
                          feed_days=7, limits=Limits(max_urls=100)))


def _published(out: Path, result: dict[str, Any]) -> dict[str, Any]:
    """What a run published and stored, but for its generation's id and timings."""
    state = Path(default_state(str(out)), "generations", result["generation"])

    def rows(name: str) -> list[dict[str, Any]]:
        return sorted(pq.read_table(state / name).to_pylist(), key=lambda r: r["url"])

    return {"sitemaps": {p.name: p.read_bytes() for p in sorted((out / "sitemaps").iterdir())},
            "index": (out / "sitemap_index.xml").read_bytes(),
            "snapshot": rows("snapshot.parquet"), "changes": rows("changes.parquet"),
            "counts": result["counts"]}


def _inventory() -> list[Row]:
    rows: list[Row] = [
        (f"{SITE}{section}/{i:04d}", T0 - timedelta(days=i % 7) if i % 4 else None,
         "daily" if i % 5 else None)
        for section in ("a", "b", "c", "d") for i in range(250)]
    # a repeated URL whose rows tie on lastmod: the one its content picks publishes
    rows += [(f"{SITE}c/tie", T0 - timedelta(days=1), "weekly"),
             (f"{SITE}c/tie", T0 - timedelta(days=1), "monthly")]
    rows += [(f"{SITE}a/0003", T0 - timedelta(days=30), "yearly"),  # an older duplicate
             ("ftp://www.example.com/x", None, None)]  # a reject
    return rows


def _twice(tmp_path: Path, first: list[Row], second: list[Row],
           caplog: pytest.LogCaptureFixture) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The second run after the first, with and without the sections' record; returns
    what each published and the log of the run with it."""
    inv = _write(tmp_path / "inv.parquet", first)
    out = tmp_path / "out"
    _run(inv, out, T0)
    plain = tmp_path / "plain"
    shutil.copytree(out, plain)  # with its state, beside it
    shutil.copytree(default_state(str(out)), default_state(str(plain)))
    Path(default_state(str(plain)), "input-identity.json").unlink()  # no record: every section is done
    _write(tmp_path / "inv.parquet", second)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pipeline"):
        kept = _run(inv, out, T0 + timedelta(days=1))
    log = caplog.text
    done = _run(inv, plain, T0 + timedelta(days=1))
    return _published(out, kept), _published(plain, done), log


def test_the_sections_that_did_not_change_are_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = _inventory()
    second = list(first)
    # section b: ten lastmods change and five URLs are added
    for i in range(20, 30):
        url, _, freq = second[250 + i]
        second[250 + i] = (url, T0 + timedelta(hours=1), freq)
    second += [(f"{SITE}b/new-{i}", T0, None) for i in range(5)]
    kept, done, log = _twice(tmp_path, first, second, caplog)
    assert f"3 of 4 {KEPT}" in log  # a, c and d
    assert kept == done
    assert kept["counts"]["changed"] == 10 and kept["counts"]["added"] == 5
    assert kept["counts"]["shards_written"] >= 1
    assert kept["counts"]["shards_written"] + kept["counts"]["shards_reused"] == \
        kept["counts"]["sitemaps"]
    assert len(kept["snapshot"]) == kept["counts"]["published"] == 1000 + 1 + 5


def test_a_tie_swapped_is_the_same_section(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The two rows of a repeated URL that tie on lastmod swapped: the same one publishes
    (the tie goes by content, not by order, sql/dedupe_rows.sql), so its section is kept
    (the whole inventory changed too, in section b: the same rows in another order alone
    are the same input, pipeline.unchanged, and nothing is done)."""
    first = _inventory()
    second = list(first)
    second[1000], second[1001] = second[1001], second[1000]
    url, _, freq = second[260]
    second[260] = (url, T0 + timedelta(hours=1), freq)
    kept, done, log = _twice(tmp_path, first, second, caplog)
    assert f"3 of 4 {KEPT}" in log  # a, c and d; b is done again
    assert kept == done
    assert kept["counts"]["changed"] == 1  # b's row; c/tie publishes the same row
    tie = [r for r in kept["snapshot"] if r["url"] == f"{SITE}c/tie"]
    assert len(tie) == 1 and tie[0]["last_changed"] == T0


def test_a_lastmod_after_the_last_run_is_a_change(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A lastmod after the first run's time was clamped to it; now it is published as it
    is: its section, though its rows are the same, is done again."""
    first = _inventory()
    url, _, freq = first[510]  # section c
    first[510] = (url, T0 + timedelta(hours=12), freq)
    kept, done, log = _twice(tmp_path, first, list(first), caplog)
    assert f"3 of 4 {KEPT}" in log
    assert kept == done
    row = next(r for r in kept["snapshot"] if r["url"] == url)
    assert row["lastmod"] == T0 + timedelta(hours=12)
