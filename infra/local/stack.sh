#!/usr/bin/env sh
# The local stack: SeaweedFS (S3) + airflow standalone running dags/ (see infra/local/stack.py).
#   infra/local/stack.sh up [--port N] [--urls N] [--trigger]   # prints the UI URL and password
#   infra/local/stack.sh status
#   infra/local/stack.sh down
# The interpreter: $PYTHON, else .venv/bin/python of the repo, else python3. It needs the
# project with Airflow installed (pip install -e '.[dev]').
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(CDPATH= cd -- "$here/../.." && pwd)
py=${PYTHON:-"$root/.venv/bin/python"}
if [ ! -x "$py" ] && ! command -v "$py" >/dev/null 2>&1; then
    py=python3
fi
exec "$py" "$here/stack.py" "$@"
