"""A local folder as storage. Every write goes through `atomic_write`: a temporary file
beside the target, fsynced, renamed into place, the folder fsynced."""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import glob
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pipeline.errors import WRITE_FULL_ERRNOS, PublishConflict
from pipeline.layout import TEMP_PREFIX
from pipeline.storage.base import ListedFile, ObjectInfo, Storage, glob_base, hidden_below

_UMASK = os.umask(0)
os.umask(_UMASK)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def naming_full_disk(path: Path) -> Iterator[None]:
    """A full disk (or a file past the size limit) met by a write to an open file names no
    file: name `path`."""
    try:
        yield
    except OSError as exc:
        if exc.errno in WRITE_FULL_ERRNOS and not exc.filename:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


@contextlib.contextmanager
def atomic_write(target: Path, *, mode: int | None = None) -> Iterator[IO[bytes]]:
    """A file to write `target` through, replacing it in one step when the block ends well.

    The data is on disk before the rename and the rename on disk after it, so a power loss
    leaves the old file or the new one, never an empty one; an exception leaves the old one
    and no temporary file. `mode`: the new file's permissions (default: readable as the
    umask allows, as a published file must be for a web server; mkstemp would make 0600).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=target.parent)
    with naming_full_disk(target):
        try:
            os.fchmod(fd, 0o666 & ~_UMASK if mode is None else mode)
            with os.fdopen(fd, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
            _fsync_dir(target.parent)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def _listed(path: str) -> ListedFile:
    """A local file with its version: a rewrite in place changes its mtime and ctime (which
    no one can set back), a file moved into its place its inode."""
    st = os.stat(path)
    return ListedFile(uri=path, size=st.st_size,
                      version=f"{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}")


class LocalStorage(Storage):
    """A local folder."""

    def __init__(self, root: str) -> None:
        self.root = str(Path(root).expanduser().absolute())
        self.path = Path(self.root)

    def _p(self, key: str) -> Path:
        return self.path / key

    @property
    def local_dir(self) -> Path:
        return self.path

    def open_write(self, key: str, *, cache_control: str | None = None
                   ) -> contextlib.AbstractContextManager[IO[bytes]]:
        return atomic_write(self._p(key))

    def open_read(self, key: str) -> IO[bytes]:
        return open(self._p(key), "rb")

    def exists(self, key: str) -> bool:
        return self._p(key).is_file()

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # A prefix need not be a folder: list its folder, keep keys that match.
        folder = prefix if prefix.endswith("/") or not prefix else prefix.rpartition("/")[0]
        base = self._p(folder) if folder else self.path
        if not base.is_dir():
            return
        for p in sorted(base.rglob("*")):
            if p.is_file() and not p.name.startswith(".") and \
                    p.relative_to(self.path).as_posix().startswith(prefix):
                st = p.stat()
                yield ObjectInfo(
                    key=p.relative_to(self.path).as_posix(),
                    size=st.st_size,
                    modified=datetime.fromtimestamp(st.st_mtime, UTC),
                )

    def list_temporaries(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self._p(prefix) if prefix else self.path
        if not base.is_dir():
            return
        for p in sorted(base.rglob(TEMP_PREFIX + "*")):
            with contextlib.suppress(FileNotFoundError):  # a write may finish meanwhile
                st = p.stat()
                yield ObjectInfo(p.relative_to(self.path).as_posix(), st.st_size,
                                 datetime.fromtimestamp(st.st_mtime, UTC))

    def delete(self, keys: Iterable[str]) -> int:
        n = 0
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                self._p(key).unlink()
                n += 1
        return n

    def read_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        try:
            data = self._p(key).read_bytes()
        except FileNotFoundError:
            return None, None
        return data, hashlib.sha256(data).hexdigest()

    def put_if(self, key: str, data: bytes, *, if_match: str | None,
               cache_control: str | None = None) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        # A lock on the root folder itself makes compare-and-replace one step between local
        # runs, and leaves no lock file in a folder that may be served.
        root = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(root, fcntl.LOCK_EX)
            _, current = self.read_with_etag(key)
            if current != if_match:
                raise PublishConflict(
                    f"another generation was published since this run started "
                    f"({self.uri(key)} changed); the other run's generation stays live"
                )
            self.write_bytes(key, data)
        finally:
            os.close(root)  # closing the last descriptor releases the lock

    def rewrite(self, key: str, data: bytes, *, etag: str | None, cache_control: str) -> None:
        target = self._p(key)
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644  # readable by the web server, like a robots.txt put there by hand
        with atomic_write(target, mode=mode) as f:
            f.write(data)

    @contextlib.contextmanager
    def local_path(self, key: str) -> Iterator[Path]:
        p = self._p(key)
        if not p.exists():
            raise FileNotFoundError(str(p))
        yield p

    def arrow_input(self, key: str) -> Any:
        return str(self._p(key))

    @classmethod
    def find_listed(cls, uri: str, suffix: str) -> builtins.list[ListedFile]:
        path = uri.removeprefix("file://")
        if any(c in path for c in "*?["):
            base = glob_base(path)
            found = sorted(p for p in glob.glob(path, recursive=True)
                           if os.path.isfile(p) and not hidden_below(base, p))
        elif os.path.isdir(path):
            found = sorted(str(p) for p in Path(path).rglob(f"*{suffix}")
                           if p.is_file() and not hidden_below(path, str(p)))
        elif os.path.isfile(path):
            found = [path]
        else:
            found = []
        return [_listed(p) for p in found]

    @contextlib.contextmanager
    def local_output(self, key: str) -> Iterator[Path]:
        path = self._p(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with naming_full_disk(path):
            yield path

    def upload_file(self, path: Path, key: str, *, cache_control: str | None = None) -> None:
        target = self._p(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(path).resolve() != target.resolve():
            try:
                shutil.copyfile(path, target)
            except OSError as exc:  # a full disk is the copy's: shutil names its source
                if exc.errno in WRITE_FULL_ERRNOS:
                    raise OSError(exc.errno, exc.strerror, str(target)) from exc
                raise

    def probe_write(self, name: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=name + "-", dir=self.path)
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(probe)
