"""Several runs in a row: diffs, truthful lastmod, stable shards, unchanged files untouched."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import Limits
from pipeline.run import RunOptions, run
from tests.output_check import read_output, state_file

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)
SCHEMA = pa.schema([("url", pa.string()), ("content_hash", pa.string()),
                    ("lastmod", pa.timestamp("s", tz="UTC"))])


class Site:
    """An inventory that tests edit between runs, and the output it is published to."""

    def __init__(self, root: str, tmp: Path, rows: dict[str, tuple[str, datetime | None]],
                 limits: Limits) -> None:
        self.root, self.tmp, self.rows, self.limits = root, tmp, dict(rows), limits
        self.runs = 0

    def publish(self, when: datetime, **kw: Any) -> dict[str, Any]:
        self.runs += 1
        inv = self.tmp / f"inv-{self.runs}.parquet"
        urls = sorted(self.rows)
        pq.write_table(pa.table({"url": urls,
                                 "content_hash": [self.rows[u][0] for u in urls],
                                 "lastmod": [self.rows[u][1] for u in urls]}, schema=SCHEMA), inv)
        return run(RunOptions(inventory=str(inv), site_url=SITE, out=self.root,
                              limits=self.limits, run_time=when, allow_shrink=True, **kw))

    def output(self) -> Any:
        return read_output(self.root, max_urls=self.limits.max_urls,
                           max_bytes=self.limits.max_bytes)


def keys(out: Any) -> set[str]:
    return set(out.files)


def mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in (root / "sitemaps").iterdir()}


@pytest.fixture
def site(tmp_path: Path) -> Site:
    rows = {f"{SITE}product/{i:04d}": (f"h{i}", None) for i in range(95)}
    rows.update({f"{SITE}blog/{i:03d}": (f"b{i}", None) for i in range(15)})
    return Site(str(tmp_path / "out"), tmp_path, rows, Limits(max_urls=20))


def test_runs_in_a_row(site: Site, tmp_path: Path) -> None:
    root = tmp_path / "out"
    first = site.publish(T0)
    c = first["counts"]
    assert (c["added"], c["changed"], c["removed"], c["unchanged"]) == (110, 0, 0, 0)
    out1 = site.output()
    assert set(out1.lastmods.values()) == {"2026-12-01T03:00:00Z"}  # first seen
    assert len(out1.files) == 5 + 1  # product 95/20 -> 5, blog 15 -> 1

    # 2. Same inventory: nothing written, same generation stays live; the work done anyway
    # (--rebuild; without, the run stops after begin: pipeline.unchanged) changes nothing.
    before = mtimes(root)
    manifest_before = (root / "manifest.json").read_bytes()
    second = site.publish(T0 + timedelta(days=1), rebuild=True)
    assert not second["unchanged"] and "diff" in second["stage_seconds"]
    assert second["published"] is False and second["counts"]["shards_written"] == 0
    assert mtimes(root) == before
    assert (root / "manifest.json").read_bytes() == manifest_before

    # 3. One fingerprint changes: only its shard is rewritten, only its lastmod moves.
    t2 = T0 + timedelta(days=2, hours=5, minutes=7, seconds=9)
    url = f"{SITE}product/0042"
    site.rows[url] = ("changed", None)
    third = site.publish(t2)
    assert (third["counts"]["changed"], third["counts"]["shards_written"]) == (1, 1)
    out3 = site.output()
    assert out3.lastmods[url] == "2026-12-03T08:07:09Z"
    assert {v for k, v in out3.lastmods.items() if k != url} == {"2026-12-01T03:00:00Z"}
    changed_keys = keys(out3) - keys(out1)
    assert len(changed_keys) == 1 and url in out3.files[changed_keys.pop()]
    index_lastmods = {s["key"]: s["lastmod"] for s in out3.manifest["sitemaps"]}
    assert sorted(set(index_lastmods.values())) == ["2026-12-01T03:00:00Z", "2026-12-03T08:07:09Z"]

    # 4. The inventory's own lastmod changes; one in the future is clamped and counted.
    t3 = T0 + timedelta(days=3)
    site.rows[f"{SITE}blog/001"] = ("b1", datetime(2026, 11, 20, 10, 0, tzinfo=UTC))
    site.rows[f"{SITE}blog/002"] = ("b2", datetime(2030, 1, 1, tzinfo=UTC))
    fourth = site.publish(t3)
    assert fourth["counts"]["changed"] == 2 and fourth["counts"]["lastmod_clamped"] == 1
    out4 = site.output()
    assert out4.lastmods[f"{SITE}blog/001"] == "2026-11-20T10:00:00Z"
    assert out4.lastmods[f"{SITE}blog/002"] == "2026-12-04T03:00:00Z"
    assert fourth["counts"]["shards_written"] == 1

    # 5. Add and remove; move a URL between sections (removed here, added there).
    t4 = T0 + timedelta(days=4)
    del site.rows[f"{SITE}product/0000"]
    del site.rows[f"{SITE}blog/014"]
    site.rows[f"{SITE}blog/999"] = ("x", None)
    site.rows[f"{SITE}news/001"] = ("n", None)
    fifth = site.publish(t4)
    c = fifth["counts"]
    assert (c["added"], c["removed"], c["changed"]) == (2, 2, 0)
    out5 = site.output()
    assert sorted(out5.locs) == sorted(site.rows)
    assert out5.lastmods[f"{SITE}news/001"] == "2026-12-05T03:00:00Z"
    # product lost its first URL: only product-00000 changes; blog: only its one shard.
    assert c["shards_written"] == 3  # product-00000, blog-00000, news-00000
    changes = pq.read_table(state_file(site.root, out5.manifest, "changes")).to_pylist()
    assert sorted((r["url"], r["change"]) for r in changes) == sorted([
        (f"{SITE}blog/999", "added"), (f"{SITE}news/001", "added"),
        (f"{SITE}product/0000", "removed"), (f"{SITE}blog/014", "removed")])


def test_growing_a_section_splits_only_its_full_shard(site: Site) -> None:
    site.publish(T0)
    out1 = site.output()
    # Ten new URLs that all sort into the first product shard (0000..0019).
    for i in range(10):
        site.rows[f"{SITE}product/0005-{i}"] = (f"n{i}", None)
    summary = site.publish(T0 + timedelta(days=1))
    out2 = site.output()
    assert summary["counts"]["shards_split"] == 1
    gone = keys(out1) - keys(out2)
    new = keys(out2) - keys(out1)
    assert len(gone) == 1 and "product-00000" in gone.pop()
    # Split to 75% of the limit: 30 URLs -> 15 + 15; the new shard takes the next free number.
    assert sorted(len(out2.files[k]) for k in new) == [15, 15]
    assert sorted(Path(k).name.rsplit("-", 1)[0] for k in new) == ["product-00000",
                                                                   "product-00005"]


def test_shrinking_a_section_to_nothing_and_merging(site: Site) -> None:
    site.publish(T0)
    for i in range(15):
        del site.rows[f"{SITE}blog/{i:03d}"]
    # Shard 0 keeps 0010..0019; shard 1 keeps only 0039: it is merged into shard 0.
    for i in [*range(10), *range(20, 39)]:
        del site.rows[f"{SITE}product/{i:04d}"]
    summary = site.publish(T0 + timedelta(days=1))
    out = site.output()
    assert not any("blog" in k for k in out.files)
    assert summary["counts"]["shards_merged"] == 1
    assert summary["counts"]["removed"] == 15 + 29
    merged = [k for k in out.files if "product-00000" in k]
    assert len(merged) == 1 and len(out.files[merged[0]]) == 11
    assert sorted(out.locs) == sorted(site.rows)


def test_state_defaults_beside_out_and_can_move(tmp_path: Path) -> None:
    rows = {f"{SITE}a/{i}": (str(i), None) for i in range(5)}
    s = Site(str(tmp_path / "out"), tmp_path, rows, Limits())
    s.publish(T0)
    assert list((tmp_path / "out.state" / "generations").glob("*/snapshot.parquet"))
    s2 = Site(str(tmp_path / "out2"), tmp_path, rows, Limits())
    s2.publish(T0, state=str(tmp_path / "elsewhere"))
    assert list((tmp_path / "elsewhere" / "generations").glob("*/snapshot.parquet"))
    assert not os.path.exists(tmp_path / "out2.state")
