"""`python -m tests.integration.kill_at ARGS...`: the `sitemaps` command (pipeline.cli.main)
with a hook on its S3 client's events that SIGKILLs the process just before request number
$SITEMAPS_TEST_KILL_AT is sent (0: never), and appends each request's method and URL to
$SITEMAPS_TEST_REQUEST_LOG as it goes. A kill at a chosen storage request, not after a
sleep whose landing point depends on the machine."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from pipeline import storage
from pipeline.cli import main

KILL_AT = int(os.environ.get("SITEMAPS_TEST_KILL_AT", "0"))
LOG = os.environ["SITEMAPS_TEST_REQUEST_LOG"]
_seen = 0


def _before_send(request: Any, **_: Any) -> None:
    global _seen
    _seen += 1
    with open(LOG, "a") as f:
        f.write(f"{request.method} {request.url.split('?')[0]}\n")
    if _seen == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    storage.CLIENT_HOOKS.append(("before-send.s3", _before_send))
    sys.exit(main(sys.argv[1:]))
