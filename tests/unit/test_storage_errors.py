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


def _client_error(code: str, status: int) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": "m"},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")


@pytest.mark.parametrize("code, status, error, text", [
    ("NoSuchKey", 404, FileNotFoundError, "s3://b/k"),
    ("", 404, FileNotFoundError, "s3://b/k"),  # a HEAD's bare 404
    ("NoSuchBucket", 404, StorageError, "bucket 'b' does not exist"),
    ("AccessDenied", 403, StorageError, "access to s3://b/k refused"),
    ("InvalidAccessKeyId", 403, StorageError, "check the credentials"),
    ("SignatureDoesNotMatch", 403, StorageError, "check the credentials"),
    ("SlowDown", 503, TransientError, "SlowDown on s3://b/k; retry later"),
    ("", 502, TransientError, "502"),
    ("RequestTimeTooSkewed", 403, TransientError, "retry later"),
    ("InvalidObjectState", 403, StorageError, "S3 error InvalidObjectState on s3://b/k"),
])
def test_translation_of_s3_answers(code: str, status: int, error: type, text: str) -> None:
    translated = storage.translate_s3_error(_client_error(code, status), "b", "k")
    assert type(translated) is error
    assert text in str(translated)


def test_an_unreachable_endpoint_is_transient() -> None:
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

    for exc in (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"),
                ConnectTimeoutError(endpoint_url="http://127.0.0.1:9")):
        translated = storage.translate_s3_error(exc, "b", "k")
        assert isinstance(translated, TransientError)
        assert "cannot reach the S3 endpoint for s3://b/k" in str(translated)


def test_missing_credentials_say_what_to_set() -> None:
    from botocore.exceptions import NoCredentialsError

    translated = storage.translate_s3_error(NoCredentialsError(), "b", "k")
    assert isinstance(translated, storage.MissingCredentials)
    assert isinstance(translated, StorageError)
    assert "set AWS_ACCESS_KEY_ID" in str(translated)


def test_an_error_that_is_not_an_s3_answer_is_left_as_it_is() -> None:
    exc = ValueError("not S3")
    assert storage.translate_s3_error(exc, "b", "k") is exc


@pytest.mark.parametrize("code, if_match, lost", [
    ("PreconditionFailed", None, True),
    ("412", '"e"', True),
    ("ConditionalRequestConflict", '"e"', True),
    ("409", None, True),
    ("NoSuchKey", '"e"', True),    # If-Match on a key that is gone (AWS)
    ("NoSuchKey", None, False),    # If-None-Match: * never answers 404
    ("AccessDenied", '"e"', False),
    ("SlowDown", None, False),
])
def test_which_failed_conditional_writes_are_lost_races(code: str, if_match: str | None,
                                                        lost: bool) -> None:
    from pipeline.storage.s3_errors import lost_race

    assert lost_race(code, if_match=if_match) is lost


def test_a_read_of_a_missing_object_through_the_interface(stubbed: Any) -> None:
    out, stub = stubbed
    stub.add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404,
                          expected_params={"Bucket": "bucket", "Key": "out/gone.json"})
    stub.add_client_error("head_object", service_error_code="404", http_status_code=404,
                          expected_params={"Bucket": "bucket", "Key": "out/gone.json"})
    assert out.read_json_or_none("gone.json") is None
    assert out.exists("gone.json") is False


def test_stored_headers_come_from_head(stubbed: Any) -> None:
    out, stub = stubbed
    stub.add_response("head_object", {"ContentType": "application/gzip",
                                      "CacheControl": storage.CACHE_IMMUTABLE},
                      expected_params={"Bucket": "bucket", "Key": "out/s.xml.gz"})
    assert out.headers("s.xml.gz") == storage.StoredHeaders(
        content_type="application/gzip", content_encoding=None,
        cache_control=storage.CACHE_IMMUTABLE)


def test_rewrite_keeps_the_cache_control_of_the_object_it_replaces(stubbed: Any) -> None:
    out, stub = stubbed
    stub.add_response("head_object", {"CacheControl": "max-age=60"},
                      expected_params={"Bucket": "bucket", "Key": "out/robots.txt"})
    stub.add_response("put_object", {}, expected_params={
        "Bucket": "bucket", "Key": "out/robots.txt", "Body": b"new", "IfMatch": '"v1"',
        "ContentType": "text/plain; charset=utf-8", "CacheControl": "max-age=60"})
    out.rewrite("robots.txt", b"new", etag='"v1"', cache_control=storage.CACHE_SHORT)
