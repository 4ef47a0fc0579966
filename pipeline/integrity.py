"""What a generation records of its private state files, and the check before using them.

A snapshot that is truncated, replaced or partly rewritten would give a DuckDB
traceback or, worse, a valid Parquet file with rows missing and so wrong
lastmods. The manifest records each state file's size, sha256 and (for Parquet)
row count; a run checks them before it reads the file. A run that reads no state file (an
unchanged inventory: pipeline.unchanged) checks only that the live snapshot is there with
its recorded size, from one listing (`verify_size`), so that its nightly reads no row.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pipeline import storage
from pipeline.errors import LiveStateCorrupt

_CHUNK = 8 * 1024 * 1024


def describe(uri: str) -> dict[str, Any]:
    """{"bytes", "sha256", "rows"} of a Parquet file (local or S3), read once."""
    import pyarrow.parquet as pq

    store, key = storage.open_file(uri)
    with store.local_path(key) as path:
        sha = hashlib.sha256()
        size = 0
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                sha.update(chunk)
                size += len(chunk)
        rows = pq.ParquetFile(path).metadata.num_rows
    return {"bytes": size, "sha256": sha.hexdigest(), "rows": rows}


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
