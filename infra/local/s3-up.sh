#!/usr/bin/env sh
# Start the local SeaweedFS S3 server in the background (see infra/local/seaweedfs.py).
#   infra/local/s3-up.sh [--dir DIR] [--port N] [--bucket NAME]
#   eval "$(infra/local/s3-up.sh)"    # also exports AWS_ENDPOINT_URL etc. into this shell
# The interpreter: $PYTHON, else .venv/bin/python of the repo, else python3.
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(CDPATH= cd -- "$here/../.." && pwd)
py=${PYTHON:-"$root/.venv/bin/python"}
if [ ! -x "$py" ] && ! command -v "$py" >/dev/null 2>&1; then
    py=python3
fi
exec "$py" "$here/seaweedfs.py" up "$@"
