"""One output per state: `<state>/owner.json` names the output a state belongs to.

Two outputs given one `--state` would each garbage-collect the other's snapshots (they
are not in its history) and diff against the wrong files. The first run or gc that uses
a state given apart from its output writes the record (a conditional create, so two first
runs cannot both win); every later run, gc, rollback and repair of another output refuses
with ConfigError, as does one given another output's default state (`<out>.state`, or
an older version's `<out>/_state`).

Which state a run uses when none is given is decided here too (resolve_state): the
default `<out>.state`, or the older `<out>/_state` while it holds one.
"""

from __future__ import annotations

import json
import logging

from pipeline import storage
from pipeline.errors import ConfigError, PublishConflict
from pipeline.layout import (
    GENERATIONS_FOLDER,
    INPUT_IDENTITY_KEY,
    LEGACY_STATE_FOLDER,
    LIVE_MANIFEST_KEY,
    STATE_OWNER_KEY,
    STATE_SUFFIX,
    default_state,
    legacy_state,
)

log = logging.getLogger(__name__)


def legacy_state_in_use(out_uri: str) -> str | None:
    """`<out>/_state` when it holds a state (an older version's default, which every
    publish wrote its identity and snapshot to), else None."""
    uri = legacy_state(out_uri)
    state = storage.open_storage(uri)
    if state.exists(INPUT_IDENTITY_KEY) or next(iter(state.list(f"{GENERATIONS_FOLDER}/")), None):
        return uri
    return None


def resolve_state(out_uri: str, state_uri: str | None) -> str:
    """The state of `out_uri`: `state_uri` when given; else the older default
    `<out>/_state` while it holds a state (it is served with the output: each call logs a
    warning); else the default `<out>.state` (ConfigError for a bucket's root)."""
    if state_uri:
        return state_uri
    legacy = legacy_state_in_use(out_uri)
    if legacy is None:
        return default_state(out_uri)
    try:
        move_to = f"copy it to {default_state(out_uri)} (the default)"
    except ConfigError:  # the root of a bucket: no sibling to move it to
        move_to = "copy it to a private prefix or bucket, pass that --state"
    log.warning("the state %s is below --out and served with it (every URL's snapshot, the "
                "rejects, the run reports): %s, then delete %s (README, \"What it writes\")",
                legacy, move_to, legacy)
    return legacy


def _default_owner(state_uri: str) -> str | None:
    """The output whose default state `state_uri` is by its name (`X.state` or `X/_state`)
    when X holds a live manifest, else None."""
    parent, _, name = state_uri.rpartition("/")
    if name == LEGACY_STATE_FOLDER:
        out = parent
    elif name.endswith(STATE_SUFFIX) and name != STATE_SUFFIX:
        out = state_uri.removesuffix(STATE_SUFFIX)
    else:
        return None
    return out if storage.open_storage(out).exists(LIVE_MANIFEST_KEY) else None


def _at_default(out: str, state_uri: str) -> bool:
    """Whether `state_uri` is one of the defaults of `out` (its `.state` sibling or its
    `_state` folder)."""
    defaults = [legacy_state(out)]
    try:
        defaults.append(default_state(out))
    except ConfigError:  # the root of a bucket has only the older one
        pass
    return storage.canonical_uri(state_uri) in {storage.canonical_uri(d) for d in defaults}


def _owner(state: storage.Storage) -> str | None:
    raw = state.read_bytes_or_none(STATE_OWNER_KEY)
    if raw is None:
        return None
    try:
        out = json.loads(raw).get("out")
    except (ValueError, AttributeError):
        out = None
    if not isinstance(out, str) or not out:
        raise ConfigError(f"{state.uri(STATE_OWNER_KEY)} is not a valid owner record (want "
                          '{"out": "<the output URI>"}): write the --out this state belongs '
                          "to there, or remove the file if this state is used by one output only")
    return out


def check_owner(out_uri: str, state_uri: str, *, claim: bool) -> None:
    """Refuse (ConfigError, exit 2) when the state belongs to another output; with `claim`,
    record `out_uri` as the owner of a state given apart from it when none is recorded.

    A default state (`<out>.state`, or the older `<out>/_state`) is its output's by where
    it lies: nothing is recorded there, so a copy of an output with its state works where
    it is copied to.
    """
    state = storage.open_storage(state_uri)
    out = storage.canonical_uri(out_uri)
    owner = _owner(state)
    why = f"recorded in {state.uri(STATE_OWNER_KEY)}"
    if owner is None and not _at_default(out, state_uri):
        if (owner := _default_owner(storage.canonical_uri(state_uri))) is not None:
            why = "its default state"
        elif claim:
            try:
                state.put_if(STATE_OWNER_KEY, json.dumps({"out": out}).encode(), if_match=None)
                log.info("state %s now belongs to output %s", state.root, out)
                return
            except PublishConflict:  # another first run recorded its output first
                owner = _owner(state)
    if owner is not None and owner != out:
        raise ConfigError(
            f"the state {state.root} belongs to output {owner} ({why}), not {out}: each "
            "output needs a --state of its own, or gc of one deletes the other's snapshots. "
            f"If this output moved, write its new URI in {STATE_OWNER_KEY}")
