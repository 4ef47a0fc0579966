"""The fan-out protocol of a step mapped over N parts (diff partitions, plan slices).

Each part writes its result, a JSON object, under its own key of the work prefix
(`Parts.write`: `<name>-NNNNN.json`), in any order and in any process; a retry rewrites
it. The combine step gathers all N in part order (`Parts.gather`) and fails, naming
them, when some are missing (their task did not finish) or stale: every result carries
the token of the fan-out it was written for (a prepare's random id, the number of
partitions), and a result whose token is not the current one belongs to an earlier
fan-out. Both are InternalError: retrying the combine cannot help, rerunning the parts can.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipeline.errors import InternalError
from pipeline.storage import Storage

#: Parts named in an error message, at most.
NAMED_PARTS = 10


@dataclass(frozen=True)
class Parts:
    """The results of one fan-out under a work prefix, and how to name them in errors."""

    #: Key prefix of a part's result: `<name>-NNNNN.json`.
    name: str
    #: What a part is, for messages: "diff partition", "plan slice".
    what: str
    #: The field of a result that holds the fan-out's token.
    token_field: str
    #: What to do about missing parts ("run them first").
    missing_hint: str
    #: Why a part is stale and what to do, `{count}` the number of parts.
    stale_hint: str

    def key(self, index: int) -> str:
        return f"{self.name}-{index:05d}.json"

    def write(self, store: Storage, index: int, token: Any, result: dict[str, Any]) -> str:
        """Store part `index`'s result, with the fan-out's token; returns its URI."""
        store.write_bytes(self.key(index), json.dumps(
            {self.token_field: token, **result}, default=str).encode())
        return store.uri(self.key(index))

    def gather(self, store: Storage, count: int, token: Any, *, where: str | None = None
               ) -> list[dict[str, Any]]:
        """The results of parts 0 .. count - 1, in that order. InternalError, naming them,
        when some are missing or carry another token. `where`: the prefix, for messages."""
        missing = [i for i in range(count) if not store.exists(self.key(i))]
        if missing:
            raise InternalError(
                f"{self.what}(s) {missing[:NAMED_PARTS]} of {count} have no result "
                f"({self.key(missing[0])} under {where or store.root}): {self.missing_hint}")
        results = [json.loads(store.read_bytes(self.key(i))) for i in range(count)]
        stale = [i for i, r in enumerate(results) if r.get(self.token_field) != token]
        if stale:
            raise InternalError(f"{self.what}(s) {stale[:NAMED_PARTS]} "
                                f"{self.stale_hint.format(count=count)}")
        return results
