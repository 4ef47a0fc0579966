"""Garbage collection: delete files that no kept generation references, after a grace period.

Kept: the live generation and the ones before it, `keep` in all (from the
live manifest's history), and every generation of the last `keep_days`. The
grace period protects two kinds of files:

- those of a generation that stopped being live less than `grace_hours` ago
  (the manifest records when each was retired): a crawler that fetched its index
  just before the swap still finds every file it lists, however old the file is;
- those no generation references (a run in progress, or a failed one) that were
  written less than `grace_hours` ago.

GC decides from one listing, then looks again just before it deletes (`collect`):
the live manifest is read again and the folders listed again, and a file that the
live generation now lists, or that was written since (a run that brought content
back rewrites the same digest key), is not deleted; nor is the state of the
generation live then (a rollback may have made it live again meanwhile). A rollback or
repair racing GC is settled by two marks: GC marks each generation whose files it is about
to delete (`collecting.json`) before it lists the pins, and a rollback or repair pins its
target (`pinned.json`) before it looks for that mark, so either GC sees the pin and spares
the target, or the rollback sees the mark and refuses. Incomplete multipart uploads,
temporary files of interrupted local writes, the work folders of dead local
runs and the rejects of refused runs (`refused/`) older than the grace period go too.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from pipeline import storage
from pipeline.errors import LiveStateCorrupt
from pipeline.layout import (
    COLLECTING,
    COMMIT_RECORD,
    GENERATION_MANIFEST,
    GENERATIONS_FOLDER,
    PIN,
    REFUSED_FOLDER,
    REPORT_KEY,
    ROLLED_BACK,
    RUNS_FOLDER,
    SHARDS_FOLDER,
    generation_key,
    generation_time,
)
from pipeline.manifest import Manifest, read_stored
from pipeline.publish import read_live, utcnow
from pipeline.settings import default_of
from pipeline.state_owner import check_owner
from pipeline.w3c import format_w3c, parse_w3c

log = logging.getLogger(__name__)

#: Generations kept, and the hours a file stays after no kept generation references it
#: (the run options' defaults).
DEFAULT_KEEP: int = default_of("keep_generations")
DEFAULT_GRACE_HOURS: float = default_of("gc_grace_hours")
#: Generations of the last days kept too: the change feed covers 7 days.
DEFAULT_KEEP_DAYS = 7.0
#: A run's own work folder in the temp directory (pipeline.steps.begin makes it).
WORK_FOLDER_PREFIX = "sitemaps-work-"
#: The file a live run holds an exclusive lock on inside its work folder.
WORK_LOCK = ".lock"
_held_locks: dict[str, BinaryIO] = {}
#: A pin or a collecting mark older than this was left by a process that died: ignored.
MARK_HOURS = 6.0


def pin(out: storage.Storage, generation: str, by: str) -> None:
    """Claim `generation` for a rollback or repair (`by`) about to make it live: GC spares
    its files (see the module doc). `unpin` when done."""
    out.write_bytes(generation_key(generation, PIN),
                    json.dumps({"at": format_w3c(utcnow()), "by": by}).encode())


def unpin(out: storage.Storage, generation: str) -> None:
    out.delete([generation_key(generation, PIN)])


def _fresh_marks(out: storage.Storage, prefix: str, name: str) -> set[str]:
    """The generations below `prefix` with a mark `name` written in the last MARK_HOURS."""
    since = utcnow() - timedelta(hours=MARK_HOURS)
    return {o.key.split("/")[1] for o in out.list(prefix)
            if o.key.endswith("/" + name) and o.modified > since}


def being_collected(out: storage.Storage, generation: str) -> bool:
    """Whether a GC has marked `generation` for deletion (after it was pinned: refuse)."""
    return generation in _fresh_marks(out, generation_key(generation), COLLECTING)


def referenced_keys(out: storage.Storage, generations: list[str],
                    unreadable: list[str] | None = None) -> set[str]:
    """Every key below the output root that one of `generations` needs; a generation whose
    manifest is broken (which files it needs is unknown) is added to `unreadable`."""
    keys: set[str] = set()
    for gen in generations:
        try:
            m = read_stored(out, gen)
        except LiveStateCorrupt as exc:
            log.warning("gc: %s", exc)
            if unreadable is not None:
                unreadable.append(gen)
            continue
        if m is None:
            continue
        keys.update(generation_key(gen, name) for name in (
            GENERATION_MANIFEST, REPORT_KEY, ROLLED_BACK, COMMIT_RECORD, PIN))
        keys.update(s["key"] for s in m["sitemaps"])
        keys.update(i["generation_key"] for i in m["indexes"])
    return keys


@dataclass
class Decision:
    """What GC would delete, decided from one listing; `collect` looks again first."""

    out_uri: str
    state_uri: str
    cutoff: datetime
    kept: list[str]
    doomed: list[str] = field(default_factory=list)
    doomed_state: list[str] = field(default_factory=list)
    temporaries: list[str] = field(default_factory=list)
    state_temporaries: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GcResult:
    """What gc deleted (or, on a dry run, would delete) and which generations it kept."""

    #: Empty when there is no live generation (nothing was deleted).
    kept_generations: list[str]
    #: Output keys, then private state keys, then leftover temporary files.
    deleted: list[str]
    deleted_state: list[str]
    deleted_temporaries: list[str]
    dry_run: bool
    aborted_uploads: int
    work_folders_removed: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def decide(out_uri: str, state_uri: str, *, keep: int = DEFAULT_KEEP,
           grace_hours: float = DEFAULT_GRACE_HOURS, now: datetime | None = None,
           keep_days: float = DEFAULT_KEEP_DAYS) -> Decision:
    """What no kept or recently retired generation references, written before the grace."""
    if keep < 1:
        raise ValueError("keep must be at least 1: the live generation is always kept")
    now = now or utcnow()
    cutoff = now - timedelta(hours=grace_hours)
    live = read_live(out_uri)
    if live.manifest is None:
        return Decision(out_uri, state_uri, cutoff, [])
    out = storage.open_storage(out_uri)
    state = storage.open_storage(state_uri)
    history = list(live.manifest.get("history") or [live.manifest["generation"]])
    kept = kept_generations(history, keep=keep, keep_days=keep_days, now=now)
    # Grace counts from retirement: a generation live until a moment ago keeps all its files.
    retired = live.manifest.get("retired") or {}
    in_grace = [g for g in history if g not in kept and g in retired
                and parse_w3c(retired[g]) > cutoff]
    unreadable: list[str] = []
    needed = referenced_keys(out, kept + in_grace, unreadable)
    # The live manifest itself must never lose what it lists, whatever the history says.
    needed.update(live_keys(live.manifest))
    # A kept generation whose manifest is broken may need any shard: none goes while it
    # is kept, nor anything of its folder.
    folders = [f"{GENERATIONS_FOLDER}/"] if unreadable else [f"{SHARDS_FOLDER}/",
                                                              f"{GENERATIONS_FOLDER}/"]
    if unreadable:
        log.warning("gc: the manifest of kept generation(s) %s is broken: no shard is deleted "
                    "while they are kept (`sitemaps status` lists them)", ", ".join(unreadable))
    broken = tuple(generation_key(g) for g in unreadable)
    doomed = [o.key for folder in folders for o in out.list(folder)
              if o.key not in needed and o.modified < cutoff and not o.key.startswith(broken)]
    kept_state = {generation_key(g) for g in kept + in_grace}
    doomed_state = [o.key for folder in (f"{GENERATIONS_FOLDER}/", f"{RUNS_FOLDER}/",
                                                f"{REFUSED_FOLDER}/")
                    for o in state.list(folder)
                    if not any(o.key.startswith(k) for k in kept_state) and o.modified < cutoff]
    temporaries = [o.key for o in out.list_temporaries() if o.modified < cutoff]
    state_temporaries = [o.key for o in state.list_temporaries() if o.modified < cutoff] \
        if state.root != out.root else []
    return Decision(out_uri, state_uri, cutoff, kept + in_grace, doomed, doomed_state,
                    temporaries, state_temporaries)


def kept_generations(history: list[str], *, keep: int, keep_days: float, now: datetime
                     ) -> list[str]:
    """The last `keep` generations of `history` (newest first), and every one made in the
    last `keep_days` (the feed and the report's trend read them): generation ids begin
    with their UTC time (layout.generation_time), so they compare with a time."""
    since = generation_time(now - timedelta(days=keep_days))
    return history[:keep] + [g for g in history[keep:] if g >= since]


def live_keys(manifest: Manifest) -> set[str]:
    return {s["key"] for s in manifest["sitemaps"]} | {
        i["generation_key"] for i in manifest["indexes"]}


def collect(decision: Decision) -> tuple[list[str], int]:
    """Delete what `decision` doomed and still is: returns (deleted keys, aborted uploads).

    Looks again first, since a run may have committed or rewritten a key meanwhile.
    """
    out = storage.open_storage(decision.out_uri)
    state = storage.open_storage(decision.state_uri)
    # Mark, then read the pins, then the live manifest (module doc): a rollback that
    # pinned its target before the mark is seen here, one that swapped is live below.
    marked = sorted({k.split("/")[1] for k in decision.doomed
                     if k.startswith(f"{GENERATIONS_FOLDER}/")})
    mark = json.dumps({"at": format_w3c(utcnow())}).encode()
    for gen in marked:
        out.write_bytes(generation_key(gen, COLLECTING), mark)
    try:
        return _collect(decision, out, state)
    finally:
        out.delete([generation_key(gen, COLLECTING) for gen in marked])


def _collect(decision: Decision, out: storage.Storage, state: storage.Storage
             ) -> tuple[list[str], int]:
    pinned = sorted(_fresh_marks(out, f"{GENERATIONS_FOLDER}/", PIN))
    spared = referenced_keys(out, pinned)
    if pinned:
        log.info("gc: generation(s) %s are pinned by a rollback or repair: their files stay",
                 ", ".join(pinned))
    live = read_live(decision.out_uri)
    spared |= live_keys(live.manifest) if live.manifest else set()
    if live.manifest and live.manifest["generation"] not in decision.kept:
        spared |= referenced_keys(out, [live.manifest["generation"]])
    folders = {k.rpartition("/")[0] + "/" for k in decision.doomed}
    if folders:
        # One fresh listing: only files still older than the grace period go.
        old = {o.key for f in sorted({f.split("/")[0] + "/" for f in folders})
               for o in out.list(f) if o.modified < decision.cutoff}
    else:
        old = set()
    doomed = [k for k in decision.doomed if k in old and k not in spared]
    if len(doomed) < len(decision.doomed):
        log.info("gc: %d file(s) spared: written or made live again since GC listed them",
                 len(decision.doomed) - len(doomed))
    out.delete(doomed)
    # A rollback may have made a generation GC had given up live again since: its state
    # (the snapshot the next run diffs against) stays.
    kept_state = tuple(generation_key(g) for g in pinned + (
        [live.manifest["generation"]] if live.manifest else []))
    doomed_state = [k for k in decision.doomed_state if not k.startswith(kept_state)]
    state.delete(doomed_state)
    out.delete(decision.temporaries)
    state.delete(decision.state_temporaries)
    aborted = out.abort_incomplete_uploads(decision.cutoff)
    if state.root != out.root:
        aborted += state.abort_incomplete_uploads(decision.cutoff)
    return doomed, aborted


def gc(out_uri: str, state_uri: str, *, keep: int = DEFAULT_KEEP,
       grace_hours: float = DEFAULT_GRACE_HOURS, dry_run: bool = False,
       now: datetime | None = None, keep_days: float = DEFAULT_KEEP_DAYS) -> GcResult:
    """Delete (or, with `dry_run`, list) what no kept generation references."""
    check_owner(out_uri, state_uri, claim=not dry_run)
    d = decide(out_uri, state_uri, keep=keep, grace_hours=grace_hours, now=now,
               keep_days=keep_days)
    deleted, aborted, work = d.doomed, 0, 0
    if not dry_run:
        deleted, aborted = collect(d)
        work = collect_work_folders(d.cutoff)
    log.debug("gc: %s %d output and %d state files and %d temporary file(s) (keeping "
              "generations %s, grace %.0f h); %d incomplete uploads aborted, %d dead work "
              "folder(s) removed", "would delete" if dry_run else "deleted", len(deleted),
              len(d.doomed_state), len(d.temporaries) + len(d.state_temporaries),
              ", ".join(d.kept), grace_hours, aborted, work)
    return GcResult(kept_generations=d.kept, deleted=deleted, deleted_state=d.doomed_state,
                    deleted_temporaries=d.temporaries + d.state_temporaries, dry_run=dry_run,
                    aborted_uploads=aborted, work_folders_removed=work)


def make_work_folder() -> str:
    """A run's own work folder in the temp directory, locked while this process lives."""
    path = tempfile.mkdtemp(prefix=WORK_FOLDER_PREFIX)
    lock = open(os.path.join(path, WORK_LOCK), "wb")  # noqa: SIM115 - held until release
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    _held_locks[path] = lock
    return path


def release_work_folder(path: str) -> None:
    lock = _held_locks.pop(path, None)
    if lock is not None:
        lock.close()


def collect_work_folders(cutoff: datetime, base: str | None = None) -> int:
    """Remove work folders of dead runs (their lock is free) last changed before `cutoff`.

    Folders without a lock file (older versions, or someone else's) are left alone.
    """
    n = 0
    for folder in Path(base or tempfile.gettempdir()).glob(WORK_FOLDER_PREFIX + "*"):
        lock_path = folder / WORK_LOCK
        try:
            if datetime.fromtimestamp(folder.stat().st_mtime, UTC) >= cutoff:
                continue
            with open(lock_path, "rb") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while its run lives
                shutil.rmtree(folder)
                n += 1
        except (OSError, BlockingIOError):
            continue
    return n

