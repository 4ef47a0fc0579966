"""Fixtures of the DAG tests: real Airflow, in subprocesses, with a throwaway AIRFLOW_HOME."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dags.airflow_env import migrate_template


@pytest.fixture(scope="session")
def airflow_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A migrated Airflow metadata DB, made once per session; tests copy it."""
    yield migrate_template(tmp_path_factory.mktemp("airflow-template"))
