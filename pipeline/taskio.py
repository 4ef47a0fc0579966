"""What a step read and wrote: the counts every step's result carries (`TaskIO`).

A step opens a `Meter` when it starts and adds what only it knows (the rows and files it
read, from Parquet footers or its own SQL counts); `Meter.done()` takes the process's byte
counters from /proc/self/io (Linux) as they moved since. The bytes are the whole
process's: in the CLI the state step runs beside render on a thread, so each window holds
the other's bytes too (the run summary's per-stage sums take the bytes of each stage's own
window, never a sum of overlapping steps).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The kernel's per-process I/O counters.
PROC_IO = Path("/proc/self/io")


@dataclass(frozen=True)
class TaskIO:
    """One step's (or one stage's) reads and writes.

    - `rows_read`: the rows of the data files the step read, as it counted them (load: the
      inventory's rows; diff: this run's rows and the snapshot's of its partition; plan:
      the URLs planned, and a plan slice task the rows of its input it scanned; a
      plan split task its own diffed rows; render: the URLs rendered; state: the snapshot's rows; notify: the
      snapshot rows its report and feed scanned). Rows read twice count twice.
    - `files_read`: the data files (Parquet) the step opened, footers only included.
    - `bytes_read`, `bytes_written`: what the process read from and wrote to local disks
      while the step ran (`read_bytes`, `write_bytes` of /proc/self/io: a read served from
      the page cache is not counted), else the bytes passed to read() and write() (`rchar`,
      `wchar`: every file, pipe and socket) where the kernel has no disk counters, else 0
      (`counter` says which). Reads of S3 come over the network: no disk counts them, and
      rows and files say what was read there.
    """

    rows_read: int = 0
    files_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    #: "disk", "syscalls" or "" (no /proc/self/io: the byte counts are 0).
    counter: str = ""

    def __add__(self, other: TaskIO) -> TaskIO:
        return TaskIO(rows_read=self.rows_read + other.rows_read,
                      files_read=self.files_read + other.files_read,
                      bytes_read=self.bytes_read + other.bytes_read,
                      bytes_written=self.bytes_written + other.bytes_written,
                      counter=self.counter or other.counter)

    def line(self) -> str:
        """The part of a step's log line that says what it read and wrote."""
        text = f"read {self.rows_read:,} rows in {self.files_read:,} files"
        if self.counter:
            text += f", {_size(self.bytes_read)} read, {_size(self.bytes_written)} written"
        return text

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TaskIO:
        return cls(**d) if d else cls()


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:,.1f} {unit}"


def process_io() -> tuple[str, int, int]:
    """(counter, bytes read, bytes written) of this process so far (see TaskIO)."""
    try:
        fields = dict(line.split(": ", 1) for line in PROC_IO.read_text().splitlines())
    except (OSError, ValueError):  # no /proc (not Linux), or not readable
        return "", 0, 0
    if "read_bytes" in fields and "write_bytes" in fields:
        return "disk", int(fields["read_bytes"]), int(fields["write_bytes"])
    if "rchar" in fields and "wchar" in fields:
        return "syscalls", int(fields["rchar"]), int(fields["wchar"])
    return "", 0, 0


class Meter:
    """Counts one step from its start: `read()` adds rows and files, `done()` the bytes."""

    def __init__(self) -> None:
        self._counter, self._read, self._written = process_io()
        self.rows = 0
        self.files = 0

    def read(self, rows: int = 0, files: int = 0) -> None:
        """The step read `rows` rows in `files` files (adds up)."""
        self.rows += int(rows)
        self.files += int(files)

    def include(self, io: TaskIO) -> None:
        """Adds the rows and files of a step run within this window (its bytes are in the
        window's already)."""
        self.read(io.rows_read, io.files_read)

    def done(self) -> TaskIO:
        counter, read, written = process_io()
        if counter != self._counter:
            return TaskIO(self.rows, self.files)
        return TaskIO(self.rows, self.files, max(0, read - self._read),
                      max(0, written - self._written), counter)
