"""Checks a run makes before any work: can it reach S3 at all, can it write its output.

Without them a read-only `--out` fails only at publish, after load, diff, plan and
render have run, and missing S3 credentials surface as botocore's traceback. Each
check raises a StorageError (exit 2) whose one line says what to fix.
"""

from __future__ import annotations

import logging

from pipeline import storage, tables
from pipeline.errors import ConfigError, StorageError
from pipeline.layout import WRITE_CHECK_KEY
from pipeline.storage.s3_errors import NO_CREDENTIALS, MissingCredentials

__all__ = ["NO_CREDENTIALS", "check_run", "check_s3_credentials", "check_writable"]

log = logging.getLogger(__name__)

def check_s3_credentials(uri: str) -> None:
    """Fails when the storage of `uri` needs credentials and none reach it."""
    storage.open_storage(uri).check_credentials()


def check_writable(uri: str, flag: str = "--out") -> None:
    """Writes and deletes one small object at the root of `uri` (a folder is created)."""
    store = storage.open_storage(uri)
    try:
        store.probe_write(WRITE_CHECK_KEY)
    except MissingCredentials as exc:
        raise StorageError(NO_CREDENTIALS.format(uri=uri)) from exc
    except StorageError as exc:
        raise StorageError(f"{flag} {uri} is not writable: {exc}") from exc
    except OSError as exc:
        reason = exc.strerror or str(exc)
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != store.root else ""
        raise StorageError(f"{flag} {uri} is not writable: {reason}{where}; give a folder you "
                           "can write to") from exc


def check_run(inventory: str, out: str, state: str, *, write: bool = True,
              report_to: str | None = None) -> None:
    """Every check of a run's begin: a `report_to` outside the served `out`, S3 credentials
    for any s3:// URI, then (for a run that publishes) that the output and its state can be
    written."""
    if report_to and (storage.is_strictly_below(out, report_to)
                      or storage.canonical_uri(out) == storage.canonical_uri(report_to)):
        raise ConfigError(f"--report-to {report_to} is in --out {out}, which is served: the "
                          "run reports (reject counts and examples of rejected rows) would be "
                          "public; give a private prefix, or leave it out (the state)")
    # a table's files are under its location (an Iceberg catalog's: the catalog says where)
    inventory_storage = (tables.storage_location(inventory) if tables.is_table(inventory)
                         else inventory)
    for uri in (inventory_storage, out, state):
        if uri is not None:
            check_s3_credentials(uri)
    if not write:
        return
    check_writable(out, "--out")
    if not state.startswith(out.rstrip("/") + "/"):
        check_writable(state, "--state")
    log.debug("preflight: %s is writable", out)
