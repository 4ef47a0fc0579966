"""The local backend's one atomic write (storage.local.atomic_write) on a real folder: the
old file or the new one, never a half-written one; fsynced; readable as the umask allows;
and `rewrite` keeps a site's file mode."""

from __future__ import annotations

import multiprocessing
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline import storage
from pipeline.layout import TEMP_PREFIX
from pipeline.storage.local import atomic_write


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(TEMP_PREFIX))


def test_a_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.json"
    with atomic_write(target) as f:
        f.write(b"one")
    with atomic_write(target) as f:
        f.write(b"two")
    assert target.read_bytes() == b"two"
    assert leftovers(target.parent) == []


def test_a_write_that_fails_keeps_the_old_file_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    target.write_bytes(b"old")
    with pytest.raises(ZeroDivisionError), atomic_write(target) as f:
        f.write(b"half of the new")
        assert leftovers(tmp_path)  # written beside the target, under a temporary name
        _ = 1 / 0
    assert target.read_bytes() == b"old"
    assert leftovers(tmp_path) == []


def test_the_data_and_the_folder_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    storage.open_storage(str(tmp_path)).write_bytes("x.xml", b"<x/>")
    assert synced == ["file", "dir"]


def test_a_new_file_is_readable_as_the_umask_allows(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    storage.open_storage(str(tmp_path)).write_bytes("s.xml.gz", b"x")
    assert stat.S_IMODE((tmp_path / "s.xml.gz").stat().st_mode) == 0o666 & ~umask


def test_rewrite_keeps_the_mode_of_a_site_file(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-agent: *\n")
    robots.chmod(0o640)
    store = storage.open_storage(str(tmp_path))
    store.rewrite("robots.txt", b"Sitemap: https://e.com/s.xml\n", etag=None,
                  cache_control=storage.CACHE_SHORT)
    assert robots.read_bytes() == b"Sitemap: https://e.com/s.xml\n"
    assert stat.S_IMODE(robots.stat().st_mode) == 0o640
    store.rewrite("new.txt", b"x", etag=None, cache_control=storage.CACHE_SHORT)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644
    assert leftovers(tmp_path) == []


def test_put_if_is_the_same_write_behind_a_version_check(tmp_path: Path) -> None:
    from pipeline.errors import PublishConflict

    store = storage.open_storage(str(tmp_path))
    store.put_if("manifest.json", b"1", if_match=None)
    with pytest.raises(PublishConflict):
        store.put_if("manifest.json", b"2", if_match=None)
    _, etag = store.read_with_etag("manifest.json")
    store.put_if("manifest.json", b"2", if_match=etag)
    with pytest.raises(PublishConflict):
        store.put_if("manifest.json", b"3", if_match=etag)
    assert store.read_bytes("manifest.json") == b"2"
    assert leftovers(tmp_path) == []


def _put_after_barrier(root: str, etag: str, n: int, barrier: Any, won: Any) -> None:
    from pipeline.errors import PublishConflict

    barrier.wait()
    try:
        storage.open_storage(root).put_if("manifest.json", str(n).encode(), if_match=etag)
    except PublishConflict:
        return
    with won.get_lock():
        won.value += 1


def test_of_processes_racing_one_put_if_one_wins_and_no_lock_file_is_left(
        tmp_path: Path) -> None:
    """Each process read the same version; the lock on the folder makes each compare and
    replace one step, so only the first replaces it. The lock is the folder itself: nothing
    but the object is left in it (a served folder)."""
    store = storage.open_storage(str(tmp_path))
    store.put_if("manifest.json", b"first", if_match=None)
    _, etag = store.read_with_etag("manifest.json")
    assert etag is not None
    ctx = multiprocessing.get_context("fork")
    barrier, won = ctx.Barrier(8), ctx.Value("i", 0)
    racers = [ctx.Process(target=_put_after_barrier, args=(str(tmp_path), etag, n, barrier, won))
              for n in range(8)]
    for p in racers:
        p.start()
    for p in racers:
        p.join()
    assert [p.exitcode for p in racers] == [0] * 8
    assert won.value == 1
    assert store.read_bytes("manifest.json") in {str(n).encode() for n in range(8)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_the_local_backend_answers_what_callers_ask_of_any_store(tmp_path: Path) -> None:
    store = storage.open_storage(f"file://{tmp_path}")
    assert store.local_dir == tmp_path
    store.write_bytes("g/m.json", b'{"a": 1}')
    assert store.read_json("g/m.json") == {"a": 1}
    assert store.read_json_or_none("g/missing.json") is None
    assert store.keys("g/") == ["g/m.json"]
    assert store.headers("g/m.json") == storage.StoredHeaders()
    assert store.arrow_input("g/m.json") == str(tmp_path / "g" / "m.json")
    store.probe_write(".probe")
    assert os.listdir(tmp_path) == ["g"]


def test_the_files_a_path_a_glob_or_a_folder_names(tmp_path: Path) -> None:
    for name in ("inv/day=1/a.parquet", "inv/day=2/b.parquet", "inv/day=2/notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    inv = tmp_path / "inv"
    a, b = str(inv / "day=1" / "a.parquet"), str(inv / "day=2" / "b.parquet")
    assert storage.find_files(str(inv), ".parquet") == [a, b]
    assert storage.find_files(f"{inv}/*/*.parquet", ".parquet") == [a, b]
    assert storage.find_files(f"file://{a}", ".parquet") == [a]
    assert storage.find_files(str(inv / "none"), ".parquet") == []


def test_a_folder_or_a_glob_leaves_out_what_spark_and_hive_hide(tmp_path: Path) -> None:
    names = ("inv/day=1/a.parquet", "inv/_key=2/b.parquet", "inv/_temporary/0/c.parquet",
             "inv/day=1/.c.parquet", "inv/.staging/d.parquet", "inv/day=1/_e.parquet")
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    inv = tmp_path / "inv"
    kept = [str(inv / "_key=2" / "b.parquet"), str(inv / "day=1" / "a.parquet")]
    assert storage.find_files(str(inv), ".parquet") == kept
    assert storage.find_files(f"{inv}/", ".parquet") == kept
    assert storage.find_files(f"{inv}/**/*.parquet", ".parquet") == kept
    # below the folder named: the root itself may be named so, and a file named is read
    assert storage.find_files(str(inv / "_temporary"), ".parquet") == [
        str(inv / "_temporary" / "0" / "c.parquet")]
    assert storage.find_files(str(inv / "day=1" / "_e.parquet"), ".parquet") == [
        str(inv / "day=1" / "_e.parquet")]


def test_local_files_are_read_as_they_are_and_written_in_place(tmp_path: Path) -> None:
    # no Arrow filesystem: DuckDB and pyarrow read local paths themselves
    assert storage.arrow_files([str(tmp_path / "a.parquet")]) == (None, [str(tmp_path / "a.parquet")])
    assert storage.arrow_files([]) == (None, [])
    store = storage.open_storage(str(tmp_path))
    with store.local_output("work/x.bin") as path:
        assert path == tmp_path / "work" / "x.bin"
        path.write_bytes(b"data")
    assert store.read_bytes("work/x.bin") == b"data"


def test_s3_files_are_read_through_the_arrow_filesystem() -> None:
    backend = storage.backend_for("s3://bucket/inv/a.parquet")
    assert backend.arrow_path("s3://bucket/inv/a.parquet") == "bucket/inv/a.parquet"


def test_a_listed_file_has_a_version_that_any_rewrite_changes(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "a.parquet").write_bytes(b"one")
    (first,) = storage.find_listed(str(inv), ".parquet")
    assert (first.uri, first.size) == (str(inv / "a.parquet"), 3)
    assert storage.find_listed(str(inv), ".parquet") == [first]  # listed again: the same
    stat_before = os.stat(inv / "a.parquet")
    time.sleep(0.05)  # past the file clock's tick (a few ms): the rewrite's ctime is later
    (inv / "a.parquet").write_bytes(b"two")  # the same size, in place
    os.utime(inv / "a.parquet", ns=(stat_before.st_atime_ns, stat_before.st_mtime_ns))
    (rewritten,) = storage.find_listed(str(inv), ".parquet")
    assert rewritten.size == 3 and rewritten.version != first.version  # its ctime moved
    (tmp_path / "b").write_bytes(b"two")
    os.replace(tmp_path / "b", inv / "a.parquet")  # another file moved into its place
    (moved,) = storage.find_listed(str(inv), ".parquet")
    assert moved.version not in (first.version, rewritten.version)
