"""A throwaway Airflow installation for one test: AIRFLOW_HOME, environment, CLI, metadata DB.

Airflow runs only in subprocesses (`<python> -m airflow ...` or the `airflow` script next to
the interpreter), never in the pytest process, so no test leaks Airflow configuration into
another. The metadata DB is SQLite in AIRFLOW_HOME, migrated once per session and copied.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAGS_FOLDER = ROOT / "dags"
BIN = Path(sys.executable).parent
CONN_ID = "sitemaps_s3"

#: Mark of every test that runs Airflow: skipped, with the reason shown, without it.
requires_airflow = [
    pytest.mark.airflow,
    pytest.mark.skipif(importlib.util.find_spec("airflow") is None,
                       reason="Apache Airflow is not installed (the dev extra has it)"),
]


def airflow_command() -> list[str]:
    script = BIN / "airflow"
    return [str(script)] if script.exists() else [sys.executable, "-m", "airflow"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connection_env(endpoint_url: str, access_key: str, secret_key: str,
                   region: str = "us-east-1") -> str:
    """An `AIRFLOW_CONN_<ID>` value: an aws connection to a non-AWS S3 endpoint."""
    return json.dumps({"conn_type": "aws", "login": access_key, "password": secret_key,
                       "extra": {"endpoint_url": endpoint_url, "region_name": region}})


@dataclass
class AirflowEnv:
    home: Path
    sites_file: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        return self.home / "airflow.db"

    def env(self) -> dict[str, str]:
        # Nothing of the caller's Airflow or AWS set-up: S3 comes from the connection only.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AIRFLOW", "AWS_"))}
        env.update({
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "SITEMAPS_SITES_FILE": str(self.sites_file),
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])),
            "NO_COLOR": "1",
        })
        env.update(self.extra_env)
        return env

    def run(self, *args: str, timeout: float = 300, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        """One airflow CLI command; stdout and stderr together in `.stdout`."""
        proc = subprocess.run([*airflow_command(), *args], env=self.env(), cwd=self.home,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
        (self.home / f"cli-{args[0]}-{args[1] if len(args) > 1 else ''}.log").write_text(
            proc.stdout)
        if check and proc.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} exited {proc.returncode}:\n"
                                 + tail(proc.stdout))
        return proc

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the metadata DB (after the CLI command that wrote it has exited)."""
        with sqlite3.connect(self.db_path) as con:
            return list(con.execute(sql, params))

    def task_states(self, dag_id: str) -> dict[tuple[str, int], tuple[str, int]]:
        """(task_id, map_index) -> (state, try_number) for the DAG's only run."""
        rows = self.query("SELECT task_id, map_index, state, try_number FROM task_instance "
                          "WHERE dag_id = ?", dag_id)
        return {(t, m): (s, n) for t, m, s, n in rows}

    def run_states(self, dag_id: str) -> list[str]:
        return [s for (s,) in self.query("SELECT state FROM dag_run WHERE dag_id = ?", dag_id)]


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def migrate_template(path: Path) -> Path:
    """An AIRFLOW_HOME with a freshly migrated metadata DB (copied into each test's home)."""
    env = AirflowEnv(path, path / "none.toml")
    path.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    env.run("db", "migrate", timeout=300)
    print(f"airflow db migrate: {time.monotonic() - t:.1f} s")
    return env.db_path


def new_home(tmp_path: Path, template_db: Path, sites_toml: str,
             extra_env: dict[str, str] | None = None) -> AirflowEnv:
    home = tmp_path / "airflow"
    home.mkdir()
    shutil.copyfile(template_db, home / "airflow.db")
    sites = tmp_path / "sites.toml"
    sites.write_text(sites_toml)
    return AirflowEnv(home, sites, dict(extra_env or {}))
