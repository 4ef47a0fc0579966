#!/usr/bin/env sh
# Stop the local SeaweedFS S3 server started by infra/local/s3-up.sh.
#   infra/local/s3-down.sh [--dir DIR] [--timeout SECONDS]
# The interpreter: $PYTHON, else .venv/bin/python of the repo, else python3.
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(CDPATH= cd -- "$here/../.." && pwd)
py=${PYTHON:-"$root/.venv/bin/python"}
if [ ! -x "$py" ] && ! command -v "$py" >/dev/null 2>&1; then
    py=python3
fi
exec "$py" "$here/seaweedfs.py" down "$@"
