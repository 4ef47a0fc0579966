"""Plan slice by slice: the same URLs and lines as one pass, every limit, stable shards."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline import steps, storage
from pipeline.config import Limits
from pipeline.demo import make_inventory
from pipeline.plan import _cuts_by_sample, _cuts_by_shards, load_shards
from pipeline.run import RunOptions, run
from tests.output_check import read_output

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)
LIMITS = Limits(max_urls=50)
#: Tiny slices: the demo's larger sections are cut into many.
SLICE = 120


def _opts(inv: Path, out: Path, when: datetime = T0, **kw: Any) -> RunOptions:
    return RunOptions(inventory=str(inv), site_url=SITE, out=str(out), limits=LIMITS,
                      run_time=when, allow_shrink=True, **kw)


def _lines(out: Path) -> list[str]:
    """Every <url> line of every published sitemap."""
    lines = []
    for path in (out / "sitemaps").iterdir():
        lines += [ln for ln in gzip.decompress(path.read_bytes()).decode().splitlines()
                  if ln.startswith("<url>")]
    return lines


def _check_numbers(out: Path) -> None:
    output = read_output(str(out), max_urls=LIMITS.max_urls, max_bytes=LIMITS.max_bytes)
    numbers = Counter((s["section"], s["shard"]) for s in output.manifest["sitemaps"])
    assert numbers and max(numbers.values()) == 1, "a shard number is used twice in a section"


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_inventory(tmp_path_factory.mktemp("inv") / "inv.parquet", urls=3000)


def test_sliced_plan_publishes_what_one_pass_does(inventory: Path, tmp_path: Path) -> None:
    one = run(_opts(inventory, tmp_path / "one"))
    sliced = run(_opts(inventory, tmp_path / "sliced", plan_slice_rows=SLICE))
    assert one["published"] and sliced["published"]
    for out in (tmp_path / "one", tmp_path / "sliced"):
        _check_numbers(out)
    assert sorted(_lines(tmp_path / "one")) == sorted(_lines(tmp_path / "sliced"))
    assert one["counts"]["published"] == sliced["counts"]["published"] > 2000
    # Packed per slice: a few more, less full files than one pass makes, never fewer.
    assert sliced["counts"]["sitemaps"] >= one["counts"]["sitemaps"]


def test_sliced_plan_is_stable_across_runs(inventory: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(_opts(inventory, out, plan_slice_rows=SLICE))
    first = read_output(str(out), max_urls=LIMITS.max_urls)
    again = run(_opts(inventory, out, T0 + timedelta(days=1), plan_slice_rows=SLICE))
    assert again["counts"]["shards_written"] == 0
    assert again["counts"]["bytes_written"] == 0
    assert set(read_output(str(out), max_urls=LIMITS.max_urls).files) == set(first.files)

    # A few changed rows rewrite only the shards that hold them.
    table = pq.read_table(inventory)
    changed = [100, 1500, 2900]
    mask = pa.array([i in changed for i in range(table.num_rows)])
    lastmod = pc.if_else(mask, pa.scalar(T0, pa.timestamp("us", tz="UTC")),
                         table["lastmod"].cast(pa.timestamp("us", tz="UTC")))
    table = table.set_column(table.schema.get_field_index("lastmod"), "lastmod", lastmod)
    inv2 = tmp_path / "inv2.parquet"
    pq.write_table(table, inv2)
    third = run(_opts(inv2, out, T0 + timedelta(days=2), plan_slice_rows=SLICE))
    assert third["counts"]["changed"] >= 1
    assert 1 <= third["counts"]["shards_written"] <= len(changed)
    _check_numbers(out)


def test_slices_never_cut_a_kept_shard(inventory: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(_opts(inventory, out, plan_slice_rows=SLICE))
    before = {(s["section"], s["shard"]) for s in
              read_output(str(out), max_urls=LIMITS.max_urls).manifest["sitemaps"]}
    ctx = steps.begin(_opts(inventory, out, T0 + timedelta(days=1), plan_slice_rows=SLICE))
    try:
        steps.load_step(ctx)
        steps.diff_step(ctx)
        info = steps.plan_step(ctx)
        planned = json.loads(storage.open_storage(ctx["work"]).read_bytes("plan.json"))
        uris = planned["planned_uris"]
        shards = load_shards(planned["shards_uri"])
    finally:
        steps.finish(ctx)
    assert info["to_render"] == 0 and info["split"] == 0
    parts_of: dict[tuple[str, int], int] = {}
    for s in shards:
        assert (s.section, s.shard) not in parts_of, f"shard {s.uid} is in two slices"
        parts_of[(s.section, s.shard)] = s.part
    assert set(parts_of) == before  # every shard kept, each whole in one part
    assert len(uris) > 20  # the larger sections are in several slices
    parts_of_section: dict[str, set[int]] = {}
    for (section, _), part in parts_of.items():
        parts_of_section.setdefault(section, set()).add(part)
    assert max(len(p) for p in parts_of_section.values()) > 1
    assert [s.part for s in shards] == sorted(s.part for s in shards)  # file order


def test_cut_points() -> None:
    # Shards (lower, upper, urls): cuts only at a lower bound no earlier shard spans.
    bounds = [("a", "b", 40), ("c", "d", 40), ("e", "f", 40), ("g", "h", 40)]
    assert _cuts_by_shards(bounds, 80) == ["e"]
    assert _cuts_by_shards(bounds, 40) == ["c", "e", "g"]
    assert _cuts_by_shards(bounds, 1000) == []
    # A shard whose rows span others' (after a merge): nothing cuts inside its range.
    spanning = [("a", "m", 40), ("c", "d", 40), ("n", "p", 40)]
    assert _cuts_by_shards(spanning, 40) == ["n"]
    assert _cuts_by_sample([f"u{i:03d}" for i in range(100)], 1000, 250) == [
        "u025", "u050", "u075"]
    assert _cuts_by_sample([], 1000, 250) == []
