"""One output per state: `<state>/owner.json` names the output a state belongs to.

Two outputs given one `--state` would each garbage-collect the other's snapshots (they
are not in its history) and diff against the wrong files. The first run or gc that uses
a state given apart from its output writes the record (a conditional create, so two first
runs cannot both win); every later run, gc, rollback and repair of another output refuses
with ConfigError, as does one given another output's default state (`<out>/_state`).
"""

from __future__ import annotations

import json
import logging

from pipeline import storage
from pipeline.errors import ConfigError, PublishConflict
from pipeline.layout import LIVE_MANIFEST_KEY, STATE_FOLDER, STATE_OWNER_KEY, default_state

log = logging.getLogger(__name__)


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

    The default state (`<out>/_state`) is its output's by where it lies: nothing is
    recorded there, so a copy of an output with its state works where it is copied to.
    """
    state = storage.open_storage(state_uri)
    out = storage.canonical_uri(out_uri)
    at_default = storage.canonical_uri(state_uri) == storage.canonical_uri(default_state(out))
    owner = _owner(state)
    why = f"recorded in {state.uri(STATE_OWNER_KEY)}"
    if owner is None and not at_default:
        parent, _, name = storage.canonical_uri(state_uri).rpartition("/")
        if name == STATE_FOLDER and storage.open_storage(parent).exists(LIVE_MANIFEST_KEY):
            owner, why = parent, "its default state"
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
