"""A lease: a lock object with an expiry, so two runs do not both render for nothing.

The lease is only an optimisation; correctness comes from the conditional
manifest swap, which refuses a run that lost a race whether or not it held a lease.
Every write of the lease is conditional on the version just read (If-Match, or
If-None-Match: * when there is none), so a renewal or a release never touches a
lease another run took meanwhile; a write whose reply was lost (botocore's retry
gets 412) is recognised by reading the lease again.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline import storage
from pipeline.errors import PublishConflict
from pipeline.layout import LEASE_KEY

log = logging.getLogger(__name__)


def _read(out: storage.Storage) -> tuple[dict[str, Any] | None, str | None]:
    data, etag = out.read_with_etag(LEASE_KEY)
    try:
        held = json.loads(data) if data else None
    except ValueError:
        held = None  # a broken lease object protects nothing: overwrite it conditionally
    return (held if isinstance(held, dict) else None), etag


def _write(out: storage.Storage, body: dict[str, Any], etag: str | None) -> bool:
    """Conditionally write the lease; True if `body` is what is stored now."""
    data = json.dumps(body, sort_keys=True).encode()
    try:
        out.put_if(LEASE_KEY, data, if_match=etag)
    except PublishConflict:
        now, _ = _read(out)
        return now == body  # applied, reply lost
    return True


def acquire(out_uri: str, owner: str, ttl_seconds: float) -> None:
    """Take the lease of `out_uri` for `owner`, or fail if another run holds a live one."""
    out = storage.open_storage(out_uri)
    now = datetime.now(UTC)
    held, etag = _read(out)
    if held is not None and datetime.fromisoformat(held["expires"]) > now \
            and held["owner"] != owner:
        raise PublishConflict(
            f"run {held['owner']} holds the lease of {out_uri} until {held['expires']}; "
            "wait for it to finish, or delete the lease object if that run is dead")
    body = {"owner": owner, "acquired": now.isoformat(), "ttl_seconds": ttl_seconds,
            "expires": (now + timedelta(seconds=ttl_seconds)).isoformat()}
    if not _write(out, body, etag):
        raise PublishConflict(f"another run took the lease of {out_uri} at the same moment")
    log.info("lease: %s holds %s for %.0f s", owner, out_uri, ttl_seconds)


def renew(out_uri: str, owner: str) -> None:
    """Extend `owner`'s lease by its TTL from now; PublishConflict if another run holds it."""
    out = storage.open_storage(out_uri)
    held, etag = _read(out)
    if held is None or held.get("owner") != owner:
        raise PublishConflict(
            f"the lease of {out_uri} is held by {(held or {}).get('owner', 'nobody')}, not this "
            f"run ({owner}): it expired and another run took it; this run stops")
    now = datetime.now(UTC)
    ttl = float(held.get("ttl_seconds") or 0) or (
        datetime.fromisoformat(held["expires"]) - datetime.fromisoformat(held["acquired"])
    ).total_seconds()
    body = {**held, "expires": (now + timedelta(seconds=ttl)).isoformat()}
    if not _write(out, body, etag):
        # Steps of one run may renew at the same moment (mapped tasks, the state beside
        # render): one write wins, and only another owner's lease is a conflict.
        held, _ = _read(out)
        if held is None or held.get("owner") != owner:
            raise PublishConflict(
                f"another run took the lease of {out_uri} while this run renewed it")


def release(out_uri: str, owner: str) -> None:
    """Give the lease back if `owner` still holds it (an expired record, conditionally)."""
    out = storage.open_storage(out_uri)
    held, etag = _read(out)
    if held is None or held.get("owner") != owner:
        return
    now = datetime.now(UTC).isoformat()
    # A conditional write, not a delete: a lease another run took since the read stays.
    if not _write(out, {**held, "expires": now, "released": now}, etag):
        log.info("lease: %s was taken by another run before %s released it", out_uri, owner)
