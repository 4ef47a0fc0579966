"""The storage interface: a root (a local folder, an S3 prefix) and operations on keys below it.

Keys are relative to the root and use "/" separators. Every backend implements the
abstract methods; the concrete ones here (bytes, JSON, listing keys) are written once on
top of them. A caller never asks which backend it holds: what differs between backends
(a local folder to remove, stored headers, the Arrow file to read Parquet from, how a
glob is matched, where a file is written before it is stored) is a method here with a
sensible answer from each.
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

#: Content types by file suffix.
CONTENT_TYPES = {
    ".xml.gz": "application/gzip",
    ".txt.gz": "application/gzip",
    ".xml": "application/xml",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".parquet": "application/vnd.apache.parquet",
    ".html": "text/html; charset=utf-8",
    ".atom": "application/atom+xml",
}
#: Shard files never change under their key: CDNs may keep them for a year.
CACHE_IMMUTABLE = "public, max-age=31536000, immutable"
#: The root index, robots lines and live manifest change with each generation.
CACHE_SHORT = "public, max-age=300"


def content_type_for(key: str) -> str:
    """The Content-Type to store `key` with; never implies Content-Encoding."""
    for suffix, ctype in CONTENT_TYPES.items():
        if key.endswith(suffix):
            return ctype
    return "application/octet-stream"


def join(uri: str, *parts: str) -> str:
    """Join URI parts with single slashes."""
    out = uri.rstrip("/")
    for part in parts:
        out = out + "/" + part.strip("/")
    return out


def hidden_below(base: str, path: str) -> bool:
    """Whether `path` (a file below the folder `base`, "/"-separated) lies in what Spark and
    Hive hide from a reader of the folder: a name below `base` starting with `.` or `_` (an
    uncommitted `_temporary/` attempt, `_SUCCESS`, an editor's or a copy's dot file), a
    partition folder `_key=value` apart, as Spark keeps it; pyarrow.dataset hides them too."""
    rest = path[len(base):] if path.startswith(base) else path
    *folders, name = rest.strip("/").split("/")
    return name.startswith((".", "_")) or any(
        f.startswith(".") or (f.startswith("_") and "=" not in f) for f in folders)


def glob_base(pattern: str) -> str:
    """The folder of `pattern` above its first component with a wildcard (`*`, `?`, `[`)."""
    parts = pattern.split("/")
    first = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    return "/".join(parts[:first])


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object: key relative to the root, size and last change."""

    key: str
    size: int
    modified: datetime
    #: The store's tag of this content (S3's ETag); None where the listing has none.
    etag: str | None = None


@dataclass(frozen=True)
class ListedFile:
    """One file a listing found: its URI, size and version, a string that changes whenever
    its content does (an S3 object's ETag; a local file's inode, mtime and ctime)."""

    uri: str
    size: int
    version: str


@dataclass(frozen=True)
class StoredHeaders:
    """The HTTP headers an object is stored with (a local file has none: all None)."""

    content_type: str | None = None
    content_encoding: str | None = None
    cache_control: str | None = None


class Storage(abc.ABC):
    """A root (folder or S3 prefix) and operations on keys below it."""

    root: str

    def uri(self, key: str) -> str:
        return join(self.root, key) if key else self.root

    # --- what every backend implements ------------------------------------------------------

    @abc.abstractmethod
    def open_write(self, key: str, *, cache_control: str | None = None
                   ) -> contextlib.AbstractContextManager[IO[bytes]]:
        """A file to write `key` through; the object appears only when the block ends well."""

    @abc.abstractmethod
    def open_read(self, key: str) -> IO[bytes]:
        """A file to read `key` from; FileNotFoundError when it is missing."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool: ...

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """The objects whose key starts with `prefix` (not only a folder's), in key order."""

    @abc.abstractmethod
    def delete(self, keys: Iterable[str]) -> int:
        """Remove the objects (a missing one is no error); returns how many were asked for."""

    @abc.abstractmethod
    def read_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        """The object's bytes and an opaque version tag, or (None, None)."""

    @abc.abstractmethod
    def put_if(self, key: str, data: bytes, *, if_match: str | None,
               cache_control: str | None = None) -> None:
        """Write `key` only if its version is still `if_match` (None: only if absent).

        Raises PublishConflict when the condition fails.
        """

    @abc.abstractmethod
    def rewrite(self, key: str, data: bytes, *, etag: str | None, cache_control: str) -> None:
        """Replace a file the site owns (its robots.txt) in one step, keeping what it was
        stored with (a local file's mode, an object's Cache-Control; `cache_control` for a
        new one). `etag`: the version read before, where the store can check it."""

    @abc.abstractmethod
    def local_path(self, key: str) -> contextlib.AbstractContextManager[Path]:
        """A local file holding the object (the object itself when local)."""

    @abc.abstractmethod
    def arrow_input(self, key: str) -> Any:
        """What pyarrow reads the object from: a local path, or a random-access file of
        the Arrow filesystem (range requests, for Parquet)."""

    @abc.abstractmethod
    def probe_write(self, name: str) -> None:
        """Create and remove one small object named after `name` at the root (the root is
        made if needed): proof that the root is writable. Raises the store's own error."""

    @classmethod
    @abc.abstractmethod
    def find_listed(cls, uri: str, suffix: str) -> builtins.list[ListedFile]:
        """The files `uri` names, sorted, each with its size and version (from the one
        listing, no read of any file): the file itself, those a glob (`*`, `?`, `[`)
        matches, or every file below a folder whose name ends in `suffix`; empty when
        none. Of a glob's or a folder's files, none that `hidden_below` hides. As URIs of
        this backend (a local path for a local file)."""

    @classmethod
    def find_files(cls, uri: str, suffix: str) -> builtins.list[str]:
        """The URIs of `find_listed`'s files."""
        return [f.uri for f in cls.find_listed(uri, suffix)]

    # --- what a backend may refine ----------------------------------------------------------

    @classmethod
    def arrow_filesystem(cls) -> Any | None:
        """The pyarrow filesystem that reads this backend's files by `arrow_path`, or None:
        they are local paths, which DuckDB and pyarrow read as they are."""
        return None

    @classmethod
    def arrow_path(cls, uri: str) -> str:
        """The path of the file at `uri` on `arrow_filesystem()`."""
        return uri

    @contextlib.contextmanager
    def local_output(self, key: str) -> Iterator[Path]:
        """A local path to write `key` at; stored under `key` when the block ends well."""
        with tempfile.TemporaryDirectory(prefix="sitemaps-") as tmp:
            path = Path(tmp) / Path(key).name
            yield path
            self.upload_file(path, key)

    @property
    def local_dir(self) -> Path | None:
        """The folder on this machine that is the root, or None (a remote store)."""
        return None

    def headers(self, key: str) -> StoredHeaders:
        """The headers `key` is stored with (none for a local file)."""
        return StoredHeaders()

    def check_credentials(self) -> None:
        """Fail (StorageError) when the store needs credentials and none are found."""
        return None

    def check_conditional_writes(self) -> None:
        """ConfigError unless the store refuses a conditional write whose condition fails
        (a local folder's lock always does)."""
        return None

    def abort_incomplete_uploads(self, older_than: datetime) -> int:
        """Abort uploads begun before `older_than` and never finished; returns how many."""
        return 0

    def list_temporaries(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Leftover temporary files of interrupted writes (none on S3: multipart uploads)."""
        return iter(())

    def write_bytes(self, key: str, data: bytes, *, cache_control: str | None = None) -> None:
        with self.open_write(key, cache_control=cache_control) as f:
            f.write(data)

    def read_bytes(self, key: str) -> bytes:
        with self.open_read(key) as f:
            return f.read()

    def upload_file(self, path: Path, key: str, *, cache_control: str | None = None) -> None:
        with open(path, "rb") as src, self.open_write(key, cache_control=cache_control) as dst:
            shutil.copyfileobj(src, dst, 8 * 1024 * 1024)

    # --- helpers on top -----------------------------------------------------------------------

    def read_bytes_or_none(self, key: str) -> bytes | None:
        try:
            return self.read_bytes(key)
        except FileNotFoundError:
            return None

    def read_json(self, key: str) -> Any:
        """The object parsed as JSON; FileNotFoundError when it is missing."""
        return json.loads(self.read_bytes(key))

    def read_json_or_none(self, key: str) -> Any:
        """The object parsed as JSON, or None when it is missing (or empty)."""
        raw = self.read_bytes_or_none(key)
        return json.loads(raw) if raw else None

    def keys(self, prefix: str = "") -> builtins.list[str]:
        """The keys that start with `prefix`, in order."""
        return [o.key for o in self.list(prefix)]
