#!/usr/bin/env sh
# The distributed local stack: PostgreSQL, Redis, SeaweedFS and Airflow on the CeleryExecutor
# with two workers (see infra/local/cluster.py).
#   infra/local/cluster.sh up [--workers N] [--concurrency N] [--urls N] [--trigger]
#   infra/local/cluster.sh status
#   infra/local/cluster.sh down
# Needs Debian's postgresql and redis-server (make test installs them) and the project with
# the celery extra (pip install -e '.[dev]' has it).
set -eu
. "$(dirname -- "$0")/python.sh"
exec "$py" "$here/cluster.py" "$@"
