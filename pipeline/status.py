"""`sitemaps status`: the live generation and whether the root index agrees with it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pipeline import storage
from pipeline.publish import read_live


def status(out_uri: str) -> dict[str, Any]:
    """The live generation of `out_uri`, its counts and age, and root index agreement."""
    live = read_live(out_uri)
    if live.manifest is None:
        return {"out": out_uri, "live": None}
    m = live.manifest
    out = storage.open_storage(out_uri)
    created = datetime.strptime(m["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    agree = all(out.read_bytes_or_none(i["key"]) == out.read_bytes(i["generation_key"])
                for i in m["indexes"])
    return {
        "out": out_uri,
        "live": m["generation"],
        "created": m["created"],
        "age_hours": round((datetime.now(UTC) - created).total_seconds() / 3600, 2),
        "published": m["counts"]["published"],
        "sitemaps": len(m["sitemaps"]),
        "indexes": [i["url"] for i in m["indexes"]],
        "root_index_matches": agree,
    }
