"""Object storage behind one small interface: a local folder or an S3 prefix.

- `base`: the interface (`Storage`), object info, content types and cache headers.
- `local`: a local folder; every write is one fsynced atomic replace (`atomic_write`).
- `s3`: an S3 prefix (smart_open and boto3, pyarrow's S3 filesystem), and the S3 settings.
- `s3_errors`: how S3 answers become the pipeline's errors.

`open_storage(uri)` picks the backend by the URI's scheme from `BACKENDS`; a new backend
is one module with a `Storage` subclass, registered there by one line (and its import).
"""

from __future__ import annotations

from typing import Any

from pipeline.errors import ConfigError, StorageError
from pipeline.storage.base import (
    CACHE_IMMUTABLE,
    CACHE_SHORT,
    CONTENT_TYPES,
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
    "S3_PART_SIZE", "LocalStorage", "MissingCredentials", "ObjectInfo",
    "S3Settings", "S3Storage", "Storage", "StoredHeaders", "atomic_write", "configure_s3",
    "content_type_for", "is_s3", "join", "open_file", "open_storage", "s3_client",
    "s3_filesystem", "s3_settings", "translate_s3_error",
]


def is_s3(uri: str) -> bool:
    """Whether `uri` is on S3 (for code that builds DuckDB or pyarrow readers by URI)."""
    return uri.startswith("s3://")


def open_storage(uri: str, client: Any | None = None) -> Storage:
    """The Storage for a local folder or a URI of a registered scheme (`s3://bucket/prefix`).

    `client`: the backend's client to use instead of a new one (a boto3 client on S3).
    """
    scheme, sep, _ = uri.partition("://")
    if not sep or scheme == "file":
        return LocalStorage(uri.removeprefix("file://"))
    if scheme not in BACKENDS:
        raise StorageError(f"unsupported storage URI {uri!r}: use a local folder or "
                           "s3://bucket/prefix")
    backend: Any = BACKENDS[scheme]
    return backend(uri, client) if client is not None else backend(uri)  # type: ignore[no-any-return]


def open_file(uri: str) -> tuple[Storage, str]:
    """The storage of a file's folder and the file's name (a local path or a URI)."""
    parent, sep, name = uri.rpartition("/")
    if not name:
        raise ConfigError(f"{uri!r} names a folder; give the file, e.g. .../robots.txt")
    if parent.endswith(":/"):
        raise ConfigError(f"{uri!r} has no object key; give s3://bucket/robots.txt")
    return open_storage(parent or ("/" if sep else ".")), name
