#!/usr/bin/env sh
# Start the local SeaweedFS S3 server in the background (see infra/local/seaweedfs.py).
#   infra/local/s3-up.sh [--dir DIR] [--port N] [--bucket NAME]
#   eval "$(infra/local/s3-up.sh)"    # also exports AWS_ENDPOINT_URL etc. into this shell
# The interpreter: $PYTHON, else .venv/bin/python of the repo, else python3.
set -eu
. "$(dirname -- "$0")/python.sh"
exec "$py" "$here/seaweedfs.py" up "$@"
