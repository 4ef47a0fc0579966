"""The distributed local stack: Airflow on the CeleryExecutor with two workers, on one machine.

    infra/local/cluster.sh up [--workers N] [--concurrency N] [--urls N] [--trigger]
    infra/local/cluster.sh status
    infra/local/cluster.sh down

Each part runs in its own process group, on 127.0.0.1, with its data and log under
``.local/cluster/``: PostgreSQL (Debian's ``postgresql``: the metadata DB and Celery's result
backend), Redis (Debian's ``redis-server``: the Celery broker), SeaweedFS (the S3 that every
task reads from and writes to), then ``airflow db migrate`` and the Airflow api-server,
scheduler, dag-processor, triggerer and N Celery workers (``worker-1``, ``worker-2``, ...: each
reports its own name as the task instances' hostname, see ``worker_hostname.py``).

Nothing is shared between the workers but S3, Redis and PostgreSQL: this is how the DAGs run
on separate machines. Postgres refuses to run as root: as root it runs as the ``postgres``
user that Debian's package creates. ``down`` stops everything (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stack  # noqa: E402 - the standalone stack's helpers (REST calls, env, SeaweedFS)

HERE = stack.HERE
CLUSTER = stack.LOCAL / "cluster"
STATE_FILE = "cluster.json"
DB_NAME = DB_USER = "airflow"
AIRFLOW_PARTS = ("api-server", "scheduler", "dag-processor", "triggerer")


class ClusterError(stack.StackError):
    """A part of the cluster could not be started, reached or stopped."""


def postgres_bin(name: str) -> str:
    """A PostgreSQL server program (Debian keeps them out of PATH, per major version)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: int(Path(p).parts[-3]))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path:
        return on_path
    raise ClusterError(f"no {name}: apt-get install postgresql redis-server (make test does)")


def _as_postgres_user() -> dict[str, Any]:
    """Popen arguments that drop root (postgres refuses it); nothing when not root."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise ClusterError("running as root and there is no postgres user: apt-get install "
                           "postgresql creates it") from None
    return {"user": pw.pw_uid, "group": pw.pw_gid}


@dataclass
class Part:
    """One long-running process of the cluster, in its own process group."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    _proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, **self.popen)
        self.pid = self._proc.pid

    def exited(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def alive(self) -> bool:
        return self.pid is not None and stack._group_alive(self.pid)

    def kill(self) -> None:
        """SIGKILL the group and every descendant's group (task processes have their own) at
        once: a machine lost, as far as Airflow can tell."""
        if self.pid is not None:
            groups = stack.kill_tree(self.pid)
            deadline = time.monotonic() + 10
            while any(stack._group_alive(g) for g in groups) and time.monotonic() < deadline:
                self.exited()  # reap it, so that it is not a zombie
                time.sleep(0.2)

    def stop(self, timeout: float = 30) -> None:
        if self.pid is None:
            return
        if not stack.stop_group(self.pid, timeout, reap=self.exited):
            raise ClusterError(f"{self.name} (process group {self.pid}) survived SIGKILL")
        self.pid = None

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


class Cluster:
    """PostgreSQL, Redis, SeaweedFS and Airflow (CeleryExecutor, N workers) under ``root``."""

    def __init__(self, root: Path, *, sites_file: Path, workers: int = 2, concurrency: int = 1,
                 api_port: int | None = None, heartbeat_timeout: int = 60,
                 extra_env: dict[str, str] | None = None, s3: Any = None) -> None:
        self.root = Path(root)
        self.home = self.root / "airflow"
        self.sites_file = sites_file
        self.workers = workers
        self.concurrency = concurrency
        self.heartbeat_timeout = heartbeat_timeout
        self.extra_env = dict(extra_env or {})
        self.pg_port = stack.free_port()
        self.redis_port = stack.free_port()
        self.api_port = api_port or stack.free_port()
        self.parts: dict[str, Part] = {}
        self.s3: Any = s3  # a running SeaweedFS to use (and leave running), else our own
        self._own_s3 = s3 is None
        self.api = stack.AirflowStandalone(self.home, self.api_port, {})  # REST calls only

    # -- the services -------------------------------------------------------------------

    def _start_postgres(self) -> None:
        data = self.root / "postgres"
        sockets = self.root / "postgres-run"
        as_pg = _as_postgres_user()
        for d in (data, sockets):
            d.mkdir(parents=True, exist_ok=True)
            if as_pg:
                os.chown(d, as_pg["user"], as_pg["group"])
        os.chmod(data, 0o700)
        if as_pg:  # postgres must reach its folders
            for parent in [self.root, *self.root.parents]:
                os.chmod(parent, os.stat(parent).st_mode | 0o011)
                if parent == stack.REPO_ROOT.parent:
                    break
        if not (data / "PG_VERSION").exists():
            subprocess.run([postgres_bin("initdb"), "-D", str(data), "-U", DB_USER,
                            "--auth=trust", "-E", "UTF8"], check=True, capture_output=True,
                           **as_pg)
        env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}
        part = Part("postgres", [postgres_bin("postgres"), "-D", str(data), "-h", "127.0.0.1",
                                 "-p", str(self.pg_port), "-k", str(sockets),
                                 "-c", "max_connections=200", "-c", "fsync=off"],
                    env, self.root / "logs" / "postgres.log", as_pg)
        self._start(part, ready=lambda: subprocess.run(
            [postgres_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(self.pg_port)],
            capture_output=True).returncode == 0)
        exists = subprocess.run(
            [postgres_bin("psql"), "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", DB_USER,
             "-d", "postgres", "-tAc", f"SELECT 1 FROM pg_database WHERE datname='{DB_NAME}'"],
            capture_output=True, text=True, check=True).stdout.strip()
        if not exists:
            subprocess.run([postgres_bin("createdb"), "-h", "127.0.0.1", "-p",
                            str(self.pg_port), "-U", DB_USER, DB_NAME], check=True)

    def _start_redis(self) -> None:
        exe = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(exe).exists():
            raise ClusterError("no redis-server: apt-get install redis-server (make test does)")
        part = Part("redis", [exe, "--bind", "127.0.0.1", "--port", str(self.redis_port),
                              "--save", "", "--appendonly", "no", "--dir", str(self.root)],
                    {"PATH": os.environ.get("PATH", "")}, self.root / "logs" / "redis.log")
        self._start(part, ready=lambda: stack.port_is_free(self.redis_port) is False)

    def _start_s3(self) -> None:
        weed = stack.load_seaweedfs()
        self.s3 = weed.SeaweedFS(self.root / "seaweedfs", s3_port=stack.free_port())
        self.s3.start(timeout=90, detach=True)
        self.s3.create_bucket(stack.BUCKET)

    def _start(self, part: Part, ready: Any, timeout: float = 60) -> None:
        part.start()
        self.parts[part.name] = part
        deadline = time.monotonic() + timeout
        while not ready():
            if part.exited() is not None or time.monotonic() > deadline:
                raise ClusterError(f"{part.name} did not start (see {part.log}):\n"
                                   f"{part.log_tail()}")
            time.sleep(0.3)

    # -- Airflow ------------------------------------------------------------------------

    def airflow_env(self) -> dict[str, str]:
        env = stack.airflow_env(self.home, self.api_port, sites_file=self.sites_file,
                                s3_conn=stack.connection_uri_env(
                                    self.s3.endpoint_url, self.s3.access_key,
                                    self.s3.secret_key))
        db = f"postgresql+psycopg2://{DB_USER}@127.0.0.1:{self.pg_port}/{DB_NAME}"
        secrets_file = self.root / "secrets.json"
        if not secrets_file.exists():  # every component must sign and check the same tokens
            secrets_file.write_text(json.dumps({"jwt": secrets.token_urlsafe(32),
                                                "api": secrets.token_urlsafe(32)}))
            os.chmod(secrets_file, 0o600)
        keys = json.loads(secrets_file.read_text())
        env.update({
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db,
            "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql://{DB_USER}@127.0.0.1:"
                                               f"{self.pg_port}/{DB_NAME}",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL":
                f"http://127.0.0.1:{self.api_port}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt"],
            "AIRFLOW__API__SECRET_KEY": keys["api"],
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            # A lost worker's task instances are failed (and retried) after this long.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(self.heartbeat_timeout),
            "AWS_EC2_METADATA_DISABLED": "true",
        })
        env.update(self.extra_env)
        return env

    def worker_part(self, n: int, env: dict[str, str]) -> Part:
        name = f"worker-{n}"
        wenv = dict(env)
        wenv.update({
            "SITEMAPS_WORKER_NAME": name,
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "worker_hostname.hostname",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")])),
            # Each worker serves its task logs on a port of its own.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(stack.free_port()),
        })
        return Part(name, [stack.airflow_executable(), "celery", "worker",
                           "--celery-hostname", f"{name}@%h",
                           "--concurrency", str(self.concurrency)],
                    wenv, self.root / "logs" / f"{name}.log", {"cwd": str(self.home)})

    def start(self, timeout: float = 300) -> None:
        try:
            self._start_everything(timeout)
        except BaseException:
            self.stop(timeout=10)
            raise
        self._write_state()

    def _start_everything(self, timeout: float) -> None:
        t = time.monotonic()
        self.root.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        self._start_postgres()
        self._start_redis()
        if self._own_s3:
            self._start_s3()
        env = self.airflow_env()
        migrate = subprocess.run([stack.airflow_executable(), "db", "migrate"], env=env,
                                 cwd=self.home, capture_output=True, text=True, timeout=600)
        if migrate.returncode != 0:
            raise ClusterError("airflow db migrate failed:\n"
                               + "\n".join(migrate.stdout.splitlines()[-30:])
                               + migrate.stderr[-3000:])
        for name in AIRFLOW_PARTS:
            part = Part(name, [stack.airflow_executable(), name], env,
                        self.root / "logs" / f"{name}.log", {"cwd": str(self.home)})
            part.start()
            self.parts[name] = part
        for n in range(1, self.workers + 1):
            part = self.worker_part(n, env)
            part.start()
            self.parts[part.name] = part
        deadline = t + timeout
        while not (self.api.is_healthy() and self.workers_online() >= self.workers):
            for part in self.parts.values():
                if part.exited() is not None:
                    raise ClusterError(f"{part.name} exited with {part.exited()} "
                                       f"(see {part.log}):\n{part.log_tail()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"cluster not ready after {timeout:.0f} s: health "
                                   f"{self.api.health()}, {self.workers_online()} workers")
            time.sleep(1)

    def workers_online(self) -> int:
        """Celery workers that log they are ready (celery prints it once connected)."""
        return sum("ready." in p.log_tail(400) for n, p in self.parts.items()
                   if n.startswith("worker-") and p.exited() is None)

    def kill_worker(self, name: str) -> None:
        self.parts[name].kill()

    def token(self) -> str:
        return self.api.token()

    def call(self, method: str, path: str, body: Any = None, *, token: str | None) -> Any:
        return self.api.call(method, path, body, token=token)

    def stop(self, timeout: float = 30) -> None:
        """Everything, Airflow first (its workers finish or are killed), SeaweedFS last."""
        errors = []
        for name in [n for n in self.parts if n.startswith("worker-")] + [
                *reversed(AIRFLOW_PARTS), "redis", "postgres"]:
            part = self.parts.get(name)
            if part is not None:
                try:
                    part.stop(timeout)
                except ClusterError as exc:
                    errors.append(str(exc))
        if self.s3 is not None and self._own_s3:
            self.s3.stop(timeout=timeout)
        with contextlib.suppress(FileNotFoundError):
            (self.root / STATE_FILE).unlink()
        if errors:
            raise ClusterError("; ".join(errors))

    def _write_state(self) -> None:
        state = {"api_port": self.api_port, "pids": {n: p.pid for n, p in self.parts.items()}}
        (self.root / STATE_FILE).write_text(json.dumps(state) + "\n")


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> int:
    if (CLUSTER / STATE_FILE).exists():
        print(f"already running ({CLUSTER / STATE_FILE}); cluster.sh down first",
              file=sys.stderr)
        return 1
    cluster = Cluster(CLUSTER, sites_file=args.sites, workers=args.workers,
                      concurrency=args.concurrency, api_port=args.port)
    t = time.monotonic()
    print(f"# starting the cluster under {CLUSTER} (logs in {CLUSTER / 'logs'}) ...",
          file=sys.stderr)
    try:
        cluster.start(timeout=args.timeout)
    except stack.StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stack._demo_inventory(cluster.s3, args.urls)
    if args.trigger:
        stack.trigger_demo(cluster.api)
    print(f"""
The cluster is up in {time.monotonic() - t:.0f} s: {cluster.api.url}
  log in as admin, password {cluster.api.admin_password()}
  executor CeleryExecutor, {args.workers} workers ({', '.join(
        n for n in cluster.parts if n.startswith('worker-'))}), concurrency {args.concurrency}
  PostgreSQL 127.0.0.1:{cluster.pg_port}, Redis 127.0.0.1:{cluster.redis_port}
S3 (SeaweedFS): {cluster.s3.endpoint_url}  bucket s3://{stack.BUCKET}
stop everything: infra/local/cluster.sh down""")
    return 0


def _attached_pids() -> dict[str, int]:
    try:
        return dict(json.loads((CLUSTER / STATE_FILE).read_text())["pids"])
    except (OSError, ValueError, KeyError):
        return {}


def cmd_down(args: argparse.Namespace) -> int:
    pids = _attached_pids()
    for name, pid in reversed(list(pids.items())):  # workers first, postgres last
        part = Part(name, [], {}, CLUSTER / "logs" / f"{name}.log", pid=pid)
        if part.alive():
            part.stop(args.timeout)
            print(f"{name} stopped (process group {pid})", file=sys.stderr)
    s3 = stack.load_seaweedfs().SeaweedFS.attach(CLUSTER / "seaweedfs")
    if s3 is not None and s3.is_running():
        s3.stop(timeout=args.timeout)
        print("SeaweedFS stopped", file=sys.stderr)
    with contextlib.suppress(FileNotFoundError):
        (CLUSTER / STATE_FILE).unlink()
    if not pids:
        print("the cluster was not running", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    pids = _attached_pids()
    up = 0
    for name, pid in pids.items():
        alive = stack._group_alive(pid)
        up += alive
        print(f"{name}: {'running, process group ' + str(pid) if alive else 'not running'}")
    if not pids:
        print("the cluster is not running")
    return 0 if pids and up == len(pids) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster.sh", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start PostgreSQL, Redis, SeaweedFS and Airflow on Celery")
    up.add_argument("--workers", type=int, default=2, help="Celery workers (default 2)")
    up.add_argument("--concurrency", type=int, default=1,
                    help="task slots of each worker (default 1)")
    up.add_argument("--port", type=int, default=None, help="API/UI port (default: a free one)")
    up.add_argument("--urls", type=int, default=100_000, help="demo inventory rows")
    up.add_argument("--sites", type=Path, default=stack.SITES_FILE,
                    help="site configuration file")
    up.add_argument("--trigger", action="store_true", help="unpause and trigger sitemaps_demo")
    up.add_argument("--timeout", type=float, default=300, help="startup timeout, seconds")
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop every part of the cluster")
    down.add_argument("--timeout", type=float, default=30,
                      help="seconds between SIGTERM and SIGKILL (default 30)")
    down.set_defaults(func=cmd_down)
    sub.add_parser("status", help="is every part running?").set_defaults(func=cmd_status)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
