"""A snapshot written before fingerprints were 64-bit hashes (md5 hex strings) still diffs
truthfully: the same inventory again is unchanged, lastmods kept, nothing published."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import integrity, sql
from pipeline.run import RunOptions, run
from tests.output_check import state_file

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)


def _inventory(path: Path) -> Path:
    n = 300
    pq.write_table(pa.table({
        "url": [f"{SITE}{'shop' if i % 3 else 'blog'}/item-{i}" for i in range(n)],
        "lastmod": pa.array([None if i % 2 else T0 - timedelta(days=i) for i in range(n)],
                            pa.timestamp("s", tz="UTC")),
        "changefreq": [None if i % 4 else "daily" for i in range(n)],
        "priority": [None if i % 5 else 0.5 for i in range(n)],
    }), path)
    return path


def _make_legacy(out: Path, inventory: Path) -> None:
    """Rewrite the live snapshot as an earlier version wrote it: md5 hex fingerprints of the
    same payload (sql/diff_rows.sql, the legacy branch), and record it as the live state."""
    live = json.loads((out / "manifest.json").read_text())
    snapshot = Path(state_file(str(out), live, "snapshot"))
    con = sql.connect()
    con.sql(f"SELECT * FROM read_parquet('{snapshot}')").create_view("snap")
    con.sql(f"SELECT * FROM read_parquet('{inventory}')").create_view("inv")
    legacy = con.sql("""
        SELECT s.url, s.section, s.shard,
               md5(concat_ws('|', concat_ws('|', i.url, i.changefreq, i.priority::VARCHAR, ''),
                             strftime(i.lastmod::TIMESTAMPTZ, '%Y-%m-%dT%H:%M:%S'))) AS fingerprint,
               s.lastmod, s.first_seen, s.last_changed
        FROM snap s JOIN inv i USING (url)""").to_arrow_table()
    assert legacy.num_rows == 300 and legacy.schema.field("fingerprint").type == pa.string()
    pq.write_table(legacy, snapshot)
    live["state_check"] = {"snapshot": integrity.describe(str(snapshot))}
    body = json.dumps(live, indent=1, sort_keys=True)
    (out / "manifest.json").write_text(body)
    (out / "generations" / live["generation"] / "manifest.json").write_text(body)


def test_an_md5_snapshot_diffs_as_unchanged(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path / "inv.parquet")
    out = tmp_path / "out"
    first = run(RunOptions(inventory=str(inventory), site_url=SITE, out=str(out), run_time=T0))
    assert first["published"] and first["counts"]["published"] == 300
    _make_legacy(out, inventory)
    second = run(RunOptions(inventory=str(inventory), site_url=SITE, out=str(out),
                            run_time=T0 + timedelta(days=1)))
    counts = second["counts"]
    assert (counts["unchanged"], counts["changed"], counts["added"]) == (300, 0, 0)
    assert not second["published"]  # every lastmod kept: the same files, no new generation
    assert second["generation"] == first["generation"]
