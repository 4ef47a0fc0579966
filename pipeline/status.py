"""`sitemaps status`: the live generation, whether every file it serves exists (and, deep,
is intact), whether the root index agrees with it, and the kept generations. `sitemaps
repair`: make the last committed intact generation live again when the live manifest is
empty or broken. `sitemaps rollback`: make a kept generation live again on purpose.

Repair and rollback share one machinery: the check that a generation is intact (its
manifest parses, every file it lists is there with its size, its snapshot is the one it
recorded), the conditional swap of `manifest.json` on the version just read (a publish
racing it loses, or wins, cleanly: exit 3 for the loser) and the root files' repair."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pipeline import manifest as manifest_model
from pipeline import storage
from pipeline.errors import ConfigError, LiveStateCorrupt, PublishConflict, StorageError
from pipeline.gc import being_collected, pin, unpin
from pipeline.layout import (
    COMMIT_RECORD,
    GENERATION_MANIFEST,
    GENERATIONS_FOLDER,
    LIVE_MANIFEST_KEY,
    ROLLED_BACK,
    generation_key,
)
from pipeline.manifest import Manifest
from pipeline.publish import (
    LiveState,
    live_files,
    missing_files,
    next_sequence,
    parse_manifest,
    read_live,
    repair_root,
    snapshot_uri,
    utcnow,
)
from pipeline.state_owner import check_owner, legacy_state_in_use, resolve_state
from pipeline.w3c import format_w3c, parse_w3c

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeptGeneration:
    """A generation of the live history whose manifest is still stored."""

    generation: str
    live: bool
    created: str
    age_hours: float
    published: int
    sitemaps: int
    #: When it stopped being live (None: the live one, or not recorded).
    retired: str | None
    #: Files it lists that are absent or of another size (0: it can be rolled back to).
    missing_files: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Status:
    """`sitemaps status`: the live generation and whether all is in place (`ok`)."""

    out: str
    #: The live generation's id; None when there is none (every other field unset).
    live: str | None
    ok: bool
    created: str | None = None
    age_hours: float | None = None
    published: int | None = None
    sitemaps: int | None = None
    #: The public URLs of the root index(es).
    indexes: list[str] = field(default_factory=list)
    root_index_matches: bool | None = None
    missing_files: list[str] = field(default_factory=list)
    #: Shards whose sha256 differs; None unless checked (`deep`).
    corrupt_files: list[str] | None = None
    #: The live manifest's `rollback` (from which generation, when), when it is a rollback's.
    rollback: dict[str, Any] | None = None
    generations: list[KeptGeneration] = field(default_factory=list)
    #: Generations of the history whose stored manifest is empty or broken (`ok` is false:
    #: they cannot be rolled back to, and gc keeps every shard while they are kept).
    broken_generations: list[str] = field(default_factory=list)
    #: What is not wrong with the output but may be with how it is served (`ok` unaffected):
    #: the private state below --out (`served_state_warning`).
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, in the order `sitemaps status` prints; `corrupt_files` only when
        checked, `rollback` only when set, nothing but out, live and ok without a live one."""
        if self.live is None:
            return {"out": self.out, "live": None, "ok": self.ok}
        return {
            "out": self.out, "live": self.live, "created": self.created,
            "age_hours": self.age_hours, "published": self.published,
            "sitemaps": self.sitemaps, "indexes": self.indexes,
            "root_index_matches": self.root_index_matches, "missing_files": self.missing_files,
            **({"corrupt_files": self.corrupt_files} if self.corrupt_files is not None else {}),
            **({"rollback": self.rollback} if self.rollback else {}),
            "generations": [g.to_dict() for g in self.generations],
            **({"broken_generations": self.broken_generations}
               if self.broken_generations else {}),
            **({"warnings": self.warnings} if self.warnings else {}),
            "ok": self.ok,
        }


@dataclass(frozen=True)
class RepairResult:
    """`sitemaps repair`: which generation is live, and whether it had to be restored."""

    out: str
    live: str
    repaired: bool
    root_files_fixed: int
    #: The generation the broken live manifest named (None: unreadable); only when repaired.
    previous: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"out": self.out, "live": self.live, "repaired": self.repaired}
        if self.repaired:
            d["previous"] = self.previous
        return d | {"root_files_fixed": self.root_files_fixed}


@dataclass(frozen=True)
class RollbackResult:
    """`sitemaps rollback`: the generation live again and the one it replaced."""

    out: str
    live: str
    previous: str
    published: int
    sitemaps: int
    committed: str
    root_files_fixed: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def served_state_warning(out_uri: str, state_uri: str | None) -> str | None:
    """A warning when the private state (`state_uri`, default `<out>.state`, or an older
    `<out>/_state` that holds one: the snapshot of every URL, the rejects, the run reports)
    lies below `out_uri`, which is served: whoever serves --out as it is serves them too.
    None when the state is elsewhere (the default `<out>.state` is never below it)."""
    state_uri = state_uri or legacy_state_in_use(out_uri)
    if state_uri is None or not storage.is_strictly_below(out_uri, state_uri):
        return None
    return (f"the private state {state_uri} (every URL's snapshot, the rejects, the run "
            f"reports) is below --out {out_uri}: serve --out without it (deny every path "
            "below it), or move it out of --out (README, \"What it writes\")")


def status(out_uri: str, deep: bool = False, state_uri: str | None = None) -> Status:
    """The live generation of `out_uri`, its counts and age, and whether all is in place.

    `ok` is false when a file the live manifest lists is missing or of another size (one
    listing per folder), with `deep` when a shard's sha256 differs, or when the root index
    does not match the live generation's. `warnings`: the state (`state_uri`, or an older
    `<out>/_state` in use) below --out, served with it unless the server leaves it out.
    """
    live = read_live(out_uri)
    if live.manifest is None:
        return Status(out=out_uri, live=None, ok=True)
    m = live.manifest
    out = storage.open_storage(out_uri)
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
    broken: list[str] = []
    kept = kept_generations(out, m, broken)
    return Status(
        out=out_uri, live=m["generation"], created=m["created"],
        age_hours=_age_hours(m["created"]), published=m["counts"]["published"],
        sitemaps=len(m["sitemaps"]), indexes=[i["url"] for i in m["indexes"]],
        root_index_matches=agree, missing_files=missing,
        corrupt_files=corrupt if deep else None, rollback=m.get("rollback") or None,
        generations=kept, broken_generations=broken,
        warnings=[w for w in [served_state_warning(out_uri, state_uri)] if w],
        ok=agree and not missing and not corrupt and not broken)


def _age_hours(created: str) -> float:
    t = parse_w3c(created)
    return round((datetime.now(UTC) - t).total_seconds() / 3600, 2)


def kept_generations(out: storage.Storage, live: Manifest, broken: list[str] | None = None
                     ) -> list[KeptGeneration]:
    """The live history's generations whose manifest is still stored, newest first: counts,
    age, when each stopped being live, and whether every file it lists is there (so it can
    be rolled back to; its snapshot is checked by the rollback itself). One listing per
    folder for all of them. Those whose stored manifest is broken go to `broken`."""
    found: dict[str, int] = {}
    listed: set[str] = set()
    rows: list[KeptGeneration] = []
    retired = live.get("retired") or {}
    for gen in live.get("history") or [live["generation"]]:
        if gen == live["generation"]:
            m: Manifest | None = live
        else:
            try:
                m = manifest_model.read_stored(out, gen)
            except LiveStateCorrupt:
                if broken is not None:
                    broken.append(gen)
                continue  # not a generation one can go back to
        if m is None:
            continue  # garbage-collected
        want = live_files(m)
        for folder in {k.rpartition("/")[0] + "/" for k in want} - listed:
            found.update((o.key, o.size) for o in out.list(folder))
            listed.add(folder)
        missing = sum(1 for k, size in want.items() if found.get(k) != size)
        rows.append(KeptGeneration(
            generation=gen, live=gen == live["generation"], created=m["created"],
            age_hours=_age_hours(m["created"]),
            published=int((m.get("counts") or {}).get("published", 0)),
            sitemaps=len(m["sitemaps"]), retired=retired.get(gen), missing_files=missing))
    return rows


def _check_generation(out: storage.Storage, gen: str, out_uri: str, state_uri: str
                      ) -> tuple[Manifest | None, str]:
    """(its manifest, "") when generation `gen` is intact, else (None, what is wrong)."""
    raw = out.read_bytes_or_none(generation_key(gen, GENERATION_MANIFEST))
    if raw is None:
        return None, f"its manifest {out.uri(generation_key(gen, GENERATION_MANIFEST))} is " \
                     "gone (garbage-collected, or never written)"
    try:
        m = parse_manifest(raw, gen, out_uri)
    except LiveStateCorrupt:
        return None, "its manifest is empty or not a valid manifest"
    if m["generation"] != gen:
        return None, f"its manifest is generation {m['generation']}'s"
    missing = missing_files(out, m)
    if missing:
        return None, (f"{len(missing)} of the {len(live_files(m))} files it lists are missing "
                      f"or of another size, e.g. {missing[0]} (garbage-collected?)")
    from pipeline import integrity

    try:
        integrity.verify(snapshot_uri(m, state_uri),
                         (m.get("state_check") or {}).get("snapshot", {}), "its snapshot",
                         "the next run could not diff against it")
    except LiveStateCorrupt as exc:
        return None, str(exc)
    return m, ""


def _intact(out: storage.Storage, gen: str, out_uri: str, state_uri: str
            ) -> Manifest | None:
    return _check_generation(out, gen, out_uri, state_uri)[0]


#: Manifest fields that say when and how a generation went live, not what it publishes: a
#: rollback rewrites them, so a live manifest may differ from its generation's copy there.
BOOKKEEPING = ("previous", "history", "committed", "retired", "rollback", "sequence")


def _content(m: Manifest) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k not in BOOKKEEPING}


def rolled_back_key(generation: str) -> str:
    """The marker a rollback leaves on the generation it took out of service: repair of an
    output without commit records prefers any other intact generation to it."""
    return generation_key(generation, ROLLED_BACK)




def repair(out_uri: str, state_uri: str | None = None) -> RepairResult:
    """Make the newest committed intact generation live when the live manifest is unusable.

    Committed: a swap made it live (its commit record, or a committed generation's history
    names it), so a generation whose run stopped before its swap is never made live.
    Newest: the highest commit sequence, not the id (a run's clock may be behind). Intact:
    its manifest parses, every file it lists is there with its size, and its snapshot
    matches what it recorded. The swap is conditional on the broken manifest's version, as
    a commit is. A usable live manifest whose snapshot is intact is left as it is (only its
    root files are brought in line).
    """
    out = storage.open_storage(out_uri)
    state_uri = resolve_state(out_uri, state_uri)
    check_owner(out_uri, state_uri, claim=False)
    data, etag = out.read_with_etag(LIVE_MANIFEST_KEY)
    live_gen = None
    if data is not None:
        try:
            live_gen = parse_manifest(data, LIVE_MANIFEST_KEY, out_uri)["generation"]
        except LiveStateCorrupt:
            pass
    if live_gen is not None:
        m = _intact(out, live_gen, out_uri, state_uri)
        assert data is not None
        if m is not None and _content(m) == _content(manifest_model.loads(data)):
            fixed = repair_root(out, manifest_model.loads(data))
            return RepairResult(out=out_uri, live=live_gen, repaired=False,
                                root_files_fixed=fixed)
    records = _commit_records(out)
    for gen in _repair_candidates(out, records):
        if gen == live_gen:
            continue
        pin(out, gen, "repair")
        try:
            if being_collected(out, gen):
                log.info("repair: gc is deleting generation %s; trying an older one", gen)
                continue
            m = _intact(out, gen, out_uri, state_uri)
            if m is None:
                log.info("repair: generation %s is not intact; trying an older one", gen)
                continue
            # A commit of its own: the next publish's sequence follows every one recorded.
            restored: Manifest = {**m, "sequence": max(records.values(), default=0) + 1,
                                  "committed": format_w3c(utcnow())}
            out.put_if(LIVE_MANIFEST_KEY, manifest_model.dumps(restored), if_match=etag,
                       cache_control=storage.CACHE_SHORT)
        finally:
            unpin(out, gen)
        fixed = repair_root(out, restored)
        log.warning("repair: generation %s is live again (the live manifest was %s)", gen,
                    live_gen or "unreadable")
        return RepairResult(out=out_uri, live=gen, repaired=True, previous=live_gen,
                            root_files_fixed=fixed)
    raise StorageError(f"no intact generation under {out.uri(GENERATIONS_FOLDER)}: nothing to "
                       "restore; remove manifest.json to start over with a first generation "
                       "(lastmods then restart from this run)")


def _commit_records(out: storage.Storage) -> dict[str, int]:
    """Each generation's commit sequence, from its commit record (unreadable: none)."""
    records: dict[str, int] = {}
    for o in out.list(f"{GENERATIONS_FOLDER}/"):
        if o.key.endswith("/" + COMMIT_RECORD):
            try:
                rec = json.loads(out.read_bytes_or_none(o.key) or b"")
                records[o.key.split("/")[1]] = int(rec["sequence"])
            except (ValueError, KeyError, TypeError):
                log.warning("repair: %s is not a commit record; ignored", out.uri(o.key))
    return records


def _repair_candidates(out: storage.Storage, records: dict[str, int]) -> list[str]:
    """The generations repair may make live, the one to try first first.

    With commit records: the recorded ones by sequence, newest first, then the ones their
    histories name without a record (committed by a version that wrote none, or whose
    record a crash lost), in history order. Without any (an output of an older version):
    every stored generation by id, newest first, but one a rollback took out of service
    last, so a rollback survives a broken manifest.json.
    """
    listed = [o.key for o in out.list(f"{GENERATIONS_FOLDER}/")]
    if not records:
        rolled_back = {k.split("/")[1] for k in listed if k.endswith("/" + ROLLED_BACK)}
        return sorted({k.split("/")[1] for k in listed if k.endswith("/" + GENERATION_MANIFEST)},
                      key=lambda g: (g not in rolled_back, g), reverse=True)
    ordered = sorted(records, key=lambda g: (records[g], g), reverse=True)
    named: list[str] = []
    for gen in ordered:
        try:
            m = manifest_model.read_stored(out, gen)
        except LiveStateCorrupt:
            m = None  # not intact: tried and skipped below, its history unknown
        history = m.get("history") if m else None
        named += [g for g in history or [] if isinstance(g, str) and g not in records
                  and g not in named]
    return ordered + named


def rollback(out_uri: str, state_uri: str | None = None, to: str | None = None
             ) -> RollbackResult:
    """Make generation `to` (default: the one before the live one) live again.

    `to` must be in the live manifest's history and intact (every file it lists there with
    its size, its snapshot the one it recorded), checked before the swap; otherwise
    ConfigError (exit 2) says why and nothing changes. The new live manifest is that
    generation's, with the bookkeeping of a commit: `history` (it comes first, once),
    `previous`, `committed`, `retired` (the generation it replaces retires now, so GC's grace
    period protects its files) and `rollback` (from which generation, when). The swap is
    conditional on the live manifest's version read here: a publish that commits first makes
    the rollback fail with PublishConflict (exit 3) and a rollback that commits first makes
    the publish fail the same way. Then the root index(es) and robots lines follow it.
    The next run diffs against that generation's snapshot.
    """
    out = storage.open_storage(out_uri)
    state_uri = resolve_state(out_uri, state_uri)
    check_owner(out_uri, state_uri, claim=False)
    live = read_live(out_uri)  # a broken manifest: LiveStateCorrupt, use repair
    if live.manifest is None:
        raise ConfigError(f"no generation at {out_uri}: nothing to roll back")
    current = live.manifest
    history = list(current.get("history") or [current["generation"]])
    if to is None:
        if len(history) < 2:
            raise ConfigError(f"generation {current['generation']} is the only one in the "
                              f"history of {out_uri}: there is none before it to roll back to")
        to = history[1]
    if to == current["generation"]:
        raise ConfigError(f"generation {to} is already live in {out_uri}: nothing to do")
    if to not in history:
        kept = ", ".join(g.generation for g in kept_generations(out, current)
                         if not g.live) or "none"
        raise ConfigError(f"generation {to} is not in the history of {out_uri}; the kept "
                          f"generations one can roll back to: {kept} (`sitemaps status`)")
    new_history = [to] + [g for g in history if g != to][:50]
    # Pinned while it is checked and swapped: gc either sees the pin or has marked it.
    pin(out, to, "rollback")
    try:
        if being_collected(out, to):
            raise ConfigError(f"cannot roll back to generation {to}: gc is deleting its files "
                              f"now; generation {current['generation']} stays live")
        target, problem = _check_generation(out, to, out_uri, state_uri)
        if target is None:
            raise ConfigError(f"cannot roll back to generation {to}: {problem}; generation "
                              f"{current['generation']} stays live")
        manifest = _swap_back(out, out_uri, live, target, to, new_history)
    finally:
        unpin(out, to)
    # After the swap: a marker written before a lost race would mislead repair.
    out.write_bytes(rolled_back_key(current["generation"]),
                    json.dumps(manifest["rollback"] | {"to": to}).encode())
    out.delete([rolled_back_key(to)] if out.exists(rolled_back_key(to)) else [])
    log.warning("rollback: generation %s is live again in %s (was %s)", to, out_uri,
                current["generation"])
    fixed = repair_root(out, manifest, previous=current)
    return RollbackResult(out=out_uri, live=to, previous=current["generation"],
                          published=int(target["counts"].get("published", 0)),
                          sitemaps=len(target["sitemaps"]), committed=manifest["committed"],
                          root_files_fixed=fixed)


def _swap_back(out: storage.Storage, out_uri: str, live: LiveState, target: Manifest, to: str,
               history: list[str]) -> Manifest:
    """The rollback's commit: `target` live with a commit's bookkeeping, conditional on the
    live manifest's version; returns the manifest now live."""
    current = live.manifest
    assert current is not None
    committed = format_w3c(utcnow())
    retired = {g: t for g, t in (current.get("retired") or {}).items()
               if g in history and g != to}
    retired[current["generation"]] = committed
    manifest: Manifest = {**target, "previous": current["generation"], "history": history,
                          "committed": committed, "retired": retired,
                          "sequence": next_sequence(current),
                          "rollback": {"from": current["generation"], "at": committed}}
    body = manifest_model.dumps(manifest)
    try:
        out.put_if(LIVE_MANIFEST_KEY, body, if_match=live.etag, cache_control=storage.CACHE_SHORT)
    except PublishConflict:
        # A lost reply whose write applied (botocore's retry got 412) is a rollback done.
        now_live = read_live(out_uri).manifest
        now_gen = now_live["generation"] if now_live else None
        if now_gen != to or (now_live.get("rollback") if now_live else None) \
                != manifest["rollback"]:
            raise PublishConflict(
                f"another generation was published in {out_uri} while rolling back "
                f"({now_gen} is live now); nothing was rolled back: check "
                "`sitemaps status` and roll back again if still wanted") from None
        log.warning("rollback: the swap's reply was lost, but generation %s is live", to)
    return manifest
