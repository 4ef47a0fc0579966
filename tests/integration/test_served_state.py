"""The private state lies beside --out by default (`<out>.state`), so serving the output
serves none of it. An output an older version made keeps its state below it
(`<out>/_state`): it is still used, with a warning on every run and in `sitemaps status`
and `sitemaps validate`, until it is moved as the README says."""

from __future__ import annotations

import logging
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import storage
from pipeline.cli import main
from pipeline.layout import INPUT_IDENTITY_KEY, default_state, legacy_state
from pipeline.run import RunOptions, run
from pipeline.status import status

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
#: What a run logs while it uses a state below --out.
SERVED = "is below --out and served with it"


def _inventory(tmp_path: Path, urls: int = 50) -> str:
    path = tmp_path / "inv.parquet"
    pq.write_table(pa.table({"url": [f"{SITE}p/{i}" for i in range(urls)]}), path)
    return str(path)


def _served_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if SERVED in r.getMessage()]


def test_a_new_output_keeps_its_state_beside_it_and_serves_only_its_files(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING):
        first = run(RunOptions(inventory=_inventory(tmp_path), site_url=SITE, out=str(out),
                               run_time=T0, feed_days=7, report=True))
    state = tmp_path / "out.state"
    assert default_state(str(out)) == str(state)
    assert (state / "generations" / first["generation"] / "snapshot.parquet").is_file()
    assert (state / INPUT_IDENTITY_KEY).is_file()
    served = {p.name for p in out.iterdir()}
    assert "_state" not in served and ".lock" not in served
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]  # no lock, no temporary
    assert not list(out.rglob("*.parquet")) and not list(out.rglob("report.html"))
    assert _served_warnings(caplog) == [] and status(str(out)).warnings == []


def test_an_older_state_below_out_is_used_with_a_warning_until_it_is_moved(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    inv, out = _inventory(tmp_path), tmp_path / "out"
    # an output an older version made: its default state was <out>/_state
    first = run(RunOptions(inventory=inv, site_url=SITE, out=str(out), state=legacy_state(str(out)),
                           run_time=T0))
    with caplog.at_level(logging.WARNING):
        again = run(RunOptions(inventory=inv, site_url=SITE, out=str(out),
                               run_time=T0 + timedelta(days=1)))
    assert again["unchanged"] and again["generation"] == first["generation"]
    (warning,) = _served_warnings(caplog)  # one per run
    assert f"{out}/_state" in warning and f"copy it to {out}.state" in warning
    assert not Path(default_state(str(out))).exists()
    (warning,) = status(str(out)).warnings
    assert f"{out}/_state" in warning and "below --out" in warning
    assert status(str(out)).ok  # a warning about serving, not a problem of the files
    for command in ("status", "validate"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert main(["-q", command, "--out", str(out)]) == 0
        assert any("is below --out" in r.getMessage() for r in caplog.records), command

    # moved as the README says: copied to <out>.state, the old one gone; no --state needed
    shutil.copytree(out / "_state", default_state(str(out)))
    shutil.rmtree(out / "_state")
    assert status(str(out)).warnings == []
    for command in ("status", "validate"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert main(["-q", command, "--out", str(out)]) == 0
        assert not any("is below --out" in r.getMessage() for r in caplog.records), command
    # the next runs find everything there: the same inventory is unchanged, a new one diffs
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        moved = run(RunOptions(inventory=inv, site_url=SITE, out=str(out),
                               run_time=T0 + timedelta(days=2)))
    assert moved["unchanged"] and moved["generation"] == first["generation"]
    assert _served_warnings(caplog) == []
    inv = _inventory(tmp_path, 60)
    grown = run(RunOptions(inventory=inv, site_url=SITE, out=str(out),
                           run_time=T0 + timedelta(days=3)))
    assert grown["published"] and grown["counts"]["added"] == 10
    assert grown["counts"]["unchanged"] == 50
    assert not (out / "_state").exists()


def test_the_root_of_a_bucket_needs_a_state_unless_an_older_one_is_there(
        s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = _inventory(tmp_path)
    for out in (f"s3://{s3_bucket.name}", s3_bucket.url()):
        for command in (["run", "--inventory", inv, "--site-url", SITE], ["gc"]):
            assert main(["-q", *command, "--out", out]) == 2
            assert capsys.readouterr().err.strip() == (
                f"error: --out is the root of bucket {s3_bucket.name}: give --state, a "
                "private prefix or bucket")
    assert storage.open_storage(s3_bucket.url()).keys() == []  # refused before any write
    # an output an older version made there: its _state is still used
    out = s3_bucket.url()
    first = run(RunOptions(inventory=inv, site_url=SITE, out=out, state=legacy_state(out),
                           run_time=T0))
    again = run(RunOptions(inventory=inv, site_url=SITE, out=out,
                           run_time=T0 + timedelta(days=1)))
    assert again["unchanged"] and again["generation"] == first["generation"]


def test_the_feed_of_an_output_with_a_state_elsewhere_has_its_changes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The feed reads each generation's changes from the run's --state, not a default."""
    out, state = tmp_path / "out", str(tmp_path / "private")
    for day, urls in enumerate((50, 60)):
        with caplog.at_level(logging.WARNING):
            run(RunOptions(inventory=_inventory(tmp_path, urls), site_url=SITE, out=str(out),
                           state=state, run_time=T0 + timedelta(days=day), feed_days=7))
    assert not [r for r in caplog.records if "changes of generation" in r.getMessage()]
    assert (out / "feed.atom").read_text().count("<entry>") == 60


@pytest.mark.parametrize("where", ["out/reports", "out"])
def test_reports_sent_into_the_served_output_are_refused(tmp_path: Path, where: str) -> None:
    out = tmp_path / "out"
    code = main(["run", "--inventory", _inventory(tmp_path), "--site-url", SITE,
                 "--out", str(out), "--report-to", str(tmp_path / where)])
    assert code == 2  # bad configuration: nothing published, nothing written
    assert not (out / "manifest.json").exists()
    assert not list(tmp_path.rglob("report.html"))
    # beside the output, not in it: a private place of its own
    assert main(["run", "--inventory", _inventory(tmp_path), "--site-url", SITE,
                 "--out", str(out), "--report-to", str(tmp_path / "reports")]) == 0
    assert len(list((tmp_path / "reports").rglob("report.html"))) == 1
