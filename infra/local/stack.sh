#!/usr/bin/env sh
# The local stack: SeaweedFS (S3) + airflow standalone running dags/ (see infra/local/stack.py).
#   infra/local/stack.sh up [--port N] [--urls N] [--trigger] [--parallelism N]   # prints the UI URL and password
#   infra/local/stack.sh status
#   infra/local/stack.sh down
# The interpreter: $PYTHON, else .venv/bin/python of the repo, else python3. It needs the
# project with Airflow installed (pip install -e '.[dev]').
set -eu
. "$(dirname -- "$0")/python.sh"
exec "$py" "$here/stack.py" "$@"
