"""Transparent huge pages: a pipeline process declines the ones it would get on request.

pyarrow's allocator (mimalloc) marks its arena for huge pages (madvise MADV_HUGEPAGE).
Where the kernel gives huge pages only on such a request (THP mode `madvise`, the usual
default), every fresh 2 MiB page of that arena is zeroed whole, and when the kernel has
none free it compacts memory first, in the page fault: without them, a 10M-URL first run
spent less CPU in the kernel in every pair of runs compared. DuckDB's own allocator asks for none, so in that
mode only pyarrow's memory changes. Where every mapping gets huge pages (mode `always`)
nothing is changed: that was not measured to help.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

#: prctl(2) options: set, and read, the process's "no transparent huge pages" flag.
PR_SET_THP_DISABLE = 41
PR_GET_THP_DISABLE = 42
#: The kernel's THP mode: the word in brackets, e.g. "always [madvise] never".
THP_MODE_FILE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_mode() -> str | None:
    """The kernel's transparent huge page mode (always, madvise, never), or None."""
    try:
        text = THP_MODE_FILE.read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


@functools.cache
def decline_on_request() -> bool:
    """Turn transparent huge pages off for this process (prctl PR_SET_THP_DISABLE, which
    its children inherit) when the kernel gives them on request only; once per process.
    Returns whether they are off. Never fails: on another system it does nothing."""
    if sys.platform != "linux" or thp_mode() != "madvise":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done = bool(libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError) as exc:  # no prctl to call: nothing changes
        log.debug("huge pages: left as they are (%s)", exc)
        return False
    if not done:
        log.debug("huge pages: left as they are (prctl errno %d)", ctypes.get_errno())
    return done
