"""``[core] hostname_callable`` of the local cluster's Celery workers.

Both workers of ``infra/local/cluster.sh`` run on one machine, so the machine's name would not
tell them apart; each is started with ``SITEMAPS_WORKER_NAME`` and reports that name as the
hostname of the task instances it runs (the REST API's ``hostname`` field).
"""

import os
import socket


def hostname() -> str:
    return os.environ.get("SITEMAPS_WORKER_NAME") or socket.getfqdn()
