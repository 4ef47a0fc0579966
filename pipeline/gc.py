"""Garbage collection: delete files that no kept generation references, after a grace period.

Kept: the live generation and the ones before it, `keep` in all (from the
live manifest's history). A file is deleted only if none of them references
it AND it is older than the grace period, since crawlers hold an old index
for a while and a run in progress has uploaded files it has not committed
yet. Incomplete multipart uploads older than the grace period are aborted.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline import storage
from pipeline.plan import SHARDS_FOLDER
from pipeline.publish import GENERATIONS_FOLDER, read_live

log = logging.getLogger(__name__)

DEFAULT_KEEP = 3
DEFAULT_GRACE_HOURS = 48.0
#: Generations of the last days kept too: the change feed covers 7 days.
DEFAULT_KEEP_DAYS = 7.0


def referenced_keys(out: storage.Storage, generations: list[str]) -> set[str]:
    """Every key below the output root that one of `generations` needs."""
    keys: set[str] = set()
    for gen in generations:
        raw = out.read_bytes_or_none(f"{GENERATIONS_FOLDER}/{gen}/manifest.json")
        if raw is None:
            continue
        m = json.loads(raw)
        keys.add(f"{GENERATIONS_FOLDER}/{gen}/manifest.json")
        keys.add(f"{GENERATIONS_FOLDER}/{gen}/report.html")
        keys.update(s["key"] for s in m["sitemaps"])
        keys.update(i["generation_key"] for i in m["indexes"])
    return keys


def gc(out_uri: str, state_uri: str, *, keep: int = DEFAULT_KEEP,
       grace_hours: float = DEFAULT_GRACE_HOURS, dry_run: bool = False,
       now: datetime | None = None, keep_days: float = DEFAULT_KEEP_DAYS) -> dict[str, Any]:
    """Delete (or, with `dry_run`, list) what no kept generation references."""
    if keep < 1:
        raise ValueError("keep must be at least 1: the live generation is always kept")
    out = storage.open_storage(out_uri)
    state = storage.open_storage(state_uri)
    live = read_live(out_uri)
    cutoff = (now or datetime.now(UTC)) - timedelta(hours=grace_hours)
    if live.manifest is None:
        return {"kept_generations": [], "deleted": [], "dry_run": dry_run, "aborted_uploads": 0}
    history = list(live.manifest.get("history") or [live.manifest["generation"]])
    # The last `keep` generations, and every one of the last `keep_days` (the feed and the
    # report's trend read them); generation ids start with their UTC time.
    since = ((now or datetime.now(UTC)) - timedelta(days=keep_days)).strftime("%Y%m%dT%H%M%SZ")
    kept = history[:keep] + [g for g in history[keep:] if g >= since]
    needed = referenced_keys(out, kept)
    # The live manifest itself must never lose what it lists, whatever the history says.
    needed.update(s["key"] for s in live.manifest["sitemaps"])
    needed.update(i["generation_key"] for i in live.manifest["indexes"])
    doomed = [o.key for folder in (f"{SHARDS_FOLDER}/", f"{GENERATIONS_FOLDER}/")
              for o in out.list(folder) if o.key not in needed and o.modified < cutoff]
    kept_state = {f"{GENERATIONS_FOLDER}/{g}/" for g in kept}
    doomed_state = [o.key for folder in (f"{GENERATIONS_FOLDER}/", "runs/")
                    for o in state.list(folder)
                    if not any(o.key.startswith(k) for k in kept_state) and o.modified < cutoff]
    aborted = 0
    if not dry_run:
        out.delete(doomed)
        state.delete(doomed_state)
        aborted = out.abort_incomplete_uploads(cutoff)
        if state.root != out.root:
            aborted += state.abort_incomplete_uploads(cutoff)
    log.info("gc: %s %d output and %d state files (keeping generations %s, grace %.0f h); "
             "%d incomplete uploads aborted", "would delete" if dry_run else "deleted",
             len(doomed), len(doomed_state), ", ".join(kept), grace_hours, aborted)
    return {"kept_generations": kept, "deleted": doomed,
            "deleted_state": doomed_state, "dry_run": dry_run, "aborted_uploads": aborted}
