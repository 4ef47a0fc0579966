"""`python -m tests.integration.kill_at ARGS...`: the `sitemaps` command (pipeline.cli.main)
with a hook on its S3 client's events that SIGKILLs the process just before request number
$SITEMAPS_TEST_KILL_AT is sent (0: never), and appends each request's method and URL to
$SITEMAPS_TEST_REQUEST_LOG as it goes. A kill at a chosen storage request, not after a
sleep whose landing point depends on the machine.

With $SITEMAPS_TEST_HOLD_FILE set, the first PUT whose URL ends with
$SITEMAPS_TEST_HOLD_URL_SUFFIX waits, before it is sent, while that file exists (and
creates `<file>.held` when it starts waiting): two runs interleaved at a chosen point."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from pipeline import storage
from pipeline.cli import main

KILL_AT = int(os.environ.get("SITEMAPS_TEST_KILL_AT", "0"))
LOG = os.environ.get("SITEMAPS_TEST_REQUEST_LOG", os.devnull)
HOLD_FILE = os.environ.get("SITEMAPS_TEST_HOLD_FILE")
HOLD_SUFFIX = os.environ.get("SITEMAPS_TEST_HOLD_URL_SUFFIX", "")
_seen = 0
_held = False


def _before_send(request: Any, **_: Any) -> None:
    global _seen
    _seen += 1
    with open(LOG, "a") as f:
        f.write(f"{request.method} {request.url.split('?')[0]}\n")
    if _seen == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    global _held
    if HOLD_FILE and not _held and request.method == "PUT" and \
            request.url.split("?")[0].endswith(HOLD_SUFFIX):
        _held = True
        open(HOLD_FILE + ".held", "w").close()
        while os.path.exists(HOLD_FILE):
            time.sleep(0.05)


if __name__ == "__main__":
    storage.CLIENT_HOOKS.append(("before-send.s3", _before_send))
    sys.exit(main(sys.argv[1:]))
