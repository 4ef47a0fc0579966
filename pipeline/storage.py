"""Object storage behind one small interface: a local folder or an S3 prefix.

Reads and streamed writes go through smart_open (with a boto3 client on S3);
the operations smart_open does not have (list, delete, conditional put, head)
use the same boto3 client. Keys are always relative to the storage root and
use "/" separators.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

import smart_open

from pipeline.errors import ConfigError, PublishConflict, StorageError, TransientError

log = logging.getLogger(__name__)

#: Content types by file suffix.
CONTENT_TYPES = {
    ".xml.gz": "application/gzip",
    ".txt.gz": "application/gzip",
    ".xml": "application/xml",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".parquet": "application/vnd.apache.parquet",
    ".html": "text/html; charset=utf-8",
    ".atom": "application/atom+xml",
}
#: Shard files never change under their key: CDNs may keep them for a year.
CACHE_IMMUTABLE = "public, max-age=31536000, immutable"
#: The root index, robots lines and live manifest change with each generation.
CACHE_SHORT = "public, max-age=300"
#: smart_open's multipart part size on S3.
S3_PART_SIZE = 16 * 1024 * 1024
#: Prefix of a local write's temporary file (beside its target, so os.replace is atomic).
TEMP_PREFIX = ".tmp-"
#: The object the conditional-write probe writes and deletes (at the output root).
PROBE_KEY = "_conditional_write_probe.json"

_UMASK = os.umask(0)
os.umask(_UMASK)
_TRANSIENT_CODES = {
    "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
    "ServiceUnavailable", "503", "500", "502", "504", "RequestTimeTooSkewed",
}


def content_type_for(key: str) -> str:
    """The Content-Type to store `key` with; never implies Content-Encoding."""
    for suffix, ctype in CONTENT_TYPES.items():
        if key.endswith(suffix):
            return ctype
    return "application/octet-stream"


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object: key relative to the root, size and last change."""

    key: str
    size: int
    modified: datetime


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def join(uri: str, *parts: str) -> str:
    """Join URI parts with single slashes."""
    out = uri.rstrip("/")
    for part in parts:
        out = out + "/" + part.strip("/")
    return out


class Storage:
    """Base class: a root (folder or S3 prefix) and operations on keys below it."""

    root: str

    def uri(self, key: str) -> str:
        return join(self.root, key) if key else self.root

    def open_write(self, key: str, *, cache_control: str | None = None
                   ) -> contextlib.AbstractContextManager[IO[bytes]]:
        """A file to write `key` through; the object appears only when the block ends well."""
        raise NotImplementedError

    def open_read(self, key: str) -> IO[bytes]:
        raise NotImplementedError

    def write_bytes(self, key: str, data: bytes, *, cache_control: str | None = None) -> None:
        with self.open_write(key, cache_control=cache_control) as f:
            f.write(data)

    def read_bytes(self, key: str) -> bytes:
        with self.open_read(key) as f:
            return f.read()

    def read_bytes_or_none(self, key: str) -> bytes | None:
        try:
            return self.read_bytes(key)
        except FileNotFoundError:
            return None

    def exists(self, key: str) -> bool:
        raise NotImplementedError

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        raise NotImplementedError

    def delete(self, keys: Iterable[str]) -> int:
        raise NotImplementedError

    def read_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        """The object's bytes and an opaque version tag, or (None, None)."""
        raise NotImplementedError

    def put_if(self, key: str, data: bytes, *, if_match: str | None,
               cache_control: str | None = None) -> None:
        """Write `key` only if its version is still `if_match` (None: only if absent).

        Raises PublishConflict when the condition fails.
        """
        raise NotImplementedError

    def upload_file(self, path: Path, key: str, *, cache_control: str | None = None) -> None:
        with open(path, "rb") as src, self.open_write(key, cache_control=cache_control) as dst:
            shutil.copyfileobj(src, dst, 8 * 1024 * 1024)

    @contextlib.contextmanager
    def local_path(self, key: str) -> Iterator[Path]:
        """A local file holding the object (the object itself when local)."""
        raise NotImplementedError
        yield  # pragma: no cover

    def abort_incomplete_uploads(self, older_than: datetime) -> int:
        return 0

    def list_temporaries(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Leftover temporary files of interrupted writes (none on S3: multipart uploads)."""
        return iter(())

    def check_conditional_writes(self) -> None:
        """ConfigError unless the store refuses a conditional write whose condition fails."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStorage(Storage):
    """A local folder. Writes go to a temporary file and are renamed into place."""

    def __init__(self, root: str) -> None:
        self.root = str(Path(root).expanduser().absolute())
        self.path = Path(self.root)

    def _p(self, key: str) -> Path:
        return self.path / key

    @contextlib.contextmanager
    def open_write(self, key: str, *, cache_control: str | None = None) -> Iterator[IO[bytes]]:
        target = self._p(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=target.parent)
        try:
            # mkstemp makes 0600; published files must be readable by a web server.
            os.fchmod(fd, 0o666 & ~_UMASK)
            with os.fdopen(fd, "wb") as f:
                yield f
                # Data on disk before the rename, the rename on disk after it: a power loss
                # leaves the old file or the new one, never an empty one.
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
            _fsync_dir(target.parent)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def open_read(self, key: str) -> IO[bytes]:
        return open(self._p(key), "rb")

    def exists(self, key: str) -> bool:
        return self._p(key).is_file()

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # A prefix need not be a folder: list its folder, keep keys that match.
        folder = prefix if prefix.endswith("/") or not prefix else prefix.rpartition("/")[0]
        base = self._p(folder) if folder else self.path
        if not base.is_dir():
            return
        for p in sorted(base.rglob("*")):
            if p.is_file() and not p.name.startswith(".") and \
                    p.relative_to(self.path).as_posix().startswith(prefix):
                st = p.stat()
                yield ObjectInfo(
                    key=p.relative_to(self.path).as_posix(),
                    size=st.st_size,
                    modified=datetime.fromtimestamp(st.st_mtime, UTC),
                )

    def list_temporaries(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self._p(prefix) if prefix else self.path
        if not base.is_dir():
            return
        for p in sorted(base.rglob(TEMP_PREFIX + "*")):
            with contextlib.suppress(FileNotFoundError):  # a write may finish meanwhile
                st = p.stat()
                yield ObjectInfo(p.relative_to(self.path).as_posix(), st.st_size,
                                 datetime.fromtimestamp(st.st_mtime, UTC))

    def delete(self, keys: Iterable[str]) -> int:
        n = 0
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                self._p(key).unlink()
                n += 1
        return n

    def read_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        try:
            data = self._p(key).read_bytes()
        except FileNotFoundError:
            return None, None
        return data, hashlib.sha256(data).hexdigest()

    def put_if(self, key: str, data: bytes, *, if_match: str | None,
               cache_control: str | None = None) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        # The lock makes compare-and-replace one step between local runs.
        with open(self.path / ".lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _, current = self.read_with_etag(key)
            if current != if_match:
                raise PublishConflict(
                    f"another generation was published since this run started "
                    f"({self.uri(key)} changed); the other run's generation stays live"
                )
            self.write_bytes(key, data)

    @contextlib.contextmanager
    def local_path(self, key: str) -> Iterator[Path]:
        p = self._p(key)
        if not p.exists():
            raise FileNotFoundError(str(p))
        yield p

    def upload_file(self, path: Path, key: str, *, cache_control: str | None = None) -> None:
        target = self._p(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(path).resolve() != target.resolve():
            shutil.copyfile(path, target)


@dataclass(frozen=True)
class S3Settings:
    """Where and as whom to reach S3; by default from the usual AWS environment variables."""

    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    region: str = "us-east-1"

    @classmethod
    def from_env(cls) -> S3Settings:
        return cls(
            endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
            access_key_id=os.environ.get("AWS_ACCESS_KEY_ID"),
            secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
            session_token=os.environ.get("AWS_SESSION_TOKEN"),
            region=os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or "us-east-1",
        )

    def __repr__(self) -> str:  # never print credentials
        return f"S3Settings(endpoint_url={self.endpoint_url!r}, region={self.region!r})"


_configured: S3Settings | None = None
#: (event name, handler) pairs registered on every S3 client this module makes:
#: botocore's event system, used by tests to inject faults and count requests.
CLIENT_HOOKS: list[tuple[str, Any]] = []


def configure_s3(settings: S3Settings | None) -> None:
    """Use these S3 settings in this process instead of the environment (None: back to it).

    The DAGs call it with settings made from an Airflow connection.
    """
    global _configured
    _configured = settings


def s3_settings() -> S3Settings:
    return _configured or S3Settings.from_env()


def s3_client() -> Any:
    """A boto3 S3 client for the configured settings (environment by default).

    Retries transient failures with backoff (botocore's standard mode) and
    bounds connect and read times so an unreachable endpoint fails promptly.
    Clients are made once per distinct settings (making one costs ~50 ms).
    """
    return _client(s3_settings(), int(os.environ.get("SITEMAPS_S3_ATTEMPTS", "5")),
                   float(os.environ.get("SITEMAPS_S3_CONNECT_TIMEOUT", "5")),
                   tuple(CLIENT_HOOKS))


@functools.lru_cache(maxsize=16)
def _client(cfg: S3Settings, attempts: int, connect_timeout: float,
            hooks: tuple[tuple[str, Any], ...]) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "max_attempts": attempts},
        connect_timeout=connect_timeout,
        read_timeout=60,
        s3={"addressing_style": "path"} if cfg.endpoint_url else {},
        # Checksums on every PUT break some S3-compatible servers; only when required.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    client = boto3.session.Session().client(
        "s3", endpoint_url=cfg.endpoint_url, config=config, region_name=cfg.region,
        aws_access_key_id=cfg.access_key_id, aws_secret_access_key=cfg.secret_access_key,
        aws_session_token=cfg.session_token,
    )
    for event, handler in hooks:
        client.meta.events.register(event, handler)
    return client


def s3_filesystem() -> Any:
    """A pyarrow S3FileSystem for the same settings (Parquet reads with range requests)."""
    from pyarrow import fs

    cfg = s3_settings()
    kwargs: dict[str, Any] = {"region": cfg.region, "connect_timeout": 5, "request_timeout": 60}
    if cfg.endpoint_url:
        scheme, _, host = cfg.endpoint_url.partition("://")
        kwargs.update(endpoint_override=host, scheme=scheme, force_virtual_addressing=False)
    if cfg.access_key_id:
        kwargs.update(access_key=cfg.access_key_id, secret_key=cfg.secret_access_key or "",
                      session_token=cfg.session_token)
    return fs.S3FileSystem(**kwargs)


def _error_code(exc: Exception) -> str:
    resp = getattr(exc, "response", None) or {}
    code = str(resp.get("Error", {}).get("Code", ""))
    status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code or str(status or "")


def translate_s3_error(exc: Exception, bucket: str, key: str) -> Exception:
    """A PipelineError that names the bucket and key, split terminal/transient."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    where = f"s3://{bucket}/{key}"
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError)):
        return TransientError(f"cannot reach the S3 endpoint for {where}: {exc}")
    if isinstance(exc, ClientError):
        code = _error_code(exc)
        if code in ("NoSuchKey", "404", "NotFound"):
            return FileNotFoundError(where)
        if code == "NoSuchBucket":
            return StorageError(f"bucket {bucket!r} does not exist ({where}); create it or fix --out")
        if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return StorageError(
                f"access to {where} refused ({code}); check the credentials and the bucket policy"
            )
        if code in _TRANSIENT_CODES:
            return TransientError(f"S3 error {code} on {where}; retry later")
        return StorageError(f"S3 error {code} on {where}: {exc}")
    return exc


class S3Storage(Storage):
    """An S3 prefix, `s3://bucket/prefix`."""

    def __init__(self, root: str, client: Any | None = None) -> None:
        parsed = urlparse(root)
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.root = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.client = client or s3_client()

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    @contextlib.contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - translated, never swallowed
            translated = translate_s3_error(exc, self.bucket, self._k(key))
            if translated is exc:
                raise
            raise translated from exc

    def _put_args(self, key: str, cache_control: str | None) -> dict[str, Any]:
        args: dict[str, Any] = {"ContentType": content_type_for(key)}
        if cache_control:
            args["CacheControl"] = cache_control
        return args

    @contextlib.contextmanager
    def open_write(self, key: str, *, cache_control: str | None = None) -> Iterator[IO[bytes]]:
        # smart_open aborts the multipart upload on an exception, so a failed
        # write never leaves a half-written object under the key.
        with self._errors(key), smart_open.open(
            self.uri(key), "wb", compression="disable",
            transport_params={
                "client": self.client,
                "client_kwargs": {
                    "S3.Client.create_multipart_upload": self._put_args(key, cache_control),
                    "S3.Client.put_object": self._put_args(key, cache_control),
                },
                "min_part_size": S3_PART_SIZE,
            },
        ) as f:
            yield f

    def write_bytes(self, key: str, data: bytes, *, cache_control: str | None = None) -> None:
        with self._errors(key):
            self.client.put_object(Bucket=self.bucket, Key=self._k(key), Body=data,
                                   **self._put_args(key, cache_control))

    def open_read(self, key: str) -> IO[bytes]:
        with self._errors(key):
            return smart_open.open(self.uri(key), "rb", compression="disable",
                                   transport_params={"client": self.client})

    def read_bytes(self, key: str) -> bytes:
        with self._errors(key):
            return bytes(self.client.get_object(Bucket=self.bucket, Key=self._k(key))["Body"].read())

    def exists(self, key: str) -> bool:
        try:
            with self._errors(key):
                self.client.head_object(Bucket=self.bucket, Key=self._k(key))
        except FileNotFoundError:
            return False
        return True

    def head(self, key: str) -> dict[str, Any]:
        with self._errors(key):
            return dict(self.client.head_object(Bucket=self.bucket, Key=self._k(key)))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        full = self._k(prefix) if prefix else (self.prefix + "/" if self.prefix else "")
        strip = len(self.prefix) + 1 if self.prefix else 0
        with self._errors(prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full)
            for page in pages:
                for obj in page.get("Contents", []):
                    yield ObjectInfo(key=obj["Key"][strip:], size=obj["Size"],
                                     modified=obj["LastModified"])

    def delete(self, keys: Iterable[str]) -> int:
        batch: builtins.list[str] = []
        n = 0
        for key in keys:
            batch.append(key)
            if len(batch) == 1000:
                n += self._delete_batch(batch)
                batch = []
        if batch:
            n += self._delete_batch(batch)
        return n

    def _delete_batch(self, keys: builtins.list[str]) -> int:
        with self._errors(keys[0]):
            self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": self._k(k)} for k in keys], "Quiet": True})
        return len(keys)

    def read_with_etag(self, key: str) -> tuple[bytes | None, str | None]:
        try:
            with self._errors(key):
                obj = self.client.get_object(Bucket=self.bucket, Key=self._k(key))
        except FileNotFoundError:
            return None, None
        return bytes(obj["Body"].read()), str(obj["ETag"])

    def put_if(self, key: str, data: bytes, *, if_match: str | None,
               cache_control: str | None = None) -> None:
        from botocore.exceptions import ClientError

        cond = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._k(key), Body=data,
                                   **cond, **self._put_args(key, cache_control))
        except ClientError as exc:
            code = _error_code(exc)
            # AWS answers If-Match on a key that is gone with 404 (SeaweedFS with 412): the
            # object this run read was replaced or removed, a lost race either way.
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409") or (
                    if_match and code in ("NoSuchKey", "404", "NotFound")):
                raise PublishConflict(
                    f"another generation was published since this run started "
                    f"({self.uri(key)} changed); the other run's generation stays live"
                ) from exc
            raise translate_s3_error(exc, self.bucket, self._k(key)) from exc

    @contextlib.contextmanager
    def local_path(self, key: str) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="sitemaps-") as tmp:
            path = Path(tmp) / Path(key).name
            with self._errors(key):
                self.client.download_file(self.bucket, self._k(key), str(path))
            yield path

    def upload_file(self, path: Path, key: str, *, cache_control: str | None = None) -> None:
        with self._errors(key):
            self.client.upload_file(str(path), self.bucket, self._k(key),
                                    ExtraArgs=self._put_args(key, cache_control))

    def abort_incomplete_uploads(self, older_than: datetime, page_size: int = 1000) -> int:
        # Listed in full first (every page), aborted after: aborting while paging would
        # move the markers under the listing.
        with self._errors(""):
            pages = self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=self.prefix + "/" if self.prefix else "",
                PaginationConfig={"PageSize": page_size})
            old = [(up["Key"], up["UploadId"]) for page in pages
                   for up in page.get("Uploads", []) if up["Initiated"] < older_than]
            for key, upload_id in old:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        return len(old)

    def check_conditional_writes(self) -> None:
        # An If-None-Match: * PUT on an existing key must answer 412; a server that
        # ignores the header would let two racing commits both "win".
        # Removed again at once: the output keeps no trace of the probe.
        self.write_bytes(PROBE_KEY, b"{}")
        try:
            self.put_if(PROBE_KEY, b"{}", if_match=None)
        except PublishConflict:
            return
        finally:
            self.delete([PROBE_KEY])
        raise ConfigError(
            f"the S3 server of {self.root} ignored a conditional write (If-None-Match: * on an "
            "existing object was accepted), so a run racing another could overwrite its "
            "commit; use a server that supports conditional writes, or pass "
            "--no-conditional-write-check to publish anyway")


def open_storage(uri: str, client: Any | None = None) -> Storage:
    """The Storage for a local folder or an `s3://bucket/prefix` URI."""
    if is_s3(uri):
        return S3Storage(uri, client)
    if "://" in uri and not uri.startswith("file://"):
        raise StorageError(f"unsupported storage URI {uri!r}: use a local folder or s3://bucket/prefix")
    return LocalStorage(uri.removeprefix("file://"))
