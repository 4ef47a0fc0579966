"""A nightly's begin trusts the live snapshot from one listing when it is the very file
publish recorded: its version (an S3 object's ETag; a local file's inode, mtime and ctime) and
size are those in the manifest's `state_check` (pipeline.integrity.verify_unless_same). Any
rewrite changes the version, so a snapshot damaged in place is read whole and refused, and
one copied back from a backup is read whole and used."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import LiveStateCorrupt
from pipeline.run import RunOptions, run
from tests.output_check import state_file, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
ROWS = 600


def _inventory(path: Path, day: int) -> str:
    """ROWS URLs and one more each day (a nightly's change; a row count the live generation
    does not have, so that begin reads no inventory row to tell it changed)."""
    urls = [f"{SITE}{'ab'[i % 2]}/page-{i:05d}" for i in range(ROWS + day)]
    lastmod = [T0 - timedelta(days=1)] * len(urls)
    return str(write_inventory(path / f"inv-{day}.parquet", {"url": urls, "lastmod": lastmod}))


def _run(tmp_path: Path, out: str, day: int, **kw: Any) -> dict[str, Any]:
    return run(RunOptions(inventory=_inventory(tmp_path, day), site_url=SITE, out=out,
                          run_time=T0 + timedelta(days=day), **kw))


def _begin_rows(summary: dict[str, Any]) -> int:
    return int(summary["stage_io"]["begin"]["rows_read"])


def _damaged(raw: bytes) -> bytes:
    """The same number of bytes, some of them flipped (past the magic number)."""
    return raw[:100] + bytes(b ^ 0xFF for b in raw[100:200]) + raw[200:]


def test_a_local_snapshot_is_trusted_from_its_listing_until_it_is_rewritten(
        tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    _run(tmp_path, out, 0)
    second = _run(tmp_path, out, 1)
    assert second["counts"]["added"] == 1 and _begin_rows(second) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["state_check"]["snapshot"]["version"]
    snapshot = Path(state_file(out, manifest, "snapshot"))
    raw, before = snapshot.read_bytes(), snapshot.stat()
    # damaged in place, the same size and mtime: its ctime moved, so begin reads it whole
    snapshot.write_bytes(_damaged(raw))
    os.utime(snapshot, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(LiveStateCorrupt, match="sha256") as exc:
        _run(tmp_path, out, 2)
    assert exc.value.exit_code == 2
    # copied back from a backup (another inode): read whole, found right, and used
    backup = tmp_path / "backup.parquet"
    backup.write_bytes(raw)
    os.replace(backup, snapshot)
    third = _run(tmp_path, out, 3)
    assert third["published"] and _begin_rows(third) == ROWS + 1


def test_an_s3_snapshot_rewritten_to_the_same_size_is_refused(s3_bucket: Any,
                                                              tmp_path: Path) -> None:
    out = s3_bucket.url("out")
    _run(tmp_path, out, 0)
    assert _begin_rows(_run(tmp_path, out, 1)) == 0  # the ETag publish recorded
    manifest = json.loads(s3_bucket.client.get_object(
        Bucket=s3_bucket.name, Key="out/manifest.json")["Body"].read())
    key = state_file(out, manifest, "snapshot").removeprefix(f"s3://{s3_bucket.name}/")
    raw = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=key, Body=_damaged(raw))
    with pytest.raises(LiveStateCorrupt, match="sha256"):
        _run(tmp_path, out, 2)
