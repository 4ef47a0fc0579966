import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The fixtures for the real S3 server (SeaweedFS) live in tests/s3_fixtures.py.
pytest_plugins = ["tests.s3_fixtures"]

os.environ.setdefault("SITEMAPS_DUCKDB_MEMORY", "1GB")

#: Temp folders a run makes for itself (steps.begin, `sitemaps diff --state`): each must be
#: gone when its run ends, however it ends.
RUN_TEMP_PREFIXES = ("sitemaps-work-", "sitemaps-diff-")


@pytest.fixture(scope="session", autouse=True)
def session_tempdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This session's temp folder, for the library and the CLIs the tests start (TMPDIR):
    another session on the machine cannot confuse the check below, and nothing a test
    leaves behind outlives pytest's own retention of its temp folders."""
    tmp = tmp_path_factory.mktemp("tmp")
    saved_env, saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(tmp), str(tmp)
    try:
        yield tmp
    finally:
        tempfile.tempdir = saved
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env


@pytest.fixture(autouse=True)
def no_run_temp_left(session_tempdir: Path) -> Iterator[None]:
    """Fails the test after which a run's temp folder is left in the temp directory."""
    yield
    left = sorted(p.name for p in session_tempdir.iterdir() if p.name.startswith(RUN_TEMP_PREFIXES))
    for name in left:
        shutil.rmtree(session_tempdir / name, ignore_errors=True)
    if left:
        pytest.fail(f"the run's temp folder(s) {left} were left in {session_tempdir}")
