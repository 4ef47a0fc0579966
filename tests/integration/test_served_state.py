"""The private state below --out (the default `<out>/_state`) is served with the output
unless the server leaves it out: `sitemaps status` and `sitemaps validate` warn while it is
there, and an output whose state was moved out of it (the README's steps) keeps working."""

from __future__ import annotations

import logging
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from pipeline.run import RunOptions, run
from pipeline.status import status

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def _inventory(tmp_path: Path) -> str:
    path = tmp_path / "inv.parquet"
    pq.write_table(pa.table({"url": [f"{SITE}p/{i}" for i in range(50)]}), path)
    return str(path)


def test_status_and_validate_warn_while_the_state_is_below_out_and_a_moved_state_works(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    inv, out = _inventory(tmp_path), tmp_path / "out"
    first = run(RunOptions(inventory=inv, site_url=SITE, out=str(out), run_time=T0))
    (warning,) = status(str(out)).warnings
    assert f"{out}/_state" in warning and "below --out" in warning
    assert status(str(out)).ok  # a warning about serving, not a problem of the files
    for command in ("status", "validate"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert main(["-q", command, "--out", str(out)]) == 0
        assert any("is below --out" in r.getMessage() for r in caplog.records), command

    # moved as the README says: copied out of --out, named with --state, the old one gone
    state = tmp_path / "private-state"
    shutil.copytree(out / "_state", state)
    shutil.rmtree(out / "_state")
    assert status(str(out), state_uri=str(state)).warnings == []
    for command in ("status", "validate"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert main(["-q", command, "--out", str(out), "--state", str(state)]) == 0
        assert not any("is below --out" in r.getMessage() for r in caplog.records), command
    # the next runs find everything there: the same inventory is unchanged, a new one diffs
    again = run(RunOptions(inventory=inv, site_url=SITE, out=str(out), state=str(state),
                           run_time=T0 + timedelta(days=1)))
    assert again["unchanged"] and again["generation"] == first["generation"]
    pq.write_table(pa.table({"url": [f"{SITE}p/{i}" for i in range(60)]}), inv)
    grown = run(RunOptions(inventory=inv, site_url=SITE, out=str(out), state=str(state),
                           run_time=T0 + timedelta(days=2)))
    assert grown["published"] and grown["counts"]["added"] == 10
    assert grown["counts"]["unchanged"] == 50
    assert not (out / "_state").exists()


def test_the_feed_of_an_output_with_a_state_elsewhere_has_its_changes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The feed reads each generation's changes from the run's --state, not a default."""
    inv, out, state = _inventory(tmp_path), tmp_path / "out", str(tmp_path / "private")
    for day in (0, 1):
        if day:
            pq.write_table(pa.table({"url": [f"{SITE}p/{i}" for i in range(60)]}), inv)
        with caplog.at_level(logging.WARNING):
            run(RunOptions(inventory=inv, site_url=SITE, out=str(out), state=state,
                           run_time=T0 + timedelta(days=day), feed_days=7))
    assert not [r for r in caplog.records if "changes of generation" in r.getMessage()]
    assert (out / "feed.atom").read_text().count("<entry>") == 60
