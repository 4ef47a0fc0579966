"""The state step: the generation's snapshot, rejects and changes are stored from the plan
alone, beside render (the CLI's thread, the DAG's `state` task), and publish records what
that step stored instead of storing it again; a plan made again is stored again; a run
with no shard to render leaves the state to publish, which stores none for no generation."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pipeline import run as run_module
from pipeline import sql, steps
from pipeline.config import Limits
from pipeline.integrity import describe, version_of
from pipeline.layout import default_state
from pipeline.run import RunOptions, run
from tests.output_check import read_output, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def _inventory(tmp: Path, n: int, name: str = "inv.parquet",
               extra: tuple[str, ...] = ()) -> str:
    urls = [f"{SITE}{'product' if i % 3 else 'blog'}/{i:05d}" for i in range(n)] + list(extra)
    return str(write_inventory(tmp / name, {"url": urls}))


def _opts(inv: str, out: Path, **kw: Any) -> RunOptions:
    kw.setdefault("limits", Limits(max_urls=100))
    kw.setdefault("run_time", T0)
    return RunOptions(inventory=inv, site_url=SITE, out=str(out), **kw)


def _state_files(out: Path, generation: str) -> dict[str, Any]:
    """The generation's state files: their bytes, but the changes' rows, sorted. The diff
    writes those in no set order (a first run reads its buckets of sections on two threads),
    and every reader orders them itself (the feed, IndexNow)."""
    folder = Path(default_state(str(out))) / "generations" / generation
    return {p.name: sorted(pq.read_table(p).to_pylist(), key=lambda r: r["url"])
            if p.name == "changes.parquet" else p.read_bytes()
            for p in sorted(folder.glob("*.parquet"))}


def test_the_state_stored_beside_render_is_what_publish_stores_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    inv = _inventory(tmp_path, 1_000)
    caplog.set_level(logging.INFO, logger="pipeline.run")
    monkeypatch.setattr(run_module, "STATE_BESIDE_RENDER_ROWS", 0)
    beside = run(_opts(inv, tmp_path / "beside"))
    assert any(r.getMessage().startswith("state: snapshot of 1,000 URLs")
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    caplog.clear()
    monkeypatch.setattr(run_module, "STATE_BESIDE_RENDER_ROWS", 10**12)
    after = run(_opts(inv, tmp_path / "after"))
    assert not any(r.getMessage().startswith("state:") for r in caplog.records)
    # The same files, byte for byte: sitemaps, indexes, and the state the next run reads.
    m_beside, m_after = (json.loads((tmp_path / d / "manifest.json").read_text())
                         for d in ("beside", "after"))
    assert m_beside["sitemaps"] == m_after["sitemaps"] and len(m_beside["sitemaps"]) == 11
    # the same snapshot: its size, digest and rows (its version is the file's own)
    assert ({k: v for k, v in m_beside["state_check"]["snapshot"].items() if k != "version"}
            == {k: v for k, v in m_after["state_check"]["snapshot"].items() if k != "version"})
    assert m_beside["state_check"]["snapshot"]["rows"] == 1_000
    assert _state_files(tmp_path / "beside", beside["generation"]) == \
        _state_files(tmp_path / "after", after["generation"])
    assert len(read_output(str(tmp_path / "beside"), max_urls=100).locs) == 1_000


def _planned(tmp_path: Path, inv: str, out: Path, when: datetime) -> Any:
    ctx = steps.begin(_opts(inv, out, run_time=when, work=str(tmp_path / f"work-{out.name}")))
    steps.load_step(ctx)
    steps.diff_step(ctx)
    steps.plan_step(ctx)
    return ctx


def test_publish_records_the_stored_state_and_stores_a_plan_made_again(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, 1_000)
    out = tmp_path / "out"
    ctx = _planned(tmp_path, inv, out, T0)
    stored = steps.state_step(ctx)
    assert stored.snapshot_rows == 1_000 and not stored.deferred
    snapshot = Path(default_state(str(out))) / "generations" / ctx.generation / "snapshot.parquet"
    written = snapshot.stat().st_mtime_ns
    rendered = steps.render_step(ctx, None)
    summary = steps.publish_step(ctx, [rendered.uri])
    steps.finish(ctx)
    manifest = json.loads((out / "manifest.json").read_text())
    assert summary.published and manifest["generation"] == ctx.generation
    # Recorded, not stored again: the file is the one the state step wrote.
    assert snapshot.stat().st_mtime_ns == written
    assert manifest["state_check"]["snapshot"] == {**describe(str(snapshot)),
                                                   "version": version_of(str(snapshot))}

    # A plan made again after the state was stored (a retried plan_counts): publish stores
    # the state of the plan it publishes, not the one recorded before.
    inv2 = _inventory(tmp_path, 1_200, "inv2.parquet")
    ctx = _planned(tmp_path, inv2, out, T0 + timedelta(hours=1))
    steps.state_step(ctx)
    snapshot = Path(default_state(str(out))) / "generations" / ctx.generation / "snapshot.parquet"
    snapshot.write_bytes(b"not the plan's snapshot")
    steps.plan_step(ctx)
    rendered = steps.render_step(ctx, None)
    steps.publish_step(ctx, [rendered.uri])
    steps.finish(ctx)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["state_check"]["snapshot"]["rows"] == 1_200
    assert manifest["state_check"]["snapshot"] == {**describe(str(snapshot)),
                                                   "version": version_of(str(snapshot))}
    assert run(_opts(inv2, out, run_time=T0 + timedelta(hours=2)))["counts"]["unchanged"] == 1_200


def test_no_shard_to_render_leaves_the_state_to_publish(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run(_opts(_inventory(tmp_path, 1_000), out))
    # The same published URLs and one more rejected row: a new input, the same sitemaps.
    inv = _inventory(tmp_path, 1_000, "more.parquet", extra=("ftp://www.example.com/x",))
    ctx = _planned(tmp_path, inv, out, T0 + timedelta(hours=1))
    stored = steps.state_step(ctx)
    assert stored.deferred == "no shard to render" and stored.snapshot_rows == 0
    assert "publish stores the state" in stored.summary()
    summary = steps.publish_step(ctx, [steps.render_step(ctx, None).uri])
    steps.finish(ctx)
    assert not summary.published and summary.generation == first["generation"]
    assert not (Path(default_state(str(out))) / "generations" / ctx.generation).exists()


def test_a_first_runs_changes_are_written_with_its_snapshot(tmp_path: Path) -> None:
    """A first run's diff writes no changes part (every row is added); the state step
    writes them in its pass over the planned rows: every published URL, added, with the
    lastmod it is published with, in the types the feed and IndexNow read."""
    n = 1_000
    urls = [f"{SITE}{'product' if i % 3 else 'blog'}/{i:05d}" for i in range(n)]
    lastmods = [datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=i) if i % 4 else None
                for i in range(n)]
    inv = str(write_inventory(tmp_path / "inv.parquet", {"url": urls, "lastmod": lastmods}))
    out = tmp_path / "out"
    ctx = _planned(tmp_path, inv, out, T0)
    assert json.loads((Path(ctx.work) / "diff.json").read_text())["changes_uris"] == []
    assert steps.state_step(ctx).snapshot_rows == n
    folder = Path(default_state(str(out))) / "generations" / ctx.generation
    con = sql.connect()
    changes = con.sql(f"SELECT * FROM '{folder / 'changes.parquet'}'")
    assert [str(t) for t in changes.types] == ["VARCHAR", "VARCHAR", "TIMESTAMP WITH TIME ZONE"]
    assert changes.columns == ["url", "change", "lastmod"]
    published = con.sql(f"SELECT url, 'added', lastmod FROM '{folder / 'snapshot.parquet'}'")
    assert sorted(changes.fetchall()) == sorted(published.fetchall())
    assert sorted(u for u, _, _ in changes.fetchall()) == sorted(urls)
    # a lastmod given is published as given, one not given is the run's time
    assert {u: m for u, _, m in changes.fetchall()}[urls[1]] == lastmods[1]
    assert {u: m for u, _, m in changes.fetchall()}[urls[0]] == T0

    # The next run's diff writes its changes as before: here one URL more.
    more = str(write_inventory(tmp_path / "more.parquet", {
        "url": [*urls, f"{SITE}blog/new"], "lastmod": [*lastmods, None]}))
    steps.publish_step(ctx, [steps.render_step(ctx, None).uri])
    steps.finish(ctx)
    second = run(_opts(more, out, run_time=T0 + timedelta(hours=1)))
    folder = Path(default_state(str(out))) / "generations" / second["generation"]
    assert con.sql(f"SELECT url, change FROM '{folder / 'changes.parquet'}'").fetchall() == [
        (f"{SITE}blog/new", "added")]
