# The two commands of the README: `make demo` and `make test`.
# Both create the virtualenv and install the project first (pip install -e '.[dev]').
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python

.PHONY: demo test check lint bench clean chromium cluster-services http-server

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/sitemaps demo

# Debian's Chromium renders the run report in one test (tests/integration/test_report_browser.py).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "warning: could not install chromium (apt-get, as root); the report screenshot test will fail" >&2

# Debian's PostgreSQL and Redis: the metadata DB and broker of the distributed local stack
# (infra/local/cluster.sh), which tests/integration/test_celery_cluster.py starts.
cluster-services:
	@{ command -v redis-server >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    postgresql redis-server >/dev/null; } || \
	  echo "warning: could not install postgresql and redis-server (apt-get, as root); the Celery cluster tests will fail" >&2

# Debian's nginx serves a published output on loopback to `sitemaps verify`
# (tests/integration/test_verify_served.py).
http-server:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; } || \
	  echo "warning: could not install nginx (apt-get, as root); the verify tests will fail" >&2

# checkov pins old boto3 and packaging: it lives in a virtualenv of its own.
$(VENV)/checkov/bin/checkov: $(VENV)/.installed
	$(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install -q 'checkov>=3.2,<4'

# Three workers (pytest-xdist), each test file on one of them: most of the suite waits on
# Airflow, SeaweedFS and subprocesses, so three keep two cores busy. TEST_WORKERS=0 runs
# it in one process.
TEST_WORKERS ?= 3
test: $(VENV)/.installed $(VENV)/checkov/bin/checkov chromium cluster-services http-server
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

# The fast part (about a minute): lint, types, the unit and SQL tests (not the clone of the
# repository that test_self_contained.py runs: make test does). CI runs it first.
check: lint
	$(PY) -m pytest -q -p no:cacheprovider -m "not integration" tests/unit tests/sql

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check pipeline dags plugins tests bench
	$(VENV)/bin/mypy

bench: $(VENV)/.installed
	$(PY) bench/run.py

clean:
	rm -rf sitemaps-demo sitemaps-demo-inventory .pytest_cache test-artifacts
