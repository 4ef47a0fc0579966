"""An S3 prefix as storage, and the one place S3 is configured.

Reads and streamed writes go through smart_open with a boto3 client; the operations
smart_open does not have (list, delete, conditional put, head) use the same client;
Parquet is read through pyarrow's S3 filesystem (range requests) made from the same
settings. Every S3 answer is translated by `s3_errors`.
"""

from __future__ import annotations

import builtins
import contextlib
import fnmatch
import functools
import os
import secrets
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

from pipeline.errors import ConfigError, PublishConflict
from pipeline.layout import PROBE_KEY
from pipeline.settings import environment
from pipeline.storage.base import (
    ListedFile,
    ObjectInfo,
    Storage,
    StoredHeaders,
    content_type_for,
    glob_base,
    hidden_below,
)
from pipeline.storage.s3_errors import (
    NO_CREDENTIALS,
    MissingCredentials,
    conflict,
    error_code,
    lost_race,
    translate_s3_error,
)

#: smart_open's multipart part size on S3.
S3_PART_SIZE = 16 * 1024 * 1024


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
    return _client(s3_settings(), environment().s3_attempts,
                   environment().s3_connect_timeout,
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
        # write never leaves a half-written object under the key. Imported here, as boto3
        # is: a run without S3 does not pay for importing them (0.15 s a process).
        import smart_open

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
        import smart_open

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
        """The object's HEAD answer, as boto3 gives it."""
        with self._errors(key):
            return dict(self.client.head_object(Bucket=self.bucket, Key=self._k(key)))

    def headers(self, key: str) -> StoredHeaders:
        head = self.head(key)
        return StoredHeaders(content_type=head.get("ContentType"),
                             content_encoding=head.get("ContentEncoding"),
                             cache_control=head.get("CacheControl"))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        full = self._k(prefix) if prefix else (self.prefix + "/" if self.prefix else "")
        strip = len(self.prefix) + 1 if self.prefix else 0
        with self._errors(prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full)
            for page in pages:
                for obj in page.get("Contents", []):
                    yield ObjectInfo(key=obj["Key"][strip:], size=obj["Size"],
                                     modified=obj["LastModified"], etag=obj.get("ETag"))

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
            if lost_race(error_code(exc), if_match=if_match):
                raise conflict(self.uri(key)) from exc
            raise translate_s3_error(exc, self.bucket, self._k(key)) from exc

    @contextlib.contextmanager
    def local_path(self, key: str) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="sitemaps-") as tmp:
            path = Path(tmp) / Path(key).name
            with self._errors(key):
                self.client.download_file(self.bucket, self._k(key), str(path))
            yield path

    def rewrite(self, key: str, data: bytes, *, etag: str | None, cache_control: str) -> None:
        if etag is not None:
            cache_control = self.headers(key).cache_control or cache_control
        # Conditional: a file edited meanwhile is not overwritten (PublishConflict).
        self.put_if(key, data, if_match=etag, cache_control=cache_control)

    def arrow_input(self, key: str) -> Any:
        with self._errors(key):
            return s3_filesystem().open_input_file(f"{self.bucket}/{self._k(key)}")

    @classmethod
    def arrow_filesystem(cls) -> Any:
        return s3_filesystem()

    @classmethod
    def arrow_path(cls, uri: str) -> str:
        return uri.removeprefix("s3://")

    @classmethod
    def find_listed(cls, uri: str, suffix: str) -> builtins.list[ListedFile]:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        wildcard = next((i for i, c in enumerate(key) if c in "*?["), None)
        base = key[:wildcard].rsplit("/", 1)[0] if wildcard is not None else key
        candidates = {o.key: o for o in cls(f"s3://{bucket}").list(base)}
        if wildcard is not None:
            files = [k for k in candidates if fnmatch.fnmatchcase(k, key)
                     and not hidden_below(glob_base(key), k)]
        elif key in candidates:
            files = [key]
        else:
            prefix = key.rstrip("/") + "/"
            files = [k for k in candidates if k.startswith(prefix) and k.endswith(suffix)
                     and not hidden_below(prefix, k)]
        # The ETag changes with the content; a store without one (none known) gives the
        # object's last change, which a rewrite moves on.
        return [ListedFile(uri=f"s3://{bucket}/{k}", size=candidates[k].size,
                           version=candidates[k].etag or candidates[k].modified.isoformat())
                for k in sorted(files)]

    def probe_write(self, name: str) -> None:
        self.write_bytes(name, b"")
        self.delete([name])

    def check_credentials(self) -> None:
        if s3_settings().access_key_id:
            return
        import boto3

        if boto3.session.Session().get_credentials() is None:
            raise MissingCredentials(NO_CREDENTIALS.format(uri=self.root))

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
        # Removed again at once: the output keeps no trace of the probe. A key of this
        # probe's own: a racing run that removes its probe cannot remove this one.
        key = f"{PROBE_KEY.removesuffix('.json')}-{secrets.token_hex(8)}.json"
        self.write_bytes(key, b"{}")
        try:
            self.put_if(key, b"{}", if_match=None)
        except PublishConflict:
            return
        finally:
            self.delete([key])
        raise ConfigError(
            f"the S3 server of {self.root} ignored a conditional write (If-None-Match: * on an "
            "existing object was accepted), so a run racing another could overwrite its "
            "commit; use a server that supports conditional writes, or pass "
            "--no-conditional-write-check to publish anyway")
