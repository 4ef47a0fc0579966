"""Plan slice by slice: the same URLs and lines as one pass, every limit, stable shards.

The slices are independent: planned in any order (as the DAG's mapped plan tasks may run)
and combined, they give exactly what planning them one after the other gives.
"""

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

from pipeline import sql, steps, storage
from pipeline.config import Limits
from pipeline.demo import make_inventory
from pipeline.diffed import DiffedView, register_diffed
from pipeline.errors import TooManyRejects
from pipeline.plan import PROVISIONAL_SHIFT, SLICES_KEY, Shard, load_shards
from pipeline.plan.slices import REUSED_SLICE_FACTOR, _cuts_by_sample, _cuts_by_shards
from pipeline.run import RunOptions, run
from pipeline.sitemap_xml import max_urlset_overhead
from tests.output_check import read_output, state_file

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
    # --rebuild: the same rows planned again (not skipped as unchanged): the plan's own
    # output plans to the same plan, a fixed point
    again = run(_opts(inventory, out, T0 + timedelta(days=1), plan_slice_rows=SLICE,
                      rebuild=True))
    assert not again["unchanged"] and again["stage_seconds"]["plan"] > 0
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
    # The same inventory again: a fixed point, every shard reused without reading its rows.
    info, kept_uris, shards = _plan_only(_opts(inventory, out, T0 + timedelta(days=1),
                                               plan_slice_rows=SLICE, rebuild=True))
    assert info.to_render == 0 and info.split == 0 and info.merged == 0
    assert {(s.section, s.shard) for s in shards} == before
    assert all(s.reused for s in shards)
    # No row to write: whole sections share slices of up to REUSED_SLICE_FACTOR * SLICE rows.
    assert len(kept_uris) <= -(-3000 // (REUSED_SLICE_FACTOR * SLICE)) + 1
    # --force plans every row again: each kept shard whole in one part.
    info, uris, shards = _plan_only(_opts(inventory, out, T0 + timedelta(days=1),
                                          plan_slice_rows=SLICE, force=True))
    assert info.split == 0 and info.merged == 0
    parts_of: dict[tuple[str, int], int | None] = {}
    for s in shards:
        assert (s.section, s.shard) not in parts_of, f"shard {s.uid} is in two slices"
        assert s.part is not None and s.row_start is not None
        parts_of[(s.section, s.shard)] = s.part
    assert set(parts_of) == before  # every shard kept, each whole in one part
    assert len(uris) > 20  # the larger sections are in several slices
    assert len(uris) > 4 * len(kept_uris)  # every row is written: sized by all rows
    parts_of_section: dict[str, set[int | None]] = {}
    for (section, _), part in parts_of.items():
        parts_of_section.setdefault(section, set()).add(part)
    assert max(len(p) for p in parts_of_section.values()) > 1
    assert [s.part for s in shards] == sorted(s.part or 0 for s in shards)  # file order


def _plan_only(opts: RunOptions) -> tuple[dict[str, Any], list[str], list[Shard]]:
    """Load, diff and plan a run without publishing: the plan's counts, parts and shards."""
    ctx = steps.begin(opts)
    try:
        steps.load_step(ctx)
        steps.diff_step(ctx)
        info = steps.plan_step(ctx)
        planned = json.loads(storage.open_storage(ctx.work).read_bytes("plan.json"))
        return info, planned["planned_uris"], load_shards(planned["shards_uri"])
    finally:
        steps.finish(ctx)


def test_lines_no_file_can_hold_are_rejected_before_any_slice_is_planned(
        inventory: Path, tmp_path: Path) -> None:
    """A line that no file can hold is rejected at load as too_large, so no plan slice
    meets it: when such rows are most of the inventory the run is refused at load, before
    a slice is chosen, and no plan is combined."""
    limits = Limits(max_urls=50, max_bytes=max_urlset_overhead() + 60)
    ctx = steps.begin(RunOptions(inventory=str(inventory), site_url=SITE,
                                 out=str(tmp_path / "out"), limits=limits, run_time=T0,
                                 plan_slice_rows=SLICE))
    try:
        with pytest.raises(TooManyRejects, match="too_large"):
            steps.load_step(ctx)
        work = storage.open_storage(ctx.work)
        assert not work.exists(SLICES_KEY) and not work.exists("plan.json")
    finally:
        steps.finish(ctx)


def test_cut_points() -> None:
    # Shards (lower, upper, urls, weight): cuts only at a lower bound no earlier shard spans.
    bounds = [("a", "b", 40, 40), ("c", "d", 40, 40), ("e", "f", 40, 40), ("g", "h", 40, 40)]
    assert _cuts_by_shards(bounds, 80, 80) == ["e"]
    assert _cuts_by_shards(bounds, 40, 40) == ["c", "e", "g"]
    assert _cuts_by_shards(bounds, 1000, 1000) == []
    # A shard whose rows span others' (after a merge): nothing cuts inside its range.
    spanning = [("a", "m", 40, 40), ("c", "d", 40, 40), ("n", "p", 40, 40)]
    assert _cuts_by_shards(spanning, 40, 40) == ["n"]
    assert _cuts_by_sample([f"u{i:03d}" for i in range(100)], 1000, 250) == [
        "u025", "u050", "u075"]
    assert _cuts_by_sample([], 1000, 250) == []


# ------------------------------------------------------------------ slices in any order


def _second_inventory(inventory: Path, tmp_path: Path) -> Path:
    """Removed rows, changed lastmods, new URLs among the product pages (their shards
    split, in several slices) and a new section larger than a slice."""
    table = pq.read_table(inventory)
    n = table.num_rows
    keep = pa.array([i % 11 != 4 for i in range(n)])
    mask = pa.array([i % 13 == 6 for i in range(n)])
    when = pa.scalar(T0 + timedelta(hours=20), pa.timestamp("us", tz="UTC"))
    lastmod = pc.if_else(mask, when, table["lastmod"].cast(pa.timestamp("us", tz="UTC")))
    table = table.set_column(table.schema.get_field_index("lastmod"), "lastmod", lastmod)
    table = table.filter(keep)
    added = [f"{SITE}product/item-{i}-more" for i in range(0, 3000, 4)]
    added += [f"{SITE}brand-new/page-{i:04d}" for i in range(300)]
    extra = pa.Table.from_pylist([{"url": u} for u in added], schema=table.schema)
    path = tmp_path / "inv-second.parquet"
    pq.write_table(pa.concat_tables([table, extra]), path)
    return path


def _plan_run(inventory: Path, out: Path, when: datetime, order: str) -> dict[str, Any]:
    """One run through the steps; plan: `sequential` (plan_step: the slices in order, each
    cut into shards while the next is sorted, plan_slices) or `reverse` (every
    slice in reverse order, the last one retried after the others, then combine).
    Returns what the plan wrote and what was published."""
    ctx = steps.begin(_opts(inventory, out, when, plan_slice_rows=SLICE))
    work = storage.open_storage(ctx.work)
    try:
        steps.load_step(ctx)
        steps.diff_step(ctx)
        if order == "sequential":
            info = steps.plan_step(ctx)
        else:
            slices = steps.plan_prepare_step(ctx)
            assert slices == list(range(len(slices))) and len(slices) > 5
            for index in reversed(slices):
                steps.plan_slice_step(ctx, index)
            steps.plan_slice_step(ctx, slices[-1])  # a retried slice task
            info = steps.plan_combine_step(ctx)
        prepared = json.loads(work.read_bytes(SLICES_KEY))
        planned = json.loads(work.read_bytes("plan.json"))
        result = {  # plan.json with the run's own work folder left out
            "info": info.to_dict(), "plan.json": json.loads(
                work.read_bytes("plan.json").decode().replace(ctx.work, "<work>")),
            "shards.json": work.read_bytes("shards.json"),
            "shards": load_shards(planned["shards_uri"]), "next_free": prepared["next_free"],
            "rows": [pq.read_table(u) for u in planned["planned_uris"]],
        }
        rendered = steps.render_step(ctx, None)
        result["summary"] = steps.publish_step(ctx, [rendered.uri]).to_dict()
    finally:
        steps.finish(ctx)
    output = read_output(str(out), max_urls=LIMITS.max_urls)
    result["files"] = sorted((s["key"], s["sha256"], s["lastmod"], s["urls"])
                             for s in output.manifest["sitemaps"])
    result["lastmods"] = output.lastmods
    result["snapshot"] = pq.read_table(state_file(str(out), output.manifest, "snapshot"))
    return result


def _check_numbering(shards: list[Shard], next_free: dict[str, int],
                     before: set[tuple[str, int]]) -> None:
    """The sequential plan's numbers: a kept shard keeps its number; new shards count on
    from the section's highest previous number + 1, in file order (slice, then number)."""
    expect = dict(next_free)
    for s in shards:
        if s.shard < next_free.get(s.section, 0):
            assert (s.section, s.shard) in before and s.planned_shard == s.shard, s.uid
        else:
            assert s.shard == expect.get(s.section, 0), s.uid
            expect[s.section] = s.shard + 1


def _timeless(d: dict[str, Any]) -> dict[str, Any]:
    """Without what differs each time a plan is made: its seconds, its prepare's token and
    its bytes written (the OS counts whole pages, and a retry rewrites what is there)."""
    return {k: v for k, v in d.items() if k not in ("seconds", "plan_token", "io")}


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["shards.json"] == b["shards.json"]  # the same shards, numbers, order, parts
    assert _timeless(a["plan.json"]) == _timeless(b["plan.json"])
    assert _timeless(a["info"]) == _timeless(b["info"])
    assert len(a["rows"]) == len(b["rows"])
    for part, (x, y) in enumerate(zip(a["rows"], b["rows"], strict=True)):
        assert x.equals(y), f"planned part {part} differs"
    assert a["files"] == b["files"] and a["lastmods"] == b["lastmods"]
    assert a["summary"]["counts"] == b["summary"]["counts"]


def _snapshot_has_final_numbers(r: dict[str, Any]) -> None:
    numbers = {(s.section, s.shard) for s in r["shards"]}
    snap = r["snapshot"]
    got = set(zip(snap["section"].to_pylist(), snap["shard"].to_pylist(), strict=True))
    assert got == numbers
    assert snap.schema.field("shard").type == pa.int32()


def test_slices_in_reverse_order_plan_what_one_after_the_other_plans(
        inventory: Path, tmp_path: Path) -> None:
    seq, rev = tmp_path / "sequential", tmp_path / "reverse"
    a = _plan_run(inventory, seq, T0, "sequential")
    b = _plan_run(inventory, rev, T0, "reverse")
    _same(a, b)
    assert a["next_free"] == {}
    _check_numbering(b["shards"], {}, set())
    # Later slices of the large new sections numbered their shards provisionally.
    moved = [s for s in b["shards"] if s.planned_shard != s.shard]
    assert moved and all(s.planned_shard >= 1 << PROVISIONAL_SHIFT for s in moved)
    assert all(s.planned_shard == s.shard for s in b["shards"] if s.part == 0)
    _snapshot_has_final_numbers(b)
    _check_numbers(rev)

    # Changed, added and removed rows; kept shards keep their numbers, splits add new ones.
    before = {(s.section, s.shard) for s in b["shards"]}
    inv2 = _second_inventory(inventory, tmp_path)
    a = _plan_run(inv2, seq, T0 + timedelta(days=1), "sequential")
    b = _plan_run(inv2, rev, T0 + timedelta(days=1), "reverse")
    _same(a, b)
    c = b["summary"]["counts"]
    assert c["added"] >= 1000 and c["changed"] > 0 and c["removed"] > 0
    assert c["shards_split"] > 0 and c["shards_reused"] > 0
    assert set(b["next_free"]) == {section for section, _ in before}
    _check_numbering(b["shards"], b["next_free"], before)
    assert any(s.planned_shard != s.shard for s in b["shards"])
    assert any((s.section, s.shard) in before for s in b["shards"])
    _snapshot_has_final_numbers(b)
    _check_numbers(rev)

    # The snapshot holds the final numbers: the same inventory again writes nothing.
    again = run(_opts(inv2, rev, T0 + timedelta(days=2), plan_slice_rows=SLICE, rebuild=True))
    assert not again["unchanged"]
    assert again["counts"]["shards_written"] == 0 and again["counts"]["bytes_written"] == 0
    assert again["counts"]["unchanged"] == c["added"] + c["changed"] + c["unchanged"]


def test_a_retried_slice_changes_nothing_and_combine_checks_its_slices(
        inventory: Path, tmp_path: Path) -> None:
    ctx = steps.begin(_opts(inventory, tmp_path / "out", plan_slice_rows=SLICE))
    work = storage.open_storage(ctx.work)
    try:
        steps.load_step(ctx)
        steps.diff_step(ctx)
        slices = steps.plan_prepare_step(ctx)
        steps.plan_slice_step(ctx, 1)
        with pytest.raises(RuntimeError, match=r"plan slice\(s\) \[0, 2, 3"):
            steps.plan_combine_step(ctx)
        for index in slices:
            steps.plan_slice_step(ctx, index)
        first = steps.plan_combine_step(ctx)
        shards = work.read_bytes("shards.json")
        planned = json.loads(work.read_bytes("plan.json"))
        parts = [pq.read_table(u) for u in planned["planned_uris"]]
        # The demo has no extension XML: the parts leave `ext` out (render puts '' back); the
        # section and the changefreq, written from ENUM codes, read back as text.
        assert all("ext" not in p.column_names for p in parts)
        assert {p.schema.field(c).type for p in parts for c in ("section", "changefreq")} == {
            pa.string()}
        for shard in load_shards(planned["shards_uri"]):
            if shard.part is not None:  # every row of a shard holds its section's text
                rows = parts[shard.part].column("section").slice(shard.row_start, shard.urls)
                assert rows.to_pylist() == [shard.section] * shard.urls
        # A retry of any slice task, then of the combine: the same plan.
        for index in (len(slices) - 1, 0, 1):
            steps.plan_slice_step(ctx, index)
        assert _timeless(steps.plan_combine_step(ctx).to_dict()) == _timeless(first.to_dict())
        assert work.read_bytes("shards.json") == shards
        assert _timeless(json.loads(work.read_bytes("plan.json"))) == _timeless(planned)
        for part, uri in enumerate(planned["planned_uris"]):
            assert pq.read_table(uri).equals(parts[part])
        # Slices chosen again: results of the earlier choice are refused.
        steps.plan_prepare_step(ctx)
        steps.plan_slice_step(ctx, 0)
        with pytest.raises(RuntimeError, match="planned before the slices were chosen again"):
            steps.plan_combine_step(ctx)
    finally:
        steps.finish(ctx)


def test_cli_plan_slice_rows(inventory: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli import main

    args = ["run", "--inventory", str(inventory), "--site-url", SITE,
            "--max-urls-per-sitemap", "50", "--json", "--no-report", "--feed-days", "0"]
    assert main([*args, "--out", str(tmp_path / "bad"), "--plan-slice-rows", "0"]) == 2
    assert "--plan-slice-rows must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "manifest.json").exists()

    assert main([*args, "--out", str(tmp_path / "out"), "--plan-slice-rows", str(SLICE)]) == 0
    summary = json.loads(capsys.readouterr().out)
    one = run(_opts(inventory, tmp_path / "one"))
    assert summary["counts"]["published"] == one["counts"]["published"]
    # The same URLs (the lastmods differ: the CLI run's time is now, not T0).
    assert set(read_output(str(tmp_path / "out"), max_urls=LIMITS.max_urls).lastmods) == set(
        read_output(str(tmp_path / "one"), max_urls=LIMITS.max_urls).lastmods)
    # Sliced: the first run packs each slice on its own, so more files than one pass.
    assert summary["counts"]["sitemaps"] > one["counts"]["sitemaps"]


def test_split_input_publishes_what_filtered_slices_do(inventory: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Many slices read their rows from one split of the diffed rows (plan-input/) instead
    of each filtering every diffed row: the same files, first run and next run."""
    from pipeline.plan import slices as plan

    def two_runs(out: Path) -> dict[str, bytes]:
        run(_opts(inventory, out, plan_slice_rows=SLICE))
        df = pq.read_table(inventory)
        half = df.slice(0, 2000)  # a third of the URLs removed, the rest kept
        pq.write_table(half, tmp_path / f"{out.name}-inv2.parquet")
        run(_opts(tmp_path / f"{out.name}-inv2.parquet", out, T0 + timedelta(days=1),
                  plan_slice_rows=SLICE))
        # the shard files and the root index (manifests and generation folders are named
        # after each run's own generation id)
        files = {str(p.relative_to(out)): p.read_bytes() for p in (out / "sitemaps").iterdir()}
        return {**files, "sitemap_index.xml": (out / "sitemap_index.xml").read_bytes()}

    split_calls: list[int] = []
    real_split = plan._split_by_slice
    monkeypatch.setattr(plan, "_split_by_slice",
                        lambda con, work, slices: split_calls.append(len(slices))
                        or real_split(con, work, slices))
    split = two_runs(tmp_path / "split")
    # The next run only: a first run's diffed rows are in buckets of sections already.
    assert len(split_calls) == 1 and min(split_calls) >= plan.SPLIT_INPUT_SLICES
    monkeypatch.setattr(plan, "SPLIT_INPUT_SLICES", 10**6)
    filtered = two_runs(tmp_path / "filtered")
    assert len(split_calls) == 1  # not split this time
    assert len(split) > 20 and split == filtered


def test_a_first_runs_whole_sections_are_measured_once_for_every_slice(
        inventory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """prepare measures the sections that slices hold whole (new_section_stats) in one scan;
    those slices plan from it, the others by their own query: the same plan and files as
    every slice measuring its own rows."""
    from pipeline.plan import slices as plan

    measured = _plan_run(inventory, tmp_path / "measured", T0, "sequential")
    ctx = steps.begin(_opts(inventory, tmp_path / "probe", plan_slice_rows=SLICE))
    try:
        steps.load_step(ctx)
        diffed = steps.diff_step(ctx)
        steps.plan_prepare_step(ctx)
        work = storage.open_storage(ctx.work)
        prepared = json.loads(work.read_bytes(SLICES_KEY))
        # A first run's diffed rows are not written: the diff's query over load's rows.
        result = json.loads(work.read_bytes("diff.json"))
        assert result["view"] is not None
        con = sql.connect()
        register_diffed(con, "diffed_rows", result["diffed_uris"],
                        DiffedView.from_json(result["view"]))
        diffed_rows = con.sql("SELECT * FROM diffed_rows").to_arrow_table()
        # The slice plans from the recorded stats, not a query of its own: given another
        # URL range, its sort skips (and puts back) that range's common prefix instead.
        index, sl = next((i, sl) for i, sl in enumerate(prepared["slices"])
                         if sl["lo"] is None and sl["hi"] is None)
        tampered = json.loads(json.dumps(prepared))
        for row in tampered["section_stats"]:
            if row[0] == sl["sections"][0]:
                row[9:] = [SITE + "tampered/a", SITE + "tampered/b"]
        work.write_bytes(SLICES_KEY, json.dumps(tampered).encode())
        steps.plan_slice_step(ctx, index)
        part = pq.read_table(json.loads(work.read_bytes(f"plan-slice-{index:05d}.json"))["part_uri"])
        first = part.filter(pc.equal(part["section"], sl["sections"][0]))["url"].to_pylist()
        assert first and all(u.startswith(SITE + "tampered/") for u in first)
    finally:
        steps.finish(ctx)
    assert diffed.counts["added"] == diffed_rows.num_rows
    whole = [s for sl in prepared["slices"] if sl["lo"] is None and sl["hi"] is None
             for s in sl["sections"]]
    ranged = {s for sl in prepared["slices"] if sl["lo"] is not None or sl["hi"] is not None
              for s in sl["sections"]}
    assert whole and ranged  # the demo's larger sections are cut, the smaller ones not
    stats = {row[0]: row for row in prepared["section_stats"]}
    assert sorted(stats) == sorted(whole)
    for section in whole:
        urls = diffed_rows.filter(pc.equal(diffed_rows["section"], section))["url"]
        assert stats[section][2] == len(urls)
        assert stats[section][9:] == [pc.min(urls).as_py(), pc.max(urls).as_py()]

    monkeypatch.setattr(plan, "_whole_section_stats", lambda con, slices, view: [])
    queried = _plan_run(inventory, tmp_path / "queried", T0, "sequential")
    _same(measured, queried)
    assert measured["files"] == queried["files"] and len(measured["files"]) > 20


def test_the_live_shards_bounds_come_from_the_snapshots_footer(inventory: Path,
                                                               tmp_path: Path) -> None:
    """prepare takes the last generation's shard bounds from its snapshot's footer, not from
    a scan of its rows: bounds tampered there are the ones it writes for the slices; a
    snapshot without them (an earlier version's) is scanned, with the same result as the
    footer it was written with."""
    from pipeline import integrity
    from pipeline.layout import BOUNDS_KEY
    from pipeline.snapshot import SHARD_BOUNDS_KEY, shard_bounds

    out = tmp_path / "out"
    run(_opts(inventory, out))
    manifest = json.loads((out / "manifest.json").read_text())
    snapshot = Path(state_file(str(out), manifest, "snapshot"))
    written = shard_bounds(str(snapshot))
    assert written is not None and written.num_rows == len(manifest["sitemaps"])

    def prepared_bounds(metadata: dict[bytes, bytes] | None) -> pa.Table:
        """The bounds prepare writes for a rerun, the live snapshot's footer holding
        `metadata` (its rows unchanged, the manifest's check made again)."""
        rows = pq.read_table(snapshot)
        pq.write_table(rows.replace_schema_metadata(metadata), snapshot)
        manifest["state_check"] = {"snapshot": integrity.describe(str(snapshot))}
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        ctx = steps.begin(_opts(inventory, out, T0 + timedelta(hours=1), force=True))
        try:
            steps.load_step(ctx)
            steps.diff_step(ctx)
            steps.plan_prepare_step(ctx)
            with storage.open_storage(ctx.work).local_path(BOUNDS_KEY) as path:
                return pq.read_table(path).sort_by([("section", "ascending"),
                                                    ("shard", "ascending")])
        finally:
            steps.finish(ctx)

    bounds = json.loads(pq.read_metadata(snapshot).metadata[SHARD_BOUNDS_KEY.encode()])
    bounds[0][2] = SITE + "tampered"
    tampered = prepared_bounds({SHARD_BOUNDS_KEY.encode(): json.dumps(bounds).encode()})
    assert tampered["lower"].to_pylist()[0] == SITE + "tampered"
    scanned = prepared_bounds(None)
    assert scanned.cast(written.schema).equals(written)
    assert scanned["lower"].to_pylist()[0] != SITE + "tampered"


# ------------------------------------------------------- each task reads about its share


def _dag_plan(ctx: Any) -> tuple[list[Any], list[Any]]:
    """The plan stage as the DAG runs it (plan_slices with split tasks, plan_splits, every
    plan_split task, every plan task, in reverse order, plan_counts); the split and plan
    tasks' results."""
    slices = steps.plan_prepare_step(ctx, split_tasks=True)
    units = steps.plan_split_units(ctx) or [0]  # the DAG's plan_splits
    split = [steps.plan_split_step(ctx, unit) for unit in reversed(units)]
    planned = [steps.plan_slice_step(ctx, index) for index in reversed(slices)]
    steps.plan_combine_step(ctx)
    return split, planned


def _run_plan(inventory: Path, out: Path, when: datetime, dag: bool, **kw: Any
              ) -> dict[str, Any]:
    """A run through the steps, its plan as the DAG's tasks run it (`dag`) or as the CLI
    does (plan_step); what the plan wrote, the split and plan tasks' results, the inputs."""
    ctx = steps.begin(_opts(inventory, out, when, **kw))
    work = storage.open_storage(ctx.work)
    try:
        steps.load_step(ctx)
        steps.diff_step(ctx)
        split: list[Any] = []
        planned: list[Any] = []
        if dag:
            split, planned = _dag_plan(ctx)
        else:
            steps.plan_step(ctx)
        prepared = json.loads(work.read_bytes(SLICES_KEY))
        plan = json.loads(work.read_bytes("plan.json"))
        result = {"shards.json": work.read_bytes("shards.json"), "split": split,
                  "planned": planned, "prepared": prepared,
                  "file_rows": {u: pq.read_metadata(u).num_rows
                                for u in prepared["diffed_uris"]},
                  "rows": [pq.read_table(u) for u in plan["planned_uris"]]}
        rendered = steps.render_step(ctx, None)
        steps.publish_step(ctx, [rendered.uri])
    finally:
        steps.finish(ctx)
    output = read_output(str(out), max_urls=LIMITS.max_urls)
    result["files"] = sorted((s["key"], s["sha256"], s["urls"])
                             for s in output.manifest["sitemaps"])
    return result


def _reads_its_share(dag: dict[str, Any], cli: dict[str, Any]) -> None:
    """Every plan task read at most twice its rows (the URLs it planned), every split task
    its own files once, every diffed file by one split task; the plan and the published
    files are the CLI's."""
    prepared = dag["prepared"]
    units = prepared["split_units"]
    assert units and len(dag["split"]) == len(units) > 1
    diffed = prepared["diffed_uris"]
    assert sorted(u for unit in units for u in unit) == sorted(diffed)  # each file in one unit
    for counts in dag["split"]:
        own = units[counts.unit]
        assert counts.io.files_read == len(own)
        assert counts.io.rows_read == sum(dag["file_rows"][u] for u in own)
    assert sum(c.io.rows_read for c in dag["split"]) == sum(dag["file_rows"].values())
    assert len(dag["planned"]) == len(prepared["slices"]) > 5
    for counts in dag["planned"]:
        assert counts.io.rows_read <= 2 * counts.urls, counts
    assert sum(c.io.rows_read for c in dag["planned"]) == sum(c.urls for c in dag["planned"])
    assert dag["shards.json"] == cli["shards.json"]
    for x, y in zip(dag["rows"], cli["rows"], strict=True):
        assert x.equals(y)
    assert dag["files"] == cli["files"] and len(dag["files"]) > 20


def test_each_plan_task_reads_about_its_share(tmp_path: Path) -> None:
    """A first run whose one section is most of the rows, in small slices: its slices would
    each read the whole section's bucket; the split tasks write each bucket by slice, and
    each plan task reads its own rows. Then a nightly with many slices, in three diff
    partitions: each plan task would scan every diffed row; each split task reads one
    partition's file."""
    big = [f"{SITE}product/item-{i:05d}" for i in range(2_400)]
    small = [f"{SITE}s{k:02d}/page-{i:03d}" for k in range(12) for i in range(25)]
    inventory = tmp_path / "inv.parquet"
    pq.write_table(pa.table({"url": big + small}), inventory)
    dag = _run_plan(inventory, tmp_path / "dag", T0, True, plan_slice_rows=SLICE)
    cli = _run_plan(inventory, tmp_path / "cli", T0, False, plan_slice_rows=SLICE)
    assert dag["prepared"]["view"] is not None  # a first run's rows: load's, in buckets
    _reads_its_share(dag, cli)
    # The CLI's slices read their sections' buckets: the big section's slices all of it.
    assert cli["prepared"]["split_units"] is None and cli["prepared"]["slice_inputs"] is None
    # One slice reads its own rows anyway: nothing to split (the DAG's one plan_split task
    # does nothing).
    one = _run_plan(inventory, tmp_path / "one", T0, True)
    assert one["prepared"]["split_units"] is None and len(one["prepared"]["slices"]) == 1
    assert [(c.rows, c.io.rows_read, c.io.files_read) for c in one["split"]] == [(0, 0, 0)]
    assert [c.io.rows_read for c in one["planned"]] == [c.urls for c in one["planned"]]

    # A nightly: a third of the big section's URLs changed, new ones, a new section.
    second = tmp_path / "inv2.parquet"
    pq.write_table(pa.table({"url": [u + ("-v2" if i % 3 == 0 else "") for i, u in
                                     enumerate(big)] + small[25:]
                             + [f"{SITE}fresh/page-{i:04d}" for i in range(400)]}), second)
    when = T0 + timedelta(days=1)
    dag = _run_plan(second, tmp_path / "dag", when, True, plan_slice_rows=SLICE,
                    diff_partitions=3)
    cli = _run_plan(second, tmp_path / "cli", when, False, plan_slice_rows=SLICE,
                    diff_partitions=3)
    assert dag["prepared"]["view"] is None and len(dag["prepared"]["diffed_uris"]) == 3
    _reads_its_share(dag, cli)


def test_a_first_runs_cuts_come_from_loads_sample_not_a_scan_of_its_sections(
        inventory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first run's load samples the valid URLs as plan's sample_urls would take them of the
    diffed rows (by section, one in sample_every); prepare cuts the large new sections from
    that file without scanning their rows, and plans exactly what the scan plans."""
    from pipeline.plan import slices as plan

    monkeypatch.setattr(plan, "SAMPLES_PER_SLICE", 10)  # one URL in 12 of SLICE's rows
    every = plan.sample_every(SLICE)
    assert every == 12
    queries: list[str] = []
    real_load_sql = sql.load_sql
    monkeypatch.setattr(sql, "load_sql", lambda name: queries.append(name) or real_load_sql(name))
    ctx = steps.begin(_opts(inventory, tmp_path / "probe", plan_slice_rows=SLICE))
    try:
        steps.load_step(ctx)
        steps.diff_step(ctx)
        work = storage.open_storage(ctx.work)
        valid = json.loads(work.read_bytes("load.json"))["valid"]
        assert valid["sample_every"] == every and valid["sample_uri"]
        result = json.loads(work.read_bytes("diff.json"))
        con = sql.connect()
        register_diffed(con, "diffed_all", result["diffed_uris"],
                        DiffedView.from_json(result["view"]))
        sections = [s for s, in con.sql("SELECT DISTINCT section FROM diffed_all").fetchall()]
        scanned = con.sql(real_load_sql("sample_urls"), params={
            "sections": sections, "every": every}).fetchall()
        sample = pq.read_table(valid["sample_uri"])
        assert list(zip(sample["section"].to_pylist(), sample["url"].to_pylist(),
                        strict=True)) == scanned
        assert 0 < sample.num_rows < con.sql("SELECT count(*) FROM diffed_all").fetchall()[0][0] / 6
        queries.clear()
        steps.plan_prepare_step(ctx)
        prepared = json.loads(work.read_bytes(SLICES_KEY))
        assert any(sl["lo"] is not None for sl in prepared["slices"])  # sections were cut
        assert "sample_urls" not in queries
    finally:
        steps.finish(ctx)

    sampled = _plan_run(inventory, tmp_path / "sampled", T0, "sequential")
    monkeypatch.setattr(plan, "_load_sample", lambda view, slice_rows: "")
    queries.clear()
    scanning = _plan_run(inventory, tmp_path / "scanning", T0, "sequential")
    assert "sample_urls" in queries
    _same(sampled, scanning)
