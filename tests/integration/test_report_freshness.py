"""The report's freshness comes from the snapshot's footer, summed while the state step
wrote the rows (pipeline.snapshot.Freshness): the same table as a scan of every row
(sql/report_freshness.sql), for every way a row reaches the snapshot (a planned part, a shard
kept as it was, a section left out as unchanged), and a report then reads no row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import manifest as manifest_model
from pipeline import sql, storage
from pipeline.config import Limits
from pipeline.notify.report import freshness
from pipeline.parquet import register_parquet
from pipeline.run import RunOptions, run
from pipeline.snapshot import FRESHNESS_KEY, freshness_of
from pipeline.w3c import parse_w3c
from tests.output_check import state_file, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def lastmods(n: int, at: datetime) -> list[datetime | None]:
    """Around the 24-hour and 7-day edges before `at`, on them exactly, and none."""
    edges = [at - timedelta(days=1), at - timedelta(days=1) + timedelta(seconds=1),
             at - timedelta(days=7), at - timedelta(days=7) + timedelta(seconds=1),
             at - timedelta(hours=3), at - timedelta(days=30), None]
    return [edges[i % len(edges)] for i in range(n)]


def inventory(tmp_path: Path, name: str, products: int, at: datetime) -> Path:
    urls = ([f"{SITE}product/{i:03d}" for i in range(products)]
            + [f"{SITE}blog/{i}" for i in range(9)] + [f"{SITE}news/{i}" for i in range(3)])
    stamps = lastmods(products, at) + lastmods(9, T0) + [None] * 3
    return write_inventory(tmp_path / name, {"url": urls, "lastmod": stamps}, pa.schema([
        ("url", pa.string()), ("lastmod", pa.timestamp("us", tz="UTC"))]))


def scanned(snapshot: str, at: str) -> list[tuple[str, int, str, int, int]]:
    con = sql.connect()
    register_parquet(con, "report_snapshot", [snapshot])
    rows = con.execute(sql.load_sql("report_freshness"), {"at": parse_w3c(at)}).fetchall()
    return [(str(s), int(n), str(t or ""), int(d1), int(d7)) for s, n, t, d1, d7 in rows]


def test_the_footers_freshness_is_the_scans_for_every_source_of_rows(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    limits = Limits(max_urls=10)
    # The second inventory changes the lastmods of the products past the first shard only:
    # that shard is kept as it was, the blog and the news sections are unchanged.
    first = inventory(tmp_path / "a", "inv.parquet", 40, T0)
    second = pq.read_table(first).to_pydict()
    second["lastmod"][15:40] = lastmods(25, T0 + timedelta(days=1))
    summaries = []
    for n, inv in enumerate([first, write_inventory(tmp_path / "b" / "inv.parquet", second,
                                                    pq.read_schema(first))]):
        summaries.append(run(RunOptions(inventory=str(inv), site_url=SITE, out=out,
                                        limits=limits, run_time=T0 + timedelta(days=n))))
    assert summaries[1]["counts"]["changed"] == 25
    assert summaries[1]["counts"]["shards_reused"] >= 1
    for summary in summaries:
        manifest = manifest_model.read_stored(storage.open_storage(out), summary["generation"])
        assert manifest is not None
        snapshot, created = state_file(out, manifest, "snapshot"), manifest["created"]
        table = scanned(snapshot, created)
        assert {r[0] for r in table} == {"product", "blog", "news"}
        assert any(r[3] for r in table) and any(r[4] > r[3] for r in table)
        assert freshness_of(snapshot, created) is not None
        assert freshness(snapshot, created) == table
        # Recorded for its generation's time: asked for another, the footer decides nothing.
        assert freshness_of(snapshot, "2020-01-01T00:00:00Z") is None
        assert FRESHNESS_KEY.encode() in pq.read_metadata(snapshot).metadata
    assert summaries[-1]["stage_io"]["notify"]["rows_read"] == 0
