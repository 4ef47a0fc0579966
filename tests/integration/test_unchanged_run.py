"""A run over the live generation's own inventory and options stops after begin.

The common nightly case: the inventory was not refreshed (or was re-exported with the
same rows). No stage runs, no generation is made, the live files stay byte for byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.layout import default_state
from pipeline.run import RunOptions, run

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def _write(path: Path, rows: list[tuple[str, datetime | None]]) -> str:
    pq.write_table(pa.table({"url": [u for u, _ in rows],
                             "lastmod": pa.array([t for _, t in rows], pa.timestamp("s", "UTC"))}),
                   path)
    return str(path)


def _files(out: Path) -> dict[str, bytes]:
    """Every file of the output and of its default state, by its path from their folder."""
    return {str(p.relative_to(out.parent)): p.read_bytes()
            for root in (out, Path(default_state(str(out)))) for p in sorted(root.rglob("*"))
            if p.is_file() and "/leases/" not in str(p)}


def _run(inv: str, out: Path, when: datetime, **kw: object) -> dict:
    return run(RunOptions(inventory=inv, site_url=SITE, out=str(out), run_time=when,  # type: ignore[arg-type]
                          feed_days=7, report=True, **kw))


def test_the_same_rows_again_change_nothing(tmp_path: Path) -> None:
    rows: list[tuple[str, datetime | None]] = [
        (f"{SITE}{section}/{i:04d}", T0 - timedelta(days=i % 5) if i % 3 else None)
        for section in ("a", "b") for i in range(300)]
    inv, out = _write(tmp_path / "inv.parquet", rows), tmp_path / "out"
    first = _run(inv, out, T0)
    assert first["published"] and not first.get("unchanged")
    live = _files(out)
    assert Path(default_state(str(out)), "input-identity.json").exists()

    # the next night: the same file, then the same rows re-exported in another order
    again = _run(inv, out, T0 + timedelta(days=1))
    assert again["unchanged"] and not again["published"]
    assert again["generation"] == first["generation"]
    assert again["counts"]["published"] == first["counts"]["published"] == 600
    assert set(again["stage_seconds"]) <= {"notify"}  # no stage ran before notify
    assert set(again["stage_cpu_seconds"]) <= {"begin", "notify"}
    _write(tmp_path / "inv.parquet", rows[::-1])
    reordered = _run(inv, out, T0 + timedelta(days=2))
    assert reordered["unchanged"]
    # not one byte written, not even the feed or the report; only the identity's record
    # takes the rewritten file's new listing (pipeline.unchanged), of the same identity
    record = "out.state/input-identity.json"
    now = _files(out)
    assert {k: v for k, v in now.items() if k != record} == \
        {k: v for k, v in live.items() if k != record}
    before, after = json.loads(live[record]), json.loads(now[record])
    assert before["inventory"]["files"] != after["inventory"]["files"]
    assert {k: v for k, v in before.items() if k != "inventory"} == \
        {k: v for k, v in after.items() if k != "inventory"}

    # one changed lastmod is a new generation, which rewrites that URL's shard only
    rows[7] = (rows[7][0], T0 + timedelta(hours=1))
    _write(tmp_path / "inv.parquet", rows)
    changed = _run(inv, out, T0 + timedelta(days=3))
    assert changed["published"] and not changed.get("unchanged")
    assert changed["counts"]["changed"] == 1 and changed["counts"]["shards_written"] == 1
    # and --force, or other options, always do the work
    forced = _run(inv, out, T0 + timedelta(days=4), force=True)
    assert not forced["unchanged"] and forced["stage_seconds"]["load"] > 0
    # each stage's CPU seconds beside its wall seconds (the bench's CPU table)
    assert set(forced["stage_cpu_seconds"]) == {"begin", *forced["stage_seconds"]}
    assert forced["stage_cpu_seconds"]["load"] > 0
    assert forced["counts"]["shards_written"] == forced["counts"]["sitemaps"]  # all rewritten
    other = _run(inv, out, T0 + timedelta(days=5), section_depth=2)
    assert not other["unchanged"] and "load" in other["stage_seconds"]


def test_an_input_of_another_size_is_identified_by_load(tmp_path: Path) -> None:
    """A run that must do the work whatever its identity (here: more rows than the live
    generation's input) takes no identity in begin: load takes it from the rows it reads,
    and the next run of the same rows is unchanged."""
    from pipeline import steps

    rows: list[tuple[str, datetime | None]] = [(f"{SITE}a/{i:04d}", T0) for i in range(200)]
    inv, out = _write(tmp_path / "inv.parquet", rows), tmp_path / "out"
    assert _run(inv, out, T0)["published"]
    rows.append((f"{SITE}a/new", T0))
    _write(tmp_path / "inv.parquet", rows)
    opts = RunOptions(inventory=inv, site_url=SITE, out=str(out),
                      run_time=T0 + timedelta(days=1))
    ctx = steps.begin(opts)
    try:
        assert ctx.identity_at_load and ctx.input_identity is None and not ctx.unchanged
    finally:
        steps.finish(ctx)
    grown = _run(inv, out, T0 + timedelta(days=1))
    assert grown["published"] and grown["counts"]["added"] == 1
    again = _run(inv, out, T0 + timedelta(days=2))
    assert again["unchanged"] and again["generation"] == grown["generation"]
    # the same number of rows, one changed: begin takes the identity, and it differs
    rows[0] = (rows[0][0], T0 + timedelta(hours=1))
    _write(tmp_path / "inv.parquet", rows)
    ctx = steps.begin(RunOptions(inventory=inv, site_url=SITE, out=str(out),
                                 run_time=T0 + timedelta(days=3)))
    try:
        assert not ctx.identity_at_load and ctx.input_identity and not ctx.unchanged
    finally:
        steps.finish(ctx)


def test_a_clamped_future_lastmod_is_never_unchanged(tmp_path: Path) -> None:
    rows: list[tuple[str, datetime | None]] = [(f"{SITE}a/{i}", T0) for i in range(20)]
    rows.append((f"{SITE}a/future", T0 + timedelta(days=30)))
    inv, out = _write(tmp_path / "inv.parquet", rows), tmp_path / "out"
    first = _run(inv, out, T0)
    assert first["counts"]["lastmod_clamped"] == 1
    # a day later the clamped lastmod is a day later: the run must do the work
    again = _run(inv, out, T0 + timedelta(days=1))
    assert not again.get("unchanged") and again["published"]
    assert again["counts"]["shards_written"] == 1


def _priorities(out: Path) -> dict[str, str]:
    import gzip
    import re

    found: dict[str, str] = {}
    for shard in out.rglob("*.xml.gz"):
        for loc, priority in re.findall(r"<loc>([^<]+)</loc>.*?<priority>([^<]+)</priority>",
                                        gzip.decompress(shard.read_bytes()).decode()):
            found[loc] = priority
    return found


def test_duplicates_reordered_are_the_same_input_and_the_same_output(tmp_path: Path) -> None:
    """Two rows of one URL and one lastmod: which one publishes does not depend on their
    order, as the input's identity does not, so the skip keeps what a fresh run publishes."""
    urls = [f"{SITE}a/{i}" for i in range(20)] + [f"{SITE}a/dup", f"{SITE}a/dup"]
    priority = [0.5] * 20 + [0.1, 0.9]

    def write(order: slice) -> str:
        pq.write_table(pa.table({"url": urls[order], "priority": priority[order],
                                 "lastmod": pa.array([T0] * 22, pa.timestamp("s", "UTC"))}),
                       tmp_path / "inv.parquet")
        return str(tmp_path / "inv.parquet")

    inv = write(slice(None))
    _run(inv, tmp_path / "nightly", T0)
    kept = _priorities(tmp_path / "nightly")[f"{SITE}a/dup"]
    write(slice(None, None, -1))  # the same rows, re-exported in another order
    assert _run(inv, tmp_path / "nightly", T0 + timedelta(days=1))["unchanged"]
    _run(inv, tmp_path / "fresh", T0 + timedelta(days=1))
    fresh = _priorities(tmp_path / "fresh")
    assert len(fresh) == 21 and fresh[f"{SITE}a/dup"] == kept
    assert _priorities(tmp_path / "nightly") == fresh


def test_a_truncated_identity_record_is_no_record(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A torn `input-identity.json` (a full disk, a copy cut short) only costs the skip: the
    run does the work, says which file it could not read, and records it whole again."""
    rows: list[tuple[str, datetime | None]] = [(f"{SITE}a/{i:04d}", T0) for i in range(50)]
    inv, out = _write(tmp_path / "inv.parquet", rows), tmp_path / "out"
    first = _run(inv, out, T0)
    record = Path(default_state(str(out)), "input-identity.json")
    record.write_bytes(record.read_bytes()[:20])
    with caplog.at_level("WARNING"):
        again = _run(inv, out, T0 + timedelta(days=1))
    assert not again.get("unchanged")
    assert again["counts"]["published"] == first["counts"]["published"] == 50
    assert "input-identity.json" in caplog.text
    third = _run(inv, out, T0 + timedelta(days=2))
    assert third["unchanged"]
