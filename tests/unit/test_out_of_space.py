"""A full disk is the operator's to fix, not a bug and not the inventory's fault: the errors a
full disk really raises (DuckDB writing to /dev/full or spilling past the size its temp folder
may take, a write to an open file) become one OutOfSpace that names the folder; other
errors stay what they are."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from pipeline.errors import OutOfSpace, out_of_space
from pipeline.storage.local import LocalStorage, naming_full_disk


def _raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test looks at what was raised
        return exc
    raise AssertionError("nothing was raised")


def test_a_duckdb_write_to_a_full_disk_names_the_file() -> None:
    con = duckdb.connect()
    exc = _raised(lambda: con.execute(
        "COPY (SELECT range AS x FROM range(100000)) TO '/dev/full' (FORMAT parquet)"))
    assert isinstance(exc, duckdb.IOException)
    full = out_of_space(exc)
    assert isinstance(full, OutOfSpace) and full.exit_code == 2
    assert str(full).startswith("no space left on the disk of /dev/full ("), full


def test_a_full_spill_folder_names_the_spill_folder(tmp_path: Path) -> None:
    # The size DuckDB lets its temp folder grow to (by default 90% of the disk's free space),
    # made small: a sort past the memory limit fills it, as a small disk would.
    con = duckdb.connect(config={"memory_limit": "32MB", "temp_directory": str(tmp_path),
                                 "max_temp_directory_size": "1MB", "threads": 1})
    exc = _raised(lambda: con.execute(
        "SELECT md5(range::VARCHAR) AS s FROM range(3000000) ORDER BY s").fetchall())
    full = out_of_space(exc, str(tmp_path))
    assert isinstance(full, OutOfSpace), exc
    assert str(full).startswith(f"DuckDB's spill folder {tmp_path} is full ("), full
    assert "SITEMAPS_TEMP_DIR" in str(full) and "SITEMAPS_MEMORY" in str(full)


def test_a_write_to_an_open_file_is_named_by_the_file_it_writes(tmp_path: Path) -> None:
    target = tmp_path / "sitemaps" / "a.xml.gz"

    def write() -> None:
        with naming_full_disk(target), open("/dev/full", "wb", buffering=0) as f:
            f.write(b"<urlset/>")

    exc = _raised(write)
    assert isinstance(exc, OSError) and exc.errno == errno.ENOSPC
    assert exc.filename == str(target)
    full = out_of_space(exc)
    assert full is not None
    # the file does not exist: the free space is its nearest folder's, tmp_path
    assert str(full).startswith(f"no space left on the disk of {target} ("), full
    assert " MiB free of " in str(full)


def test_other_errors_are_left_as_they_are(tmp_path: Path) -> None:
    con = duckdb.connect()
    others = [
        _raised(lambda: con.execute("SELEC 1")),
        _raised(lambda: con.execute(f"SELECT * FROM '{tmp_path / 'none.parquet'}'")),
        _raised(lambda: open(tmp_path / "none", "rb")),
        ValueError("No space left on device"),  # DuckDB's words, from another library
    ]
    for exc in others:
        assert out_of_space(exc) is None, exc
    with pytest.raises(ValueError):
        with naming_full_disk(tmp_path / "x"):
            raise others[-1]


def test_a_copy_to_a_full_disk_names_the_copy_not_its_source(tmp_path: Path) -> None:
    # a state file copied from the work folder (LocalStorage.upload_file) onto a disk that
    # fills: the full disk is the copy's, not the work folder's
    source = tmp_path / "work" / "snapshot.parquet"
    source.parent.mkdir()
    source.write_bytes(b"x" * 2**20)
    target = tmp_path / "state" / "generations" / "g" / "snapshot.parquet"
    target.parent.mkdir(parents=True)
    target.symlink_to("/dev/full")  # the state's disk, full
    store = LocalStorage(str(tmp_path / "state"))
    exc = _raised(lambda: store.upload_file(source, "generations/g/snapshot.parquet"))
    full = out_of_space(exc)
    assert full is not None, exc
    assert str(full).startswith(f"no space left on the disk of {target} ("), full
    assert str(source) not in str(full)
    # shutil's own error names both files, the source first: the destination is the full one
    both = OSError(errno.ENOSPC, "No space left on device", str(source), None, str(target))
    assert str(out_of_space(both)).startswith(f"no space left on the disk of {target} (")


def test_a_file_past_the_file_size_limit_is_a_terminal_error_naming_it(tmp_path: Path) -> None:
    # EFBIG (`ulimit -f`; a disk whose files are at most 4 GiB): from Python and from DuckDB
    limit = 64 * 1024
    script = (
        "import duckdb, errno, resource, sys\n"
        "from pathlib import Path\n"
        "from pipeline.errors import out_of_space\n"
        "from pipeline.storage.local import atomic_write\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "def local() -> None:\n"
        "    with atomic_write(Path(sys.argv[1])) as f:\n"
        "        f.write(b'x' * 2**20)\n"
        "for write in (local,\n"
        "              lambda: duckdb.connect().execute(\n"
        "                  \"COPY (SELECT md5(range::VARCHAR) AS s FROM range(100000)) \"\n"
        "                  f\"TO '{sys.argv[2]}' (FORMAT parquet)\")):\n"
        "    try:\n"
        "        write()\n"
        "    except Exception as exc:\n"
        "        full = out_of_space(exc)\n"
        "        print(type(full).__name__, full and full.exit_code, full, sep='|')\n")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "big.bin"),
                           str(tmp_path / "big.parquet")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 2, proc.stdout + proc.stderr
    for line, name in zip(lines, ("big.bin", "big.parquet"), strict=True):
        kind, code, message = line.split("|")
        assert (kind, code) == ("FileTooLarge", "2"), line
        assert message.startswith(f"the file {tmp_path / name} grew past the largest file"), line
        assert "ulimit -f: 65,536 bytes" in message, line
