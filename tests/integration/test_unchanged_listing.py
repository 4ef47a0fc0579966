"""An unchanged inventory is found from its listing: no inventory row is read.

begin compares each inventory file's URI, size and version (an S3 object's ETag; a local
file's inode, mtime and ctime) with the listing the live generation's record keeps beside
its rows' sums (pipeline.unchanged). The same listing is the same rows; any other listing
decides nothing, and begin reads the rows as before. What begin read is its `io`: on an
unchanged run from the listing, no row at all (the live snapshot, which such a run does not
read, is checked by its size: pipeline.integrity.verify_size)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.errors import LiveStateCorrupt
from pipeline.run import RunOptions, run

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
ROWS = 800


def _rows(changed: int | None = None) -> list[tuple[str, datetime]]:
    """ROWS rows in two sections; `changed`: that row's lastmod an hour later (the same
    number of bytes in the file: only the value differs)."""
    return [(f"{SITE}{'ab'[i % 2]}/page-{i:05d}",
             T0 - timedelta(days=i % 7) + (timedelta(hours=1) if i == changed else timedelta()))
            for i in range(ROWS)]


def _write(path: Path, rows: list[tuple[str, datetime]]) -> str:
    pq.write_table(pa.table({"url": [u for u, _ in rows],
                             "lastmod": pa.array([t for _, t in rows], pa.timestamp("s", "UTC"))}),
                   path, compression="none", use_dictionary=False, write_statistics=False)
    return str(path)


def _run(inv: str, out: str, day: int, **kw: Any) -> dict[str, Any]:
    return run(RunOptions(inventory=inv, site_url=SITE, out=out,
                          run_time=T0 + timedelta(days=day), **kw))


def _begin_rows(summary: dict[str, Any]) -> int:
    return int(summary["stage_io"]["begin"]["rows_read"])


def test_the_same_local_file_is_decided_from_its_listing(tmp_path: Path) -> None:
    inv, out = _write(tmp_path / "inv.parquet", _rows()), str(tmp_path / "out")
    first = _run(inv, out, 0)
    assert first["published"]
    record = json.loads((tmp_path / "out.state" / "input-identity.json").read_text())
    assert [f[0] for f in record["inventory"]["files"]] == [inv]
    assert record["inventory"]["row_sums"][0] == ROWS

    again = _run(inv, out, 1)
    assert again["unchanged"] and again["generation"] == first["generation"]
    assert _begin_rows(again) == 0  # neither the inventory's rows nor the snapshot's
    assert again["stage_io"]["begin"]["files_read"] == 0  # not even an inventory footer

    # touched (same bytes, a new mtime): the listing decides nothing, begin reads the rows,
    # finds them unchanged and records the new listing; the night after decides from it
    os.utime(inv, ns=(10**18, 10**18))
    touched = _run(inv, out, 2)
    assert touched["unchanged"] and _begin_rows(touched) == ROWS  # the inventory's
    after = _run(inv, out, 3)
    assert after["unchanged"] and _begin_rows(after) == 0


def test_a_rewrite_of_the_same_size_and_mtime_is_read(tmp_path: Path) -> None:
    inv, out = _write(tmp_path / "inv.parquet", _rows()), str(tmp_path / "out")
    first = _run(inv, out, 0)
    size, mtime = os.stat(inv).st_size, os.stat(inv).st_mtime_ns
    # another lastmod in place, the file's size and mtime set back: its ctime still moved
    _write(tmp_path / "inv.parquet", _rows(changed=5))
    os.utime(inv, ns=(mtime, mtime))
    assert os.stat(inv).st_size == size
    changed = _run(inv, out, 1)
    assert changed["published"] and changed["generation"] != first["generation"]
    assert changed["counts"]["changed"] == 1


def test_an_s3_inventory_is_decided_from_its_etags(s3_bucket: Any, tmp_path: Path) -> None:
    rows = _rows()
    for part, half in (("a", rows[:ROWS // 2]), ("b", rows[ROWS // 2:])):  # each its ETag
        s3_bucket.client.upload_file(_write(tmp_path / f"{part}.parquet", half),
                                     s3_bucket.name, f"inv/{part}.parquet")
    inv, out = s3_bucket.url("inv"), s3_bucket.url("out")
    first = _run(inv, out, 0)
    assert first["published"] and first["counts"]["input_rows"] == ROWS
    again = _run(inv, out, 1)
    assert again["unchanged"] and _begin_rows(again) == 0

    # one object replaced by other rows of the same size: another ETag, the rows are read
    changed_rows = _rows(changed=ROWS - 1)
    s3_bucket.client.upload_file(_write(tmp_path / "b.parquet", changed_rows[ROWS // 2:]),
                                 s3_bucket.name, "inv/b.parquet")
    changed = _run(inv, out, 2)
    assert changed["published"] and changed["generation"] != first["generation"]
    assert changed["counts"]["changed"] == 1


def test_an_unchanged_run_checks_the_snapshot_it_does_not_read_by_its_size(
        tmp_path: Path) -> None:
    inv, out = _write(tmp_path / "inv.parquet", _rows()), str(tmp_path / "out")
    _run(inv, out, 0)
    (snapshot,) = (tmp_path / "out.state" / "generations").rglob("snapshot.parquet")
    raw = snapshot.read_bytes()
    # damaged in place, the same size: an unchanged run reads no snapshot row and goes on;
    # the first run that reads it (a changed inventory) refuses it, whole-file checked
    snapshot.write_bytes(raw[:100] + bytes(b ^ 0xFF for b in raw[100:200]) + raw[200:])
    assert _run(inv, out, 1)["unchanged"]
    changed = _write(tmp_path / "changed.parquet", _rows(changed=5))
    with pytest.raises(LiveStateCorrupt, match="sha256"):
        _run(changed, out, 2)
    # truncated: even an unchanged run refuses it (exit 2), naming the repair
    snapshot.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(LiveStateCorrupt, match="bytes .* instead of") as exc:
        _run(inv, out, 3)
    assert exc.value.exit_code == 2 and "sitemaps repair" in str(exc.value)


def test_a_file_rewritten_during_the_load_and_put_back_later_is_read_again(
        s3_bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """begin lists A, the upstream job rewrites the object to B while load reads (load reads
    B), and later puts A back (the same bytes: the same ETag as begin listed). The next
    run must not take B's sums for A's listing: it reads A's rows and publishes them."""
    from pipeline import load as load_module

    a = _write(tmp_path / "a.parquet", _rows())
    b = _write(tmp_path / "b.parquet", _rows(changed=5))
    s3_bucket.client.upload_file(a, s3_bucket.name, "inv/part.parquet")
    inv, out = s3_bucket.url("inv"), s3_bucket.url("out")
    first = _run(inv, out, 0)

    real_load = load_module.load_group

    def rewritten_while_loading(*args: Any, **kwargs: Any) -> Any:
        s3_bucket.client.upload_file(b, s3_bucket.name, "inv/part.parquet")
        return real_load(*args, **kwargs)

    monkeypatch.setattr(load_module, "load_group", rewritten_while_loading)
    during = _run(inv, out, 1, force=True)  # begin lists A; load reads B
    assert during["published"] and during["counts"]["changed"] == 1
    monkeypatch.setattr(load_module, "load_group", real_load)
    s3_bucket.client.upload_file(a, s3_bucket.name, "inv/part.parquet")  # A back: A's ETag
    after = _run(inv, out, 2)
    assert not after.get("unchanged") and after["published"]
    assert after["counts"]["changed"] == 1  # row 5's lastmod back to A's
    assert after["generation"] not in (first["generation"], during["generation"])
