"""Object storage behind one small interface: a local folder or an S3 prefix.

- `base`: the interface (`Storage`), object info, content types and cache headers.
- `local`: a local folder; every write is one fsynced atomic replace (`atomic_write`).
- `s3`: an S3 prefix (smart_open and boto3, pyarrow's S3 filesystem), and the S3 settings.
- `s3_errors`: how S3 answers become the pipeline's errors.

`open_storage(uri)` picks the backend by the URI's scheme from `BACKENDS`; a new backend
is one module with a `Storage` subclass, registered there by one line (and its import).
`find_files` and `arrow_files` answer for files named by URI (an inventory, Parquet parts)
through the same backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError, StorageError
from pipeline.storage.base import (
    CACHE_IMMUTABLE,
    CACHE_SHORT,
    CONTENT_TYPES,
    ListedFile,
    ObjectInfo,
    Storage,
    StoredHeaders,
    content_type_for,
    join,
)
from pipeline.storage.local import LocalStorage, atomic_write
from pipeline.storage.s3 import (
    CLIENT_HOOKS,
    S3_PART_SIZE,
    S3Settings,
    S3Storage,
    configure_s3,
    s3_client,
    s3_filesystem,
    s3_settings,
)
from pipeline.storage.s3_errors import MissingCredentials, translate_s3_error

#: The backend of each URI scheme. A URI without a scheme (or file://) is a local folder.
BACKENDS: dict[str, type[Storage]] = {
    "s3": S3Storage,
}

__all__ = [
    "BACKENDS", "CACHE_IMMUTABLE", "CACHE_SHORT", "CLIENT_HOOKS", "CONTENT_TYPES",
    "S3_PART_SIZE", "ListedFile", "LocalStorage", "MissingCredentials", "ObjectInfo",
    "S3Settings", "S3Storage", "Storage", "StoredHeaders", "atomic_write", "configure_s3",
    "arrow_files", "backend_for", "canonical_uri", "content_type_for", "find_files",
    "find_listed", "join", "open_file", "open_storage", "s3_client",
    "s3_filesystem", "s3_settings", "translate_s3_error",
]


def backend_for(uri: str) -> type[Storage]:
    """The backend of a local path or a URI of a registered scheme (`s3://bucket/prefix`)."""
    scheme, sep, _ = uri.partition("://")
    if not sep or scheme == "file":
        return LocalStorage
    if scheme not in BACKENDS:
        raise StorageError(f"unsupported storage URI {uri!r}: use a local folder or "
                           "s3://bucket/prefix")
    return BACKENDS[scheme]


def is_strictly_below(root: str, uri: str) -> bool:
    """Whether `uri` names a folder strictly below `root`: local paths resolved (links and
    `..` followed), other URIs by their key's segments (none empty, `.` or `..`)."""
    if backend_for(root) is LocalStorage:
        below = Path(root.removeprefix("file://")).resolve()
        inside = Path(uri.removeprefix("file://")).resolve()
        return below in inside.parents
    rest = uri.removeprefix(root.rstrip("/") + "/")
    return rest != uri and all(p not in ("", ".", "..") for p in rest.rstrip("/").split("/"))


def canonical_uri(uri: str) -> str:
    """One spelling of a folder or prefix: a local path resolved (links and `..` followed),
    a URI without its trailing slash; two spellings of one place compare equal."""
    if backend_for(uri) is LocalStorage:
        return str(Path(uri.removeprefix("file://")).expanduser().resolve())
    return uri.rstrip("/")


def open_storage(uri: str, client: Any | None = None) -> Storage:
    """The Storage for a local folder or a URI of a registered scheme (`s3://bucket/prefix`).

    `client`: the backend's client to use instead of a new one (a boto3 client on S3).
    """
    backend: Any = backend_for(uri)
    if backend is LocalStorage:
        return LocalStorage(uri.removeprefix("file://"))
    return backend(uri, client) if client is not None else backend(uri)  # type: ignore[no-any-return]


def find_files(uri: str, suffix: str) -> list[str]:
    """The files a path, a glob or a folder names, local or on a registered store, sorted
    (a folder: every file below it whose name ends in `suffix`); empty when none."""
    return backend_for(uri).find_files(uri, suffix)


def find_listed(uri: str, suffix: str) -> list[ListedFile]:
    """find_files' files, each with its size and version (Storage.find_listed)."""
    return backend_for(uri).find_listed(uri, suffix)


def arrow_files(uris: Sequence[str]) -> tuple[Any | None, list[str]]:
    """The pyarrow filesystem and paths that read the files at `uris` (all on one store):
    (None, the paths as they are) for local files, which DuckDB and pyarrow read
    themselves."""
    if not uris:
        return None, []
    backend = backend_for(uris[0])
    return backend.arrow_filesystem(), [backend.arrow_path(u) for u in uris]


def open_file(uri: str) -> tuple[Storage, str]:
    """The storage of a file's folder and the file's name (a local path or a URI)."""
    parent, sep, name = uri.rpartition("/")
    if not name:
        raise ConfigError(f"{uri!r} names a folder; give the file, e.g. .../robots.txt")
    if parent.endswith(":/"):
        raise ConfigError(f"{uri!r} has no object key; give s3://bucket/robots.txt")
    return open_storage(parent or ("/" if sep else ".")), name
