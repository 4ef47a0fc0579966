"""What was committed, and in what order (issue 40, items 2, 4 and 5): repair makes live the
generation committed last, never one whose run stopped before its swap nor an older one
because its run's clock was ahead; a state belongs to one output; a rollback racing gc
either keeps its target's files or refuses."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline import gc as gc_module
from pipeline import status as status_module
from pipeline import storage
from pipeline.cli import main
from pipeline.errors import ConfigError, PublishConflict
from pipeline.gc import gc
from pipeline.layout import default_state, legacy_state
from pipeline.run import run
from pipeline.status import repair, rollback, status
from tests.integration.test_publish_s3 import SITE, T0, inventory, opts

pytestmark = pytest.mark.integration


def _live(out: str) -> dict[str, Any]:
    return json.loads(storage.open_storage(out).read_bytes("manifest.json"))


def _lastmod_of(out: str, needle: str) -> str:
    """The <lastmod> the live sitemaps give the URL whose <loc> contains `needle`."""
    store = storage.open_storage(out)
    for s in _live(out)["sitemaps"]:
        xml = gzip.decompress(store.read_bytes(s["key"])).decode()
        found = re.search(rf"<loc>[^<]*{re.escape(needle)}[^<]*</loc><lastmod>([^<]+)<", xml)
        if found:
            return found.group(1)
    raise AssertionError(f"no live URL contains {needle}")


def test_a_run_whose_clock_is_behind_is_still_the_one_repair_restores(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    first = run(opts(inventory(tmp_path, 100, "a.parquet"), out,
                     run_time=T0 + timedelta(hours=2)))
    # The next run's clock is two hours behind: it takes the live generation's time, so
    # the URLs it adds are not dated before the ones already live.
    second = run(opts(inventory(tmp_path, 100, "b.parquet", 20), out, run_time=T0))
    assert second["published"]
    live = _live(out)
    assert live["generation"] == second["generation"] and live["created"] == "2026-12-01T05:00:00Z"
    assert live["sequence"] == 2 and live["previous"] == first["generation"]
    assert _lastmod_of(out, "/00110?") >= _lastmod_of(out, "/00050?")
    store = storage.open_storage(out)
    assert json.loads(store.read_bytes(f"generations/{second['generation']}/commit.json")) == \
        {"generation": second["generation"], "sequence": 2, "committed": live["committed"]}
    store.write_bytes("manifest.json", b"")
    result = repair(out)
    assert result.repaired and result.live == second["generation"]
    assert status(out).ok and _live(out)["sequence"] == 3


def test_a_generation_whose_run_stopped_before_its_swap_is_never_restored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(tmp_path / "out")
    first = run(opts(inventory(tmp_path, 100, "a.parquet"), out))
    real_put_if = storage.LocalStorage.put_if

    def stopped_before_the_swap(self: Any, key: str, *args: Any, **kw: Any) -> None:
        if key == "manifest.json":
            raise PublishConflict("the run stopped here")
        real_put_if(self, key, *args, **kw)

    monkeypatch.setattr(storage.LocalStorage, "put_if", stopped_before_the_swap)
    with pytest.raises(PublishConflict):
        run(opts(inventory(tmp_path, 100, "b.parquet", 30), out,
                 run_time=T0 + timedelta(hours=1)))
    monkeypatch.undo()
    store = storage.open_storage(out)
    uncommitted = {k.split("/")[1] for k in store.keys("generations/")} - {first["generation"]}
    assert len(uncommitted) == 1 and store.exists(
        f"generations/{uncommitted.pop()}/manifest.json")  # newer by id, never live
    store.write_bytes("manifest.json", b"")
    assert repair(out).live == first["generation"]
    assert status(out).ok and _live(out)["counts"]["published"] == 100


def test_repair_of_an_output_without_commit_records_sorts_by_id(tmp_path: Path) -> None:
    """Outputs of older versions have no commit record: the newest intact id wins."""
    out = str(tmp_path / "out")
    run(opts(inventory(tmp_path, 100, "a.parquet"), out))
    second = run(opts(inventory(tmp_path, 100, "b.parquet", 20), out,
                      run_time=T0 + timedelta(hours=1)))
    store = storage.open_storage(out)
    store.delete([k for k in store.keys("generations/") if k.endswith("/commit.json")])
    store.write_bytes("manifest.json", b"{")
    assert repair(out).live == second["generation"] and status(out).ok


def test_one_state_belongs_to_one_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    state = str(tmp_path / "state")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    inv = inventory(tmp_path, 100)
    run(opts(inv, a, state=state))
    assert json.loads(Path(state, "owner.json").read_text()) == {"out": a}
    # The same output in another spelling is the same output.
    run(opts(inv, str(tmp_path / "x" / ".." / "a") + "/", state=state,
             run_time=T0 + timedelta(hours=1)))
    with pytest.raises(ConfigError, match="belongs to output"):
        run(opts(inv, b, state=state))
    for argv in (["run", "--inventory", inv, "--site-url", SITE, "--out", b],
                 ["gc", "--out", b], ["rollback", "--out", b], ["repair", "--out", b]):
        assert main(["-q", *argv, "--state", state]) == 2, argv
        assert f"the state {state} belongs to output {a}" in capsys.readouterr().err
    assert not Path(b, "manifest.json").exists()
    assert main(["-q", "gc", "--out", a, "--state", state, "--grace-hours", "0"]) == 0


def _two_generations(tmp_path: Path, out: str) -> tuple[str, str]:
    a = run(opts(inventory(tmp_path, 100, "a.parquet"), out))["generation"]
    b = run(opts(inventory(tmp_path, 100, "b.parquet", 50), out,
                 run_time=T0 + timedelta(hours=1)))["generation"]
    return a, b


def _gc_everything_it_may(out: str) -> Any:
    return gc(out, default_state(out), keep=1, grace_hours=0, keep_days=0)


def test_a_rollback_whose_target_gc_has_marked_refuses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    out = str(tmp_path / "out")
    a, b = _two_generations(tmp_path, out)
    real_collect = gc_module._collect
    codes = []

    def rollback_between_mark_and_delete(*args: Any) -> Any:
        codes.append(main(["-q", "rollback", "--out", out, "--to", a]))
        return real_collect(*args)

    monkeypatch.setattr(gc_module, "_collect", rollback_between_mark_and_delete)
    _gc_everything_it_may(out)
    assert codes == [2]
    assert f"cannot roll back to generation {a}: gc is deleting its files" in \
        capsys.readouterr().err
    st = status(out, deep=True)
    assert st.ok and st.live == b
    assert not storage.open_storage(out).exists(f"generations/{a}/manifest.json")  # collected
    assert not [k for k in storage.open_storage(out).keys("generations/")
                if k.endswith(("/collecting.json", "/pinned.json"))]


def test_gc_spares_the_generation_a_rollback_has_pinned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(tmp_path / "out")
    a, b = _two_generations(tmp_path, out)
    real_check = status_module._check_generation

    def gc_between_check_and_swap(*args: Any) -> Any:
        checked = real_check(*args)
        _gc_everything_it_may(out)  # a is not kept: without the pin its files would go
        return checked

    monkeypatch.setattr(status_module, "_check_generation", gc_between_check_and_swap)
    assert rollback(out).live == a
    monkeypatch.undo()
    st = status(out, deep=True)
    assert st.ok and st.live == a and not st.missing_files, st
    store = storage.open_storage(out)
    assert storage.open_storage(default_state(out)).exists(f"generations/{a}/snapshot.parquet")
    assert not store.exists(f"generations/{a}/pinned.json")
    # The next run diffs against a's snapshot.
    again = run(opts(inventory(tmp_path, 100, "a.parquet"), out,
                     run_time=T0 + timedelta(hours=2)))
    assert not again["published"] and again["counts"]["unchanged"] == 100


def test_another_outputs_default_state_is_refused_and_a_copied_output_runs(
        tmp_path: Path) -> None:
    a, b = tmp_path / "a", str(tmp_path / "b")
    inv = inventory(tmp_path, 100)
    run(opts(inv, str(a)))
    state = Path(default_state(str(a)))
    assert not (state / "owner.json").exists()  # the default state is a's by place
    # Either name of a's default state: the sibling, or the older folder below it.
    for other in (str(state), legacy_state(str(a))):
        with pytest.raises(ConfigError, match=rf"belongs to output {a} \(its default state\)"):
            run(opts(inv, b, state=other))
    # A copy of an output with its default state is an output of its own.
    shutil.copytree(a, tmp_path / "copy")
    shutil.copytree(state, default_state(str(tmp_path / "copy")))
    again = run(opts(inv, str(tmp_path / "copy"), run_time=T0 + timedelta(hours=1)))
    assert not again["published"] and again["counts"]["unchanged"] == 100


def test_a_copied_output_with_its_older_state_below_it_runs(tmp_path: Path) -> None:
    """An older version's default state, `<out>/_state`, travels with a copy of the output
    and is its own there too (nothing is recorded in it)."""
    a = tmp_path / "a"
    inv = inventory(tmp_path, 100)
    run(opts(inv, str(a), state=legacy_state(str(a))))
    assert not (a / "_state" / "owner.json").exists()
    shutil.copytree(a, tmp_path / "copy")
    again = run(opts(inv, str(tmp_path / "copy"), run_time=T0 + timedelta(hours=1)))
    assert not again["published"] and again["counts"]["unchanged"] == 100
    assert not Path(default_state(str(tmp_path / "copy"))).exists()
