"""A lease: a lock object with an expiry, so two runs do not both render for nothing.

The lease is only an optimisation; correctness comes from the conditional
manifest swap, which refuses a run that lost a race whether or not it held a lease.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

from pipeline import storage
from pipeline.errors import PublishConflict

log = logging.getLogger(__name__)

LEASE_KEY = "_lease.json"


def acquire(out_uri: str, owner: str, ttl_seconds: float) -> None:
    """Take the lease of `out_uri` for `owner`, or fail if another run holds a live one."""
    out = storage.open_storage(out_uri)
    now = datetime.now(UTC)
    data, etag = out.read_with_etag(LEASE_KEY)
    if data is not None:
        held = json.loads(data)
        if datetime.fromisoformat(held["expires"]) > now and held["owner"] != owner:
            raise PublishConflict(
                f"run {held['owner']} holds the lease of {out_uri} until {held['expires']}; "
                "wait for it to finish, or delete the lease object if that run is dead")
    body = json.dumps({"owner": owner, "acquired": now.isoformat(),
                       "expires": (now + timedelta(seconds=ttl_seconds)).isoformat()}).encode()
    out.put_if(LEASE_KEY, body, if_match=etag)
    log.info("lease: %s holds %s for %.0f s", owner, out_uri, ttl_seconds)


def release(out_uri: str, owner: str) -> None:
    """Give the lease back if `owner` still holds it."""
    out = storage.open_storage(out_uri)
    data = out.read_bytes_or_none(LEASE_KEY)
    if data is not None and json.loads(data)["owner"] == owner:
        out.delete([LEASE_KEY])
