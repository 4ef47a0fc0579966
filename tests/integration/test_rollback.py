"""`sitemaps rollback` (issue 16, item 2), on the real S3 server (SeaweedFS): a kept generation
made live again through the conditional swap and root repair of a publish, recorded in the
history, the next run diffing against its snapshot, GC keeping what it serves; refused, before
any swap, for a generation that is not kept or not intact; and racing a publish, both ways:
one wins, the other exits 3, nothing the live generation serves is lost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline import steps, storage
from pipeline.cli import main
from pipeline.errors import PublishConflict
from pipeline.gc import gc
from pipeline.layout import default_state
from pipeline.run import run
from pipeline.status import repair, rollback, status
from tests.integration.test_publish_s3 import T0, inventory, opts

pytestmark = pytest.mark.integration


def _live(out: str) -> dict[str, Any]:
    return json.loads(storage.open_storage(out).read_bytes("manifest.json"))


def _two_generations(tmp_path: Path, out: str) -> tuple[str, str]:
    a = run(opts(inventory(tmp_path, 100, "a.parquet"), out))["generation"]
    b = run(opts(inventory(tmp_path, 100, "b.parquet", 20), out,
                 run_time=T0 + timedelta(hours=1)))["generation"]
    return a, b


def test_rollback_makes_the_previous_generation_live_and_the_next_run_diffs_against_it(
        s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = s3_bucket.url("rb")
    a, b = _two_generations(tmp_path, out)
    store = storage.open_storage(out)
    gens = status(out).generations
    assert [(g.generation, g.live, g.published, g.missing_files) for g in gens] == \
        [(b, True, 100, 0), (a, False, 100, 0)]
    assert gens[1].retired and gens[0].age_hours >= 0

    assert main(["rollback", "--out", out]) == 0
    assert f"generation {a} is live again" in capsys.readouterr().out
    live = _live(out)
    assert live["generation"] == a and live["previous"] == b
    assert live["history"][:2] == [a, b] and live["rollback"]["from"] == b
    assert b in live["retired"] and a not in live["retired"]
    # What it serves is exactly generation a's, and the root files follow it.
    original = json.loads(store.read_bytes(f"generations/{a}/manifest.json"))
    assert live["sitemaps"] == original["sitemaps"] and live["indexes"] == original["indexes"]
    st = status(out, deep=True)
    assert st.ok and st.live == a and st.root_index_matches, st
    assert st.rollback["from"] == b
    assert store.read_bytes("sitemap_index.xml") == \
        store.read_bytes(f"generations/{a}/sitemap_index.xml")

    # GC with no grace and one generation kept: what the live generation serves stays,
    # and generation b's files go, so rolling forward to b is refused before any swap.
    gc(out, default_state(out), keep=1, grace_hours=0, keep_days=0)
    assert status(out, deep=True).ok
    assert storage.open_storage(default_state(out)).exists(f"generations/{a}/snapshot.parquet")
    etag = store.read_with_etag("manifest.json")[1]
    assert main(["rollback", "--out", out, "--to", b]) == 2
    err = capsys.readouterr().err
    assert f"error: generation {b} is not in the history" in err or \
        f"cannot roll back to generation {b}" in err, err
    assert store.read_with_etag("manifest.json")[1] == etag  # nothing swapped

    # The next run diffs against generation a's snapshot: a's inventory again is no change.
    again = run(opts(inventory(tmp_path, 100, "a.parquet"), out,
                     run_time=T0 + timedelta(hours=2)))
    c = again["counts"]
    assert not again["published"] and again["generation"] == a
    assert (c["added"], c["changed"], c["removed"], c["unchanged"]) == (0, 0, 0, 100)
    # And a new generation after it is an ordinary publish, the rollback in its history.
    new = run(opts(inventory(tmp_path, 100, "c.parquet", 10), out,
                   run_time=T0 + timedelta(hours=3)))
    assert new["published"] and new["counts"]["added"] == 10 and new["counts"]["removed"] == 10
    assert _live(out)["history"][:2] == [new["generation"], a]
    assert "rollback" not in _live(out)


def test_rollback_refuses_what_is_not_kept_or_not_intact(s3_bucket: Any, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    out = s3_bucket.url("refuse")
    assert main(["rollback", "--out", out]) == 2
    assert "no generation at" in capsys.readouterr().err
    a = run(opts(inventory(tmp_path, 100, "a.parquet"), out))["generation"]
    assert main(["rollback", "--out", out]) == 2
    assert "there is none before it" in capsys.readouterr().err
    b = run(opts(inventory(tmp_path, 100, "b.parquet", 20), out,
                 run_time=T0 + timedelta(hours=1)))["generation"]
    store = storage.open_storage(out)
    etag = store.read_with_etag("manifest.json")[1]
    assert main(["rollback", "--out", out, "--to", "20200101T000000Z-000000"]) == 2
    assert f"the kept generations one can roll back to: {a}" in capsys.readouterr().err
    assert main(["rollback", "--out", out, "--to", b]) == 2
    assert "already live" in capsys.readouterr().err
    # A missing shard of the target, then a damaged snapshot: each named, nothing swapped.
    shard = _live_manifest_of(store, a)["sitemaps"][0]["key"]
    body = store.read_bytes(shard)
    store.delete([shard])
    if shard not in {s["key"] for s in _live(out)["sitemaps"]}:
        assert main(["rollback", "--out", out]) == 2
        assert "missing or of another size" in capsys.readouterr().err
    store.write_bytes(shard, body)
    state, snap = storage.open_storage(default_state(out)), f"generations/{a}/snapshot.parquet"
    data = state.read_bytes(snap)
    state.write_bytes(snap, data[: len(data) // 2])
    assert main(["rollback", "--out", out]) == 2
    assert "its snapshot" in capsys.readouterr().err
    assert store.read_with_etag("manifest.json")[1] == etag
    state.write_bytes(snap, data)
    assert rollback(out).live == a


def test_repair_after_a_rollback_restores_the_rolled_back_to_generation(
        s3_bucket: Any, tmp_path: Path) -> None:
    out = s3_bucket.url("rbrepair")
    a, b = _two_generations(tmp_path, out)
    store = storage.open_storage(out)
    rollback(out)
    assert store.exists(f"generations/{b}/rolled-back.json")
    # Forward to b again (it clears b's mark, marks a), and back to a.
    assert rollback(out, to=b).live == b
    assert not store.exists(f"generations/{b}/rolled-back.json")
    assert store.exists(f"generations/{a}/rolled-back.json")
    assert rollback(out).live == a and _live(out)["history"][:2] == [a, b]
    store.write_bytes("manifest.json", b"")
    # b is newer and intact, but a rollback took it out of service: repair brings back a.
    assert repair(out).live == a
    assert status(out).ok and status(out).live == a


def _live_manifest_of(store: storage.Storage, gen: str) -> dict[str, Any]:
    return json.loads(store.read_bytes(f"generations/{gen}/manifest.json"))


@pytest.fixture
def before_commit() -> Iterator[Any]:
    """`arm(action)`: just before the next conditional PUT of manifest.json is sent, run
    `action()` (once), which commits something else first: the real race window."""
    state: dict[str, Any] = {"action": None}

    def hook(request: Any, **_: Any) -> None:
        headers = dict(request.headers)
        action = state["action"]
        if action and request.method == "PUT" and request.url.split("?")[0].endswith(
                "/manifest.json") and ("If-Match" in headers or "If-None-Match" in headers):
            state["action"] = None
            state["result"] = action()

    def arm(action: Any) -> None:
        state["action"] = action

    arm.state = state  # type: ignore[attr-defined]
    storage.CLIENT_HOOKS.append(("before-send.s3.PutObject", hook))
    storage.s3._client.cache_clear()
    yield arm
    storage.CLIENT_HOOKS.remove(("before-send.s3.PutObject", hook))
    storage.s3._client.cache_clear()


@pytest.mark.parametrize("winner", ["publish", "rollback"])
def test_a_rollback_racing_a_publish(s3_bucket: Any, tmp_path: Path, before_commit: Any,
                                     winner: str) -> None:
    out = s3_bucket.url(f"race-{winner}")
    a, b = _two_generations(tmp_path, out)
    ctx = steps.begin(opts(inventory(tmp_path, 110, "c.parquet", 30), out,
                           run_time=T0 + timedelta(hours=2)))
    try:
        steps.load_step(ctx)
        steps.diff_step(ctx)
        steps.plan_step(ctx)
        uri = steps.render_step(ctx, None).uri
        if winner == "publish":
            # The rollback has read and checked the live manifest; the publish commits
            # just before the rollback's swap, which then fails.
            before_commit(lambda: steps.publish_step(ctx, [uri]))
            with pytest.raises(PublishConflict, match="while rolling back") as exc:
                rollback(out)
            live = before_commit.state["result"].generation
            assert live == ctx.generation and _live(out)["previous"] == b
        else:
            # The publish passed its own check; the rollback commits just before its swap.
            before_commit(lambda: rollback(out))
            with pytest.raises(PublishConflict, match="another generation was published") \
                    as exc:
                steps.publish_step(ctx, [uri])
            live = a
            assert _live(out)["rollback"]["from"] == b
        assert exc.value.exit_code == 3
    finally:
        steps.finish(ctx)
    assert _live(out)["generation"] == live
    st = status(out, deep=True)
    assert st.ok and not st.missing_files, st
    # Nothing the winner serves is lost to GC (no grace, one generation kept), and the next
    # run diffs against the winner's snapshot.
    gc(out, default_state(out), keep=1, grace_hours=0, keep_days=0)
    assert status(out, deep=True).ok
    n, start = (110, 30) if winner == "publish" else (100, 0)
    again = run(opts(inventory(tmp_path, n, "again.parquet", start), out,
                     run_time=T0 + timedelta(hours=3)))
    assert not again["published"] and again["counts"]["unchanged"] == n
