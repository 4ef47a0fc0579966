# The two commands of the README: `make demo` and `make test`.
# Both create the virtualenv and install the project first (pip install -e '.[dev]').
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python

.PHONY: demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/sitemaps demo

test: $(VENV)/.installed
	$(PY) -m pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check pipeline dags tests bench
	$(VENV)/bin/mypy

bench: $(VENV)/.installed
	$(PY) bench/run.py

clean:
	rm -rf sitemaps-demo .pytest_cache
