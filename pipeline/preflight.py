"""Checks a run makes before any work: can it reach S3 at all, can it write its output.

Without them a read-only `--out` fails only at publish, after load, diff, plan and
render have run, and missing S3 credentials surface as botocore's traceback. Each
check raises a StorageError (exit 2) whose one line says what to fix.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path

from pipeline import storage
from pipeline.errors import StorageError

log = logging.getLogger(__name__)

#: The object written and deleted at the root of `--out` to prove it is writable
#: (a dot name: local listings skip it, and it lives for one request).
WRITE_CHECK_KEY = ".sitemaps-write-check"

NO_CREDENTIALS = ("no S3 credentials found for {uri}: set AWS_ACCESS_KEY_ID and "
                  "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or give the DAG's site an aws_conn_id")


def check_s3_credentials(uri: str) -> None:
    """Fails when no credentials reach boto3 for the configured S3 settings."""
    settings = storage.s3_settings()
    if settings.access_key_id:
        return
    import boto3

    if boto3.session.Session().get_credentials() is None:
        raise StorageError(NO_CREDENTIALS.format(uri=uri))


def check_writable(uri: str, flag: str = "--out") -> None:
    """Writes and deletes one small object at the root of `uri` (a folder is created)."""
    if storage.is_s3(uri):
        from botocore.exceptions import NoCredentialsError

        s3 = storage.open_storage(uri)
        try:
            s3.write_bytes(WRITE_CHECK_KEY, b"")
            s3.delete([WRITE_CHECK_KEY])
        except NoCredentialsError as exc:
            raise StorageError(NO_CREDENTIALS.format(uri=uri)) from exc
        except StorageError as exc:
            raise StorageError(f"{flag} {uri} is not writable: {exc}") from exc
        return
    path = Path(storage.open_storage(uri).root)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=WRITE_CHECK_KEY + "-", dir=path)
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
        raise StorageError(f"{flag} {uri} is not writable: {reason}{where}; give a folder you "
                           "can write to") from exc


def check_run(inventory: str, out: str, state: str, *, write: bool = True) -> None:
    """Every check of a run's begin: S3 credentials for any s3:// URI, then (for a run that
    publishes) that the output and its state can be written."""
    for uri in (inventory, out, state):
        if storage.is_s3(uri):
            check_s3_credentials(uri)
            break
    if not write:
        return
    check_writable(out, "--out")
    if not state.startswith(out.rstrip("/") + "/"):
        check_writable(state, "--state")
    log.debug("preflight: %s is writable", out)
