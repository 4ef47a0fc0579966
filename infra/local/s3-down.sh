#!/usr/bin/env sh
# Stop the local SeaweedFS S3 server started by infra/local/s3-up.sh.
#   infra/local/s3-down.sh [--dir DIR] [--timeout SECONDS]
# The interpreter: $PYTHON, else .venv/bin/python of the repo, else python3.
set -eu
. "$(dirname -- "$0")/python.sh"
exec "$py" "$here/seaweedfs.py" down "$@"
