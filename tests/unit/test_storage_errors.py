"""How S3 answers become the pipeline's errors, on a botocore Stubber (no server): the
answers of real AWS that SeaweedFS does not give (If-Match on a missing key is 404 on AWS,
412 on SeaweedFS), and the split terminal / transient / lost race."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from pipeline import storage
from pipeline.errors import PublishConflict, StorageError, TransientError


@pytest.fixture
def stubbed() -> Iterator[tuple[storage.S3Storage, Stubber]]:
    client = boto3.session.Session().client(
        "s3", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s",
        endpoint_url="http://127.0.0.1:9")
    with Stubber(client) as stub:
        yield storage.S3Storage("s3://bucket/out", client), stub
        stub.assert_no_pending_responses()


def _put(stub: Stubber, code: str, status: int, **cond: Any) -> None:
    stub.add_client_error("put_object", service_error_code=code, http_status_code=status,
                          expected_params={"Bucket": "bucket", "Key": "out/manifest.json",
                                           "Body": b"{}", **cond,
                                           "ContentType": "application/json",
                                           "CacheControl": storage.CACHE_SHORT})


@pytest.mark.parametrize("code, status", [
    ("NoSuchKey", 404),           # AWS: If-Match on a key that is gone
    ("PreconditionFailed", 412),  # AWS and SeaweedFS: the ETag differs
    ("ConditionalRequestConflict", 409),  # AWS: a concurrent conditional write
])
def test_if_match_that_fails_is_a_lost_race(stubbed: Any, code: str, status: int) -> None:
    out, stub = stubbed
    _put(stub, code, status, IfMatch='"etag-read-at-start"')
    with pytest.raises(PublishConflict, match="another generation was published"):
        out.put_if("manifest.json", b"{}", if_match='"etag-read-at-start"',
                   cache_control=storage.CACHE_SHORT)


def test_if_none_match_that_fails_is_a_lost_race(stubbed: Any) -> None:
    out, stub = stubbed
    _put(stub, "PreconditionFailed", 412, IfNoneMatch="*")
    with pytest.raises(PublishConflict):
        out.put_if("manifest.json", b"{}", if_match=None, cache_control=storage.CACHE_SHORT)


@pytest.mark.parametrize("code, status, error, text", [
    ("AccessDenied", 403, StorageError, "access to s3://bucket/out/manifest.json refused"),
    ("NoSuchBucket", 404, StorageError, "bucket 'bucket' does not exist"),
    ("SlowDown", 503, TransientError, "retry later"),
    ("InternalError", 500, TransientError, "retry later"),
])
def test_other_errors_of_a_conditional_write(stubbed: Any, code: str, status: int,
                                             error: type, text: str) -> None:
    out, stub = stubbed
    _put(stub, code, status, IfMatch='"e"')
    with pytest.raises(error, match=text) as exc:
        out.put_if("manifest.json", b"{}", if_match='"e"', cache_control=storage.CACHE_SHORT)
    assert not isinstance(exc.value, PublishConflict)


def test_a_missing_key_read_is_not_found(stubbed: Any) -> None:
    out, stub = stubbed
    stub.add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404,
                          expected_params={"Bucket": "bucket", "Key": "out/manifest.json"})
    assert out.read_with_etag("manifest.json") == (None, None)
