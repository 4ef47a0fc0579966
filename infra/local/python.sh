# Sourced by the launchers here: sets $here and $py, the interpreter to run them with:
# $PYTHON, else the repository's .venv/bin/python, else python3.
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
root=$(CDPATH= cd -- "$here/../.." && pwd)
py=${PYTHON:-"$root/.venv/bin/python"}
if [ ! -x "$py" ] && ! command -v "$py" >/dev/null 2>&1; then
    py=python3
fi
