"""What a generation records of its private state files, and the check before using them.

A snapshot that is truncated, replaced or partly rewritten would give a DuckDB
traceback or, worse, a valid Parquet file with rows missing and so wrong
lastmods. The manifest records each state file's size, sha256 and (for Parquet)
row count, and the snapshot's version as stored (an S3 ETag; a local file's inode, mtime
and ctime); a run checks them before it reads the file: from one listing when the version
and size are those recorded (no rewrite can keep them), else by reading it whole
(`verify_unless_same`). A run that reads no state file (an
unchanged inventory: pipeline.unchanged) checks only that the live snapshot is there with
its recorded size, from one listing (`verify_size`), so that its nightly reads no row.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pipeline import storage
from pipeline.errors import LiveStateCorrupt

_CHUNK = 8 * 1024 * 1024


def describe(uri: str) -> dict[str, Any]:
    """{"bytes", "sha256", "rows"} of a Parquet file (local or S3), read once."""
    store, key = storage.open_file(uri)
    with store.local_path(key) as path:
        return describe_file(path)


def describe_file(path: Path) -> dict[str, Any]:
    """`describe` of a Parquet file on this machine."""
    import pyarrow.parquet as pq

    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return {"bytes": size, "sha256": sha.hexdigest(), "rows": pq.ParquetFile(path).metadata.num_rows}


def version_of(uri: str) -> str | None:
    """The stored file's version (storage.ListedFile: an S3 ETag; a local file's inode,
    mtime and ctime), from one listing; None when it is not there."""
    found = _listed(uri)
    return None if found is None else found.version


def _listed(uri: str) -> storage.ListedFile | None:
    listed = storage.find_listed(uri, "")  # a file's own URI lists the file alone
    return listed[0] if len(listed) == 1 else None


def verify(uri: str, expected: dict[str, Any], what: str, recovery: str) -> dict[str, Any]:
    """Raises LiveStateCorrupt (exit 2) naming `recovery` unless `uri` is what was recorded;
    returns what it found (`describe`)."""
    import pyarrow as pa

    try:
        found = describe(uri)
    except FileNotFoundError:
        raise LiveStateCorrupt(f"{what} {uri} is missing; {recovery}") from None
    except pa.ArrowException as exc:  # not Parquet (truncated, overwritten); S3 errors pass
        raise LiveStateCorrupt(f"{what} {uri} is not readable Parquet ({exc}); {recovery}") from exc
    wrong = [k for k in ("bytes", "rows", "sha256") if k in expected and found[k] != expected[k]]
    if wrong:
        detail = ", ".join(f"{k} {found[k]} instead of {expected[k]}" for k in wrong)
        raise LiveStateCorrupt(f"{what} {uri} is not the file its generation recorded ({detail}); "
                               f"{recovery}")
    return found


def verify_unless_same(uri: str, expected: dict[str, Any], what: str, recovery: str) -> int:
    """`verify`, but only when one listing cannot tell that `uri` is the very file recorded:
    the version and size its writer recorded (`version` in `expected`) and the stored file's
    are the same. Any rewrite of the file changes its version (a new S3 object has a new
    ETag; a local write moves the ctime), so a file truncated, replaced or damaged in place
    is read whole and refused, and one copied back (a restore) is read whole and accepted.
    Returns the rows read: 0 when the listing decided."""
    found = _listed(uri)
    if found is not None and expected.get("version") == found.version \
            and found.size == expected.get("bytes"):
        return 0
    return int(verify(uri, expected, what, recovery)["rows"])


def verify_size(uri: str, expected: dict[str, Any], what: str, recovery: str) -> None:
    """verify's check that reads nothing: `uri` is there with the recorded size (one
    listing); LiveStateCorrupt (exit 2) naming `recovery` otherwise."""
    store, key = storage.open_file(uri)
    found = next((o for o in store.list(key) if o.key == key), None)
    if found is None:
        raise LiveStateCorrupt(f"{what} {uri} is missing; {recovery}")
    if "bytes" in expected and found.size != expected["bytes"]:
        raise LiveStateCorrupt(f"{what} {uri} is not the file its generation recorded (bytes "
                               f"{found.size} instead of {expected['bytes']}); {recovery}")
