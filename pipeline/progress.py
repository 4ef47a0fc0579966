"""Progress for long steps: a live line on a terminal, silence otherwise.

On a terminal the CLI shows these lines instead of INFO logs (one line per step);
elsewhere logging carries the step summaries and this stays silent.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """A one-line counter on stderr, shown only when stderr is a terminal."""

    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._last = 0.0
        self._label = ""
        self._open = False  # a line is on screen without its newline

    def step(self, label: str) -> None:
        """Starts a step; shows its name."""
        self._label = label
        self._write(f"{label} ...", force=True)

    def update(self, done: int, total: int | None = None, unit: str = "") -> None:
        """Reports progress in the current step, at most ten times a second."""
        of = f"/{total:,}" if total is not None else ""
        self._write(f"{self._label}: {done:,}{of} {unit}".rstrip())

    def done(self, summary: str) -> None:
        """Ends the current step with a one-line summary."""
        self._write(f"{self._label}: {summary}", force=True, end=True)

    def clear(self) -> None:
        """Erases an unfinished line (before a log record or an error is written)."""
        if self.enabled and self._open:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._open = False

    def _write(self, text: str, force: bool = False, end: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        self.stream.write("\r\033[K" + text + ("\n" if end else ""))
        self.stream.flush()
        self._open = not end


#: The do-nothing instance, for library calls without a terminal.
QUIET = Progress(enabled=False)
