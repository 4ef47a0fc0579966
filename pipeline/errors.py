"""Errors split by whether a retry can help.

A TerminalError (bad input, a refused publish) fails at once with a message
that says what to fix; a TransientError (throttling, network) is worth a
retry. The CLI maps each class to its own exit code, the DAGs to retries.
"""

from __future__ import annotations

import errno
import os
import re
import shutil


class PipelineError(Exception):
    """Base of every error the pipeline raises on purpose."""

    exit_code = 1


class TerminalError(PipelineError):
    """Retrying cannot help: the input or the configuration must change."""

    exit_code = 2


class TransientError(PipelineError):
    """A retry may succeed (throttling, 5xx, a reset connection)."""

    exit_code = 75  # EX_TEMPFAIL


class ServedCopyWrong(TransientError):
    """`sitemaps verify` found the served copy not as published (a retry may find a cache
    refreshed)."""


class InventoryError(TerminalError):
    """The inventory cannot be read: missing, corrupt, empty or of a wrong schema."""


class ConfigError(TerminalError):
    """A flag or a configuration value is wrong."""


class StorageError(TerminalError):
    """Object storage refused for a reason a retry cannot fix (no bucket, no access)."""


class PublishConflict(TerminalError):
    """Another generation was published since this run started."""

    exit_code = 3


class ShrinkRefused(TerminalError):
    """The new generation would publish far fewer URLs than the live one."""

    exit_code = 4


class TooManyRejects(TerminalError):
    """More input rows were rejected than the configured share allows."""

    exit_code = 5


class LiveStateCorrupt(TerminalError):
    """The live manifest or its snapshot is unreadable or does not match what was recorded.

    A retry cannot help and publishing over it would lose history: repair first
    (`sitemaps repair --out URI`, see docs/operations.md).
    """


class InternalError(TerminalError, RuntimeError):
    """An invariant of the pipeline itself failed: a bug, not the input's fault.

    Terminal (a retry runs the same code on the same data). A RuntimeError too, so
    callers that caught the bare RuntimeError it replaces still catch it.
    """

    exit_code = 70  # EX_SOFTWARE

    def __init__(self, message: str) -> None:
        super().__init__(f"internal error (a bug in sitemap-pipeline, please report it): {message}")


class OutOfSpace(TerminalError):
    """A local disk the run writes to is full: its work folder, output or DuckDB's spill
    folder. Someone must free space or point the run elsewhere; the same run would fill it
    again."""


class FileTooLarge(OutOfSpace):
    """A file the run writes grew past the largest one it may write (EFBIG): the process's
    file-size limit (`ulimit -f`) or the filesystem's (FAT: 4 GiB). Terminal as a full disk."""


#: The errnos of a full disk (or a full quota).
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
#: The errnos a write fails with where a full disk does, each naming the file it wrote.
WRITE_FULL_ERRNOS = (*NO_SPACE_ERRNOS, errno.EFBIG)
#: How DuckDB says a write found the disk full, and that its spill folder reached the size it
#: may take (by default 90% of the free space it found there).
_NO_SPACE_WORDS = ("no space left on device", "disk quota exceeded")
_SPILL_FULL_WORDS = ("failed to offload data block",)
_TOO_LARGE_WORDS = ("file too large",)
_QUOTED_FILE = re.compile(r'(?:file|directory) \\?"([^"\\]+)\\?"', re.IGNORECASE)


def out_of_space(exc: BaseException, spill_dir: str | None = None) -> OutOfSpace | None:
    """`exc` as an OutOfSpace naming the full folder and its free space, or None if it is
    another failure. `spill_dir`: DuckDB's temp directory, which a full spill names nowhere."""
    text = str(exc)
    # DuckDB's own errors say it in words (an IOException, an OutOfMemoryException)
    lowered = text.lower() if type(exc).__module__.lstrip("_").startswith("duckdb") else ""
    path: str | None = None
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG or any(
            w in lowered for w in _TOO_LARGE_WORDS):
        return _too_large(exc)
    if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
        path = _written_file(exc)
    elif any(w in lowered for w in _NO_SPACE_WORDS):
        found = _QUOTED_FILE.search(text)
        path = found.group(1) if found else None
    elif any(w in lowered for w in _SPILL_FULL_WORDS):
        where = f"DuckDB's spill folder {spill_dir}" if spill_dir else "DuckDB's spill folder"
        return OutOfSpace(
            f"{where} is full{_free_space(spill_dir)}: the query needed more than its memory "
            "limit and the disk holds. Free space there, set SITEMAPS_TEMP_DIR to a folder on "
            "a larger disk, or raise SITEMAPS_MEMORY")
    else:
        return None
    where = f"the disk of {path}" if path else "a disk the run writes to"
    return OutOfSpace(
        f"no space left on {where}{_free_space(path)}. Free space there, or give the run a "
        "folder on a larger disk (--work, --out, SITEMAPS_TEMP_DIR)")


def _written_file(exc: OSError) -> str | None:
    """The file a failed write wrote: of two (a copy, a rename), the second, the target
    (shutil.copyfile names its source first)."""
    name = exc.filename2 or exc.filename
    return os.fsdecode(name) if name else None


def _too_large(exc: BaseException) -> FileTooLarge:
    if isinstance(exc, OSError):
        path = _written_file(exc)
    else:
        found = _QUOTED_FILE.search(str(exc))
        path = found.group(1) if found else None
    import resource

    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    limit = "none" if soft == resource.RLIM_INFINITY else f"{soft:,} bytes"
    what = f"the file {path}" if path else "a file the run writes"
    return FileTooLarge(
        f"{what} grew past the largest file the run may write there (the process's "
        f"file-size limit, ulimit -f: {limit}; else the filesystem's largest file). "
        "Raise the limit, or give the run a folder on another filesystem "
        "(--work, --out, --state, SITEMAPS_TEMP_DIR)")


def _free_space(path: str | None) -> str:
    """' (N MiB free of M MiB)' for the disk of the nearest folder of `path` that exists;
    '' without one."""
    while path:
        try:
            usage = shutil.disk_usage(path)
            return f" ({usage.free // 2**20:,} MiB free of {usage.total // 2**20:,} MiB)"
        except OSError:
            parent = os.path.dirname(path.rstrip("/"))
            path = parent if parent != path else None
    return ""
