"""The local stack: SeaweedFS (S3) + ``airflow standalone`` running this repo's DAGs.

    infra/local/stack.sh up [--port N] [--urls N] [--trigger] [--parallelism N]   # start
    infra/local/stack.sh status
    infra/local/stack.sh down                                   # stop both

``up`` starts SeaweedFS (``infra/local/seaweedfs.py``, data in ``.local/seaweedfs``) with the
bucket ``sitemaps``, writes a synthetic demo inventory to
``s3://sitemaps/inventory/demo/inventory.parquet``, and starts ``airflow standalone`` with
``AIRFLOW_HOME=.local/airflow``, the DAGs folder ``dags/``, the demo site config
``infra/local/sites.toml`` and the S3 connection ``sitemaps_s3`` (an ``AIRFLOW_CONN_SITEMAPS_S3``
variable pointing at SeaweedFS). It prints the UI address, the admin password that standalone
generated, and ``.local/airflow/stack.env``: ``source`` it to use the ``airflow`` CLI on the stack.

The interpreter running this file must have the project and Airflow installed
(``pip install -e '.[dev]'``); ``airflow`` is taken from the interpreter's own ``bin/``.

:class:`AirflowStandalone` (start, health, token, REST calls, stop) is also used by the
standalone smoke test. Standard library only, apart from what ``up`` needs for the demo data.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
LOCAL = REPO_ROOT / ".local"
AIRFLOW_HOME = LOCAL / "airflow"
SEAWEEDFS_DIR = LOCAL / "seaweedfs"
SITES_FILE = HERE / "sites.toml"
DAGS_FOLDER = REPO_ROOT / "dags"
PLUGINS_FOLDER = REPO_ROOT / "plugins"
BUCKET = "sitemaps"
INVENTORY_KEY = "inventory/demo/inventory.parquet"
CONN_ID = "sitemaps_s3"
DEFAULT_PORT = 8080
PID_FILE = "standalone.pid"
STATE_FILE = "stack.json"
LOG_FILE = "standalone.log"
ENV_FILE = "stack.env"
#: Standalone's generated admin password (simple auth manager, user ``admin``).
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"
HEALTH_COMPONENTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")


class StackError(RuntimeError):
    """A part of the local stack could not be started, reached or stopped."""


def load_seaweedfs() -> types.ModuleType:
    """``infra/local/seaweedfs.py`` (not a package: loaded from its file, once)."""
    name = "sitemaps_infra_local_seaweedfs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "seaweedfs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def port_is_free(port: int) -> bool:
    return bool(load_seaweedfs()._port_is_free(port))  # one rule for both launchers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def airflow_executable() -> str:
    """The ``airflow`` script next to this interpreter (standalone also spawns it by name)."""
    script = Path(sys.executable).parent / "airflow"
    if not script.exists():
        raise StackError(f"no airflow next to {sys.executable}: pip install -e '.[dev]'")
    return str(script)


def connection_uri_env(endpoint_url: str, access_key: str, secret_key: str,
                       region: str = "us-east-1") -> str:
    """The value of ``AIRFLOW_CONN_<ID>``: an aws connection to a non-AWS S3 endpoint."""
    return json.dumps({"conn_type": "aws", "login": access_key, "password": secret_key,
                       "extra": {"endpoint_url": endpoint_url, "region_name": region}})


def machine_parallelism() -> int:
    """Task slots for a one-machine Airflow: the cores this process may use (at least 2).

    Airflow's default of 32 makes the LocalExecutor start 32 worker processes, idle but
    each holding memory, on any machine."""
    return max(2, len(os.sched_getaffinity(0)))


def airflow_env(home: Path, port: int, *, sites_file: Path, s3_conn: str | None,
                base: dict[str, str] | None = None,
                parallelism: int | None = None) -> dict[str, str]:
    """Environment of a standalone Airflow on 127.0.0.1:``port`` running ``dags/``;
    ``parallelism`` caps its running tasks (and so its LocalExecutor's worker processes)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        # The run report's tab on each DAG run (plugins/sitemaps_report.py).
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        # Workers reach the execution API at <base_url>/execution/: same port.
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "SITEMAPS_SITES_FILE": str(sites_file),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "NO_COLOR": "1",
    })
    if s3_conn:
        env[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = s3_conn
    if parallelism:
        env.update({"AIRFLOW__CORE__PARALLELISM": str(parallelism),
                    "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(parallelism),
                    "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1"})
    return env


def _pid_alive(pid: int) -> bool:
    return bool(load_seaweedfs()._pid_alive(pid))  # zombies count as dead there too


def _processes() -> dict[int, tuple[int, int, str]]:
    """Every live process: pid -> (parent pid, process group, state), from /proc (Linux)."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            table[int(stat.parent.name)] = (int(fields[1]), int(fields[2]), fields[0])
    return table


def tree_groups(pgid: int) -> set[int]:
    """The group ``pgid`` and the process groups of all its members' descendants.

    Airflow's task supervisor puts each task process in a group of its own, so signalling a
    worker's group alone would leave its running tasks behind as orphans."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = [pid for pid, (_, group, _) in table.items() if group == pgid]
    groups = {pgid}
    while todo:
        pid = todo.pop()
        groups.add(table[pid][1])
        todo.extend(children.get(pid, []))
    return groups - {os.getpgid(0)}  # never our own group


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Only zombies left?
    return any(group == pgid and state != "Z" for _, group, state in _processes().values())


def kill_tree(pgid: int, sig: int = signal.SIGKILL) -> set[int]:
    """Send ``sig`` to the group and to every descendant's group; returns those groups."""
    groups = tree_groups(pgid)
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    return groups


def stop_group(pgid: int, timeout: float, reap: Any = None) -> bool:
    """SIGTERM a process group and its descendants' groups, wait up to ``timeout`` s, then
    SIGKILL them and wait 10 s more; ``reap`` (a Popen's poll) keeps our own child from
    lingering as a zombie. True if all are gone."""
    groups: set[int] = set()
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
        groups |= kill_tree(pgid, sig)
        for group in groups - {pgid}:  # groups whose parents already exited
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if reap is not None:
                reap()
            if not any(_group_alive(g) for g in groups):
                return True
            time.sleep(0.2)
    return not any(_group_alive(g) for g in groups)


class AirflowStandalone:
    """One ``airflow standalone`` (api-server, scheduler, dag-processor, triggerer) in its own
    process group, so that stopping it stops every component and task process."""

    def __init__(self, home: Path, port: int, env: dict[str, str]) -> None:
        self.home = Path(home)
        self.port = port
        self.env = env
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.home / LOG_FILE

    def start(self, timeout: float = 180) -> None:
        """Start it and wait until the health endpoint says every component is healthy."""
        self.home.mkdir(parents=True, exist_ok=True)
        if not port_is_free(self.port):
            raise StackError(f"port {self.port} on 127.0.0.1 is already in use")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [airflow_executable(), "standalone"], cwd=self.home, env=self.env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.pid = self._proc.pid
        (self.home / PID_FILE).write_text(f"{self.pid}\n")
        try:
            self.wait_healthy(timeout)
        except BaseException:
            self.stop(timeout=10)
            raise

    def health(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as r:
                return dict(json.load(r))
        except (OSError, ValueError):
            return None

    def is_healthy(self) -> bool:
        h = self.health() or {}
        return all((h.get(c) or {}).get("status") == "healthy" for c in HEALTH_COMPONENTS)

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.is_healthy():
            if self._proc is not None and self._proc.poll() is not None:
                raise StackError(f"airflow standalone exited with {self._proc.returncode}; "
                                 f"see {self.log_path}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise StackError(f"airflow standalone not healthy after {timeout:.0f} s "
                                 f"(health: {self.health()}); see {self.log_path}:\n"
                                 f"{self.log_tail()}")
            time.sleep(1)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def admin_password(self) -> str | None:
        """The password standalone generated for ``admin`` (None before it has)."""
        try:
            return str(json.loads((self.home / PASSWORDS_FILE).read_text())["admin"])
        except (OSError, ValueError, KeyError):
            return None

    def token(self) -> str:
        """A JWT for the REST API, as ``admin`` (simple auth manager: POST /auth/token)."""
        body = {"username": "admin", "password": self.admin_password()}
        return str(self.call("POST", "/auth/token", body, token=None)["access_token"])

    def call(self, method: str, path: str, body: Any = None, *, token: str | None) -> Any:
        """One REST call; returns the JSON answer, raises StackError on an HTTP error."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw = r.read()
        except urllib.error.HTTPError as exc:
            raise StackError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:500]!r}") from None
        return json.loads(raw) if raw else None

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM the process group, wait up to ``timeout`` s, then SIGKILL. Idempotent."""
        pid = self.pid
        if pid is None:
            return
        stop_group(pid, timeout, reap=self._proc.poll if self._proc is not None else None)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        if _group_alive(pid):
            raise StackError(f"airflow standalone (process group {pid}) survived SIGKILL")
        with contextlib.suppress(FileNotFoundError):
            (self.home / PID_FILE).unlink()
        self.pid = None
        self._proc = None

    @classmethod
    def attach(cls, home: Path) -> AirflowStandalone | None:
        """A handle on a standalone started by ``up`` (None when its files are missing)."""
        try:
            state = json.loads((home / STATE_FILE).read_text())
            pid = int((home / PID_FILE).read_text().strip())
        except (OSError, ValueError):
            return None
        srv = cls(home, int(state["port"]), {})
        srv.pid = pid if _pid_alive(pid) else None
        return srv


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _demo_inventory(s3: Any, urls: int) -> None:
    from pipeline.demo import make_inventory

    client = s3.client()
    with contextlib.suppress(Exception):
        client.head_object(Bucket=BUCKET, Key=INVENTORY_KEY)
        print(f"# demo inventory: s3://{BUCKET}/{INVENTORY_KEY} (kept)", file=sys.stderr)
        return
    path = make_inventory(LOCAL / "stack" / "inventory.parquet", urls)
    client.upload_file(str(path), BUCKET, INVENTORY_KEY)
    print(f"# demo inventory: {urls:,} URLs at s3://{BUCKET}/{INVENTORY_KEY}", file=sys.stderr)


def unpause_dag(airflow: AirflowStandalone, dag_id: str, timeout: float = 120) -> str:
    """Unpause a DAG as soon as the dag-processor has parsed it; returns a REST token."""
    token = airflow.token()
    deadline = time.monotonic() + timeout
    while True:
        try:
            airflow.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False}, token=token)
            return token
        except StackError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def first_run_id(airflow: AirflowStandalone, dag_id: str, token: str,
                 timeout: float = 120) -> str:
    """The id of the DAG's first run (unpausing a scheduled DAG makes its last tick's run)."""
    deadline = time.monotonic() + timeout
    while not (runs := airflow.call("GET", f"/api/v2/dags/{dag_id}/dagRuns",
                                    token=token)["dag_runs"]):
        if time.monotonic() > deadline:
            raise StackError(f"no run of {dag_id} after {timeout:.0f} s")
        time.sleep(2)
    return str(runs[0]["dag_run_id"])


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def trigger_demo(airflow: AirflowStandalone, dag_id: str = "sitemaps_demo",
                 timeout: float = 120) -> str:
    """Unpause the demo DAG (once the dag-processor has parsed it) and start exactly one run.

    Unpausing a DAG whose latest cron tick has no run makes that run (catchup=False still
    runs the latest tick): then that run is the one, and triggering another would only
    queue a second behind it. Only when unpausing makes none is a run triggered."""
    token = airflow.token()
    deadline = time.monotonic() + timeout
    while True:
        try:
            dag = airflow.call("GET", f"/api/v2/dags/{dag_id}", token=token)
            break
        except StackError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)
    runs = airflow.call("GET", f"/api/v2/dags/{dag_id}/dagRuns", token=token)["dag_runs"]
    before = {r["dag_run_id"] for r in runs}
    due = _when(dag.get("next_dagrun_run_after"))
    tick_runs = dag["is_paused"] and due is not None and due <= datetime.now(UTC)
    unpause_dag(airflow, dag_id)
    if not tick_runs:
        run = airflow.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None},
                           token=token)
        print(f"# triggered {run['dag_run_id']}", file=sys.stderr)
        return str(run["dag_run_id"])
    while not (new := [r for r in airflow.call("GET", f"/api/v2/dags/{dag_id}/dagRuns",
                                               token=token)["dag_runs"]
                       if r["dag_run_id"] not in before]):
        if time.monotonic() > deadline:
            raise StackError(f"unpausing {dag_id} made no run in {timeout:.0f} s")
        time.sleep(2)
    print(f"# unpausing started {new[0]['dag_run_id']} (its latest scheduled tick)",
          file=sys.stderr)
    return str(new[0]["dag_run_id"])


def _write_env_file(env: dict[str, str]) -> Path:
    keys = [k for k in env if k.startswith(("AIRFLOW", "SITEMAPS_"))]
    lines = ["# source this file to use the airflow CLI on the local stack", *(
        f"export {k}='{env[k]}'" for k in sorted(keys)),
        f"export PATH='{Path(sys.executable).parent}':\"$PATH\""]
    path = AIRFLOW_HOME / ENV_FILE
    path.write_text("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


def cmd_up(args: argparse.Namespace) -> int:
    existing = AirflowStandalone.attach(AIRFLOW_HOME)
    if existing is not None and existing.pid is not None:
        print(f"already running (pid {existing.pid}) at {existing.url}; "
              "infra/local/stack.sh down first", file=sys.stderr)
        return 1
    weed = load_seaweedfs()
    s3 = weed.SeaweedFS.attach(SEAWEEDFS_DIR)
    if s3 is None or not s3.is_running():
        previous = s3.s3_port if s3 is not None else None
        port = next((p for p in (previous, weed.DEFAULT_CLI_PORT) if p and port_is_free(p)),
                    None)
        s3 = weed.SeaweedFS(SEAWEEDFS_DIR, s3_port=port)
        s3.start(timeout=90, detach=True)
    s3.create_bucket(BUCKET)
    _demo_inventory(s3, args.urls)

    port = args.port or int(os.environ.get("SITEMAPS_AIRFLOW_PORT") or 0) or (
        DEFAULT_PORT if port_is_free(DEFAULT_PORT) else free_port())
    AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
    env = airflow_env(AIRFLOW_HOME, port, sites_file=args.sites, s3_conn=connection_uri_env(
        s3.endpoint_url, s3.access_key, s3.secret_key), parallelism=args.parallelism)
    env_file = _write_env_file(env)
    (AIRFLOW_HOME / STATE_FILE).write_text(json.dumps({"port": port}) + "\n")
    airflow = AirflowStandalone(AIRFLOW_HOME, port, env)
    t = time.monotonic()
    print(f"# starting airflow standalone on {airflow.url} (log {airflow.log_path}) ...",
          file=sys.stderr)
    try:
        airflow.start(timeout=args.timeout)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.trigger:
        run_id = trigger_demo(airflow)
        dag_line = f"DAG sitemaps_demo: run {run_id} started: {airflow.url}/dags/sitemaps_demo"
    else:
        dag_line = "DAG sitemaps_demo: unpause it and trigger it (or: stack.sh up --trigger)"
    print(f"""
Airflow is up in {time.monotonic() - t:.0f} s: {airflow.url}
  log in as admin, password {airflow.admin_password()}
  (written by airflow standalone to {AIRFLOW_HOME / PASSWORDS_FILE})
  {dag_line}
  at most {args.parallelism} tasks at a time (--parallelism)
S3 (SeaweedFS): {s3.endpoint_url}  bucket s3://{BUCKET}  (Airflow connection {CONN_ID})
  sitemaps: s3://{BUCKET}/public/demo/sitemap_index.xml once a run succeeded
airflow CLI on this stack: source {env_file}
stop everything: infra/local/stack.sh down""")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    airflow = AirflowStandalone.attach(AIRFLOW_HOME)
    if airflow is not None and airflow.pid is not None:
        pid = airflow.pid
        airflow.stop(timeout=args.timeout)
        print(f"airflow standalone stopped (process group {pid})", file=sys.stderr)
    else:
        print("airflow standalone: not running", file=sys.stderr)
    s3 = load_seaweedfs().SeaweedFS.attach(SEAWEEDFS_DIR)
    if s3 is not None and s3.is_running():
        pid = s3.pid
        s3.stop(timeout=args.timeout)
        print(f"SeaweedFS stopped (pid {pid})", file=sys.stderr)
    else:
        print("SeaweedFS: not running", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    airflow = AirflowStandalone.attach(AIRFLOW_HOME)
    up = airflow is not None and airflow.pid is not None
    if up:
        assert airflow is not None
        state = "healthy" if airflow.is_healthy() else f"not healthy: {airflow.health()}"
        print(f"airflow standalone: pid {airflow.pid} at {airflow.url}, {state}")
    else:
        print("airflow standalone: not running")
    s3 = load_seaweedfs().SeaweedFS.attach(SEAWEEDFS_DIR)
    s3_up = s3 is not None and s3.is_running()
    print(f"SeaweedFS: pid {s3.pid} at {s3.endpoint_url}" if s3_up and s3 is not None
          else "SeaweedFS: not running")
    return 0 if up and s3_up else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stack.sh", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start SeaweedFS and airflow standalone; print the login")
    up.add_argument("--port", type=int, default=None,
                    help=f"API/UI port (default $SITEMAPS_AIRFLOW_PORT, else {DEFAULT_PORT} "
                         "if free, else any free port)")
    up.add_argument("--urls", type=int, default=100_000, help="demo inventory rows")
    up.add_argument("--sites", type=Path, default=SITES_FILE, help="site configuration file")
    up.add_argument("--trigger", action="store_true",
                    help="unpause sitemaps_demo and start exactly one run of it")
    up.add_argument("--parallelism", type=int, default=machine_parallelism(),
                    help="tasks at a time, and LocalExecutor worker processes (default: this "
                         f"machine's cores, {machine_parallelism()})")
    up.add_argument("--timeout", type=float, default=240, help="startup timeout, seconds")
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop airflow standalone and SeaweedFS")
    down.add_argument("--timeout", type=float, default=30,
                      help="seconds between SIGTERM and SIGKILL (default 30)")
    down.set_defaults(func=cmd_down)
    sub.add_parser("status", help="is it running?").set_defaults(func=cmd_status)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
