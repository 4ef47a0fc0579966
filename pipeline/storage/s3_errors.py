"""How S3 answers become the pipeline's errors: terminal (fix the bucket, the credentials, the
URI), transient (throttling, 5xx, an unreachable endpoint: worth a retry), a missing key
(FileNotFoundError, as a local file would), or a lost race of a conditional write."""

from __future__ import annotations

from pipeline.errors import PublishConflict, StorageError, TransientError

#: Error codes (or bare HTTP statuses) a retry may get past.
TRANSIENT_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
    "ServiceUnavailable", "503", "500", "502", "504", "RequestTimeTooSkewed",
})
#: A missing object (or, for a HEAD, a bare 404).
NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
#: The credentials or the bucket policy refuse.
DENIED_CODES = frozenset({"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"})
#: A conditional write whose condition failed: another writer got there first.
PRECONDITION_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})

NO_CREDENTIALS = ("no S3 credentials found for {uri}: set AWS_ACCESS_KEY_ID and "
                  "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or give the DAG's site an aws_conn_id")


class MissingCredentials(StorageError):
    """No S3 credentials reached boto3."""


def error_code(exc: Exception) -> str:
    """The S3 error code of a botocore ClientError, else its HTTP status, else ""."""
    resp = getattr(exc, "response", None) or {}
    code = str(resp.get("Error", {}).get("Code", ""))
    status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code or str(status or "")


def lost_race(code: str, *, if_match: str | None) -> bool:
    """Whether a conditional PUT that failed with `code` lost to another writer.

    AWS answers If-Match on a key that is gone with 404 (SeaweedFS with 412): the object
    this run read was replaced or removed, a lost race either way.
    """
    return code in PRECONDITION_CODES or (bool(if_match) and code in NOT_FOUND_CODES)


def conflict(uri: str) -> PublishConflict:
    return PublishConflict(
        f"another generation was published since this run started "
        f"({uri} changed); the other run's generation stays live"
    )


def translate_s3_error(exc: Exception, bucket: str, key: str) -> Exception:
    """A PipelineError that names the bucket and key, split terminal/transient.

    A missing key becomes FileNotFoundError; an exception that is not an S3 answer is
    returned as it is (the caller re-raises it).
    """
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    where = f"s3://{bucket}/{key}"
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError)):
        return TransientError(f"cannot reach the S3 endpoint for {where}: {exc}")
    if isinstance(exc, NoCredentialsError):
        return MissingCredentials(NO_CREDENTIALS.format(uri=where))
    if isinstance(exc, ClientError):
        code = error_code(exc)
        if code in NOT_FOUND_CODES:
            return FileNotFoundError(where)
        if code == "NoSuchBucket":
            return StorageError(f"bucket {bucket!r} does not exist ({where}); create it or fix --out")
        if code in DENIED_CODES:
            return StorageError(
                f"access to {where} refused ({code}); check the credentials and the bucket policy"
            )
        if code in TRANSIENT_CODES:
            return TransientError(f"S3 error {code} on {where}; retry later")
        return StorageError(f"S3 error {code} on {where}: {exc}")
    return exc
