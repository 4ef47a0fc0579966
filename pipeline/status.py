"""`sitemaps status`: the live generation, whether every file it serves exists (and, deep,
is intact), and whether the root index agrees with it. `sitemaps repair`: make the newest
intact generation live again when the live manifest is empty or broken."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from typing import Any

from pipeline import storage
from pipeline.errors import LiveStateCorrupt, StorageError
from pipeline.publish import (
    GENERATIONS_FOLDER,
    LIVE_MANIFEST_KEY,
    missing_files,
    parse_manifest,
    read_live,
    repair_root,
    snapshot_uri,
)

log = logging.getLogger(__name__)


def status(out_uri: str, deep: bool = False) -> dict[str, Any]:
    """The live generation of `out_uri`, its counts and age, and whether all is in place.

    `ok` is false when a file the live manifest lists is missing or of another size (one
    listing per folder), with `deep` when a shard's sha256 differs, or when the root index
    does not match the live generation's.
    """
    live = read_live(out_uri)
    if live.manifest is None:
        return {"out": out_uri, "live": None, "ok": True}
    m = live.manifest
    out = storage.open_storage(out_uri)
    created = datetime.strptime(m["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    agree = all(out.read_bytes_or_none(i["key"]) == out.read_bytes_or_none(i["generation_key"])
                for i in m["indexes"])
    missing = missing_files(out, m)
    corrupt = []
    if deep:
        for s in m["sitemaps"]:
            if s["key"] in missing:
                continue
            data = out.read_bytes_or_none(s["key"])
            if data is None or hashlib.sha256(data).hexdigest() != s["sha256"]:
                corrupt.append(s["key"])
    return {
        "out": out_uri,
        "live": m["generation"],
        "created": m["created"],
        "age_hours": round((datetime.now(UTC) - created).total_seconds() / 3600, 2),
        "published": m["counts"]["published"],
        "sitemaps": len(m["sitemaps"]),
        "indexes": [i["url"] for i in m["indexes"]],
        "root_index_matches": agree,
        "missing_files": missing,
        **({"corrupt_files": corrupt} if deep else {}),
        "ok": agree and not missing and not corrupt,
    }


def _intact(out: storage.Storage, gen: str, out_uri: str, state_uri: str
            ) -> dict[str, Any] | None:
    raw = out.read_bytes_or_none(f"{GENERATIONS_FOLDER}/{gen}/manifest.json")
    if raw is None:
        return None
    try:
        m = parse_manifest(raw, gen, out_uri)
    except LiveStateCorrupt:
        return None
    if m["generation"] != gen or missing_files(out, m):
        return None
    from pipeline import integrity

    try:
        integrity.verify(snapshot_uri(m, state_uri),
                         (m.get("state_check") or {}).get("snapshot", {}), "", "")
    except LiveStateCorrupt:
        return None
    return m


def repair(out_uri: str, state_uri: str | None = None) -> dict[str, Any]:
    """Make the newest intact generation live when the live manifest is unusable.

    Intact: its manifest parses, every file it lists is there with its size, and its
    snapshot matches what it recorded. The swap is conditional on the broken manifest's
    version, as a commit is. A usable live manifest whose snapshot is intact is left as
    it is (only its root files are brought in line).
    """
    out = storage.open_storage(out_uri)
    state_uri = state_uri or storage.join(out_uri, "_state")
    data, etag = out.read_with_etag(LIVE_MANIFEST_KEY)
    live_gen = None
    if data is not None:
        try:
            live_gen = parse_manifest(data, LIVE_MANIFEST_KEY, out_uri)["generation"]
        except LiveStateCorrupt:
            pass
    if live_gen is not None:
        m = _intact(out, live_gen, out_uri, state_uri)
        if m is not None and m == json.loads(data):  # type: ignore[arg-type]
            fixed = repair_root(out, m)
            return {"out": out_uri, "live": live_gen, "repaired": False, "root_files_fixed": fixed}
    gens = sorted({o.key.split("/")[1] for o in out.list(f"{GENERATIONS_FOLDER}/")
                   if o.key.endswith("/manifest.json")}, reverse=True)
    for gen in gens:
        if gen == live_gen:
            continue
        m = _intact(out, gen, out_uri, state_uri)
        if m is None:
            log.info("repair: generation %s is not intact; trying an older one", gen)
            continue
        out.put_if(LIVE_MANIFEST_KEY, out.read_bytes(f"{GENERATIONS_FOLDER}/{gen}/manifest.json"),
                   if_match=etag, cache_control=storage.CACHE_SHORT)
        fixed = repair_root(out, m)
        log.warning("repair: generation %s is live again (the live manifest was %s)", gen,
                    live_gen or "unreadable")
        return {"out": out_uri, "live": gen, "repaired": True, "previous": live_gen,
                "root_files_fixed": fixed}
    raise StorageError(f"no intact generation under {out.uri(GENERATIONS_FOLDER)}: nothing to "
                       "restore; remove manifest.json to start over with a first generation "
                       "(lastmods then restart from this run)")
