"""The typed results of status, repair, rollback and gc give the JSON the CLI printed from
their dicts: the same keys, in the same order, the optional ones only when set."""

from __future__ import annotations

from pathlib import Path

from pipeline.gc import GcResult
from pipeline.status import KeptGeneration, RepairResult, RollbackResult, Status

GEN = KeptGeneration(generation="g2", live=True, created="2026-12-04T03:00:00Z", age_hours=1.5,
                     published=10, sitemaps=1, retired=None, missing_files=0)


def test_status_without_a_live_generation_says_only_that() -> None:
    assert Status(out="o", live=None, ok=True).to_dict() == {"out": "o", "live": None, "ok": True}


def test_status_keys_in_the_order_the_cli_prints_them() -> None:
    base = dict(out="o", live="g2", ok=True, created="c", age_hours=1.5, published=10,
                sitemaps=1, indexes=["u"], root_index_matches=True, missing_files=[],
                generations=[GEN])
    plain = Status(**base).to_dict()  # type: ignore[arg-type]
    assert list(plain) == ["out", "live", "created", "age_hours", "published", "sitemaps",
                           "indexes", "root_index_matches", "missing_files", "generations", "ok"]
    assert plain["generations"] == [{
        "generation": "g2", "live": True, "created": "2026-12-04T03:00:00Z", "age_hours": 1.5,
        "published": 10, "sitemaps": 1, "retired": None, "missing_files": 0}]
    # deep: corrupt_files, even empty; a rollback's manifest: rollback
    deep = Status(**base, corrupt_files=[], rollback={"from": "g3", "at": "t"}).to_dict()  # type: ignore[arg-type]
    assert list(deep)[9:11] == ["corrupt_files", "rollback"] and deep["corrupt_files"] == []


def test_repair_names_the_previous_generation_only_when_it_repaired() -> None:
    assert RepairResult(out="o", live="g1", repaired=False, root_files_fixed=0).to_dict() == {
        "out": "o", "live": "g1", "repaired": False, "root_files_fixed": 0}
    assert list(RepairResult(out="o", live="g1", repaired=True, root_files_fixed=2,
                             previous=None).to_dict()) == [
        "out", "live", "repaired", "previous", "root_files_fixed"]


def test_rollback_and_gc_keys() -> None:
    assert list(RollbackResult("o", "g1", "g2", 10, 1, "t", 2).to_dict()) == [
        "out", "live", "previous", "published", "sitemaps", "committed", "root_files_fixed"]
    assert list(GcResult([], [], [], [], True, 0, 0).to_dict()) == [
        "kept_generations", "deleted", "deleted_state", "deleted_temporaries", "dry_run",
        "aborted_uploads", "work_folders_removed"]


def test_a_state_below_out_is_warned_of_and_one_beside_it_is_not() -> None:
    from pipeline.status import served_state_warning

    warning = served_state_warning("s3://b/www/", "s3://b/www/_state")
    assert warning is not None and "s3://b/www/_state" in warning and "deny" in warning
    assert served_state_warning("s3://b/www", "s3://b/www/private/state/") is not None
    for elsewhere in ("s3://b/www-state", "s3://b-private/www/_state", "s3://b/other/_state"):
        assert served_state_warning("s3://b/www/", elsewhere) is None, elsewhere


def test_the_default_state_is_warned_of_only_in_its_older_place(tmp_path: Path) -> None:
    """No --state: an older `<out>/_state` that holds a state is served with the output;
    the default `<out>.state` is beside it."""
    from pipeline.layout import INPUT_IDENTITY_KEY, default_state
    from pipeline.status import served_state_warning

    out = tmp_path / "out"
    out.mkdir()
    assert served_state_warning(str(out), None) is None
    assert served_state_warning(str(out), default_state(str(out))) is None
    (out / "_state").mkdir()
    assert served_state_warning(str(out), None) is None  # an empty folder holds no state
    (out / "_state" / INPUT_IDENTITY_KEY).write_text("{}")
    warning = served_state_warning(str(out), None)
    assert warning is not None and str(out / "_state") in warning
