"""Diff in hash partitions: exactly what one partition (one join) publishes, run after run.

The demo inventory (with a few news articles added) is published twice into each of two
outputs, once diffed in 1 partition and once in 3: a first run, then an incremental run
with changed, added and removed rows. Both outputs must hold the same files (keys,
sha256, lastmods), counts, changes, feed and IndexNow URLs.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import feedparser
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline import sql
from pipeline.config import Limits
from pipeline.demo import make_inventory
from pipeline.diff import (
    DIFF_BUILD_ROW_BYTES,
    MAX_AUTO_DIFF_PARTITIONS,
    combine,
    diff,
    diff_relation,
    first_run_stats,
    partitions_for,
    previous_partition_rows,
)
from pipeline.diffed import (
    DIFFED_COLUMNS,
    FIRST_RUN_OMITTED,
    PLAIN_OMITTED,
    DiffedView,
    bucketed,
    files_of_sections,
    plain_omitted,
    register_diffed,
)
from pipeline.errors import ConfigError
from pipeline.extensions import NEWS_SECTION
from pipeline.load import load
from pipeline.notify import FEED_KEY, generation_changed_urls
from pipeline.parquet import register_parquet
from pipeline.publish import read_live
from pipeline.run import RunOptions, run
from pipeline.settings import environment
from pipeline.steps import begin, diff_combine_step, diff_partition_step, load_step
from tests.output_check import read_output, state_file

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
T1 = T0 + timedelta(days=1, hours=2)
URLS = 12_000
LIMITS = Limits(max_urls=500)
NEWS = pa.struct([("publication_name", pa.string()), ("language", pa.string()),
                  ("publication_date", pa.timestamp("s", tz="UTC")), ("title", pa.string())])


def first_inventory(tmp: Path) -> pa.Table:
    """The demo inventory, plus a news article on every 97th row (fresh or old)."""
    table = pq.read_table(make_inventory(tmp / "demo.parquet", URLS, site=SITE))
    news = [{"publication_name": "The Example", "language": "en",
             "publication_date": T0 - (timedelta(hours=5) if i % 2 else timedelta(days=5)),
             "title": f"Story {i} & more"} if i % 97 == 0 else None
            for i in range(table.num_rows)]
    return table.append_column("news", pa.array(news, NEWS))


def second_inventory(table: pa.Table) -> pa.Table:
    """Changed (payload and lastmod), removed and added rows, and a fresh article.

    Rows change in a few sections only, so the other sections' shards are reused."""
    rows = table.to_pylist()
    out = []
    for i, r in enumerate(rows):
        if not any(f"/{s}/" in r["url"] for s in ("blog", "help", "deal", "news")):
            out.append(r)
            continue
        if i % 7 == 3:
            continue  # removed
        if i % 7 == 1:  # a payload change
            r = {**r, "changefreq": "daily" if r["changefreq"] != "daily" else "weekly"}
        elif i % 7 == 2:  # a real, recent change the inventory reports
            r = {**r, "lastmod": T1 - timedelta(hours=1)}
        elif i % 7 == 5 and r["news"] is None:  # becomes a fresh article
            r = {**r, "news": {"publication_name": "The Example", "language": "en",
                               "publication_date": T1 - timedelta(hours=2), "title": "Fresh"}}
        out.append(r)
    out += [{"url": f"{SITE}product/new-{i}", "lastmod": None, "changefreq": None,
             "priority": None, "news": None} for i in range(150)]
    out += [{"url": f"{SITE}brand-new/{i}", "lastmod": None, "changefreq": "weekly",
             "priority": 0.5, "news": None} for i in range(60)]
    return pa.Table.from_pylist(out, schema=table.schema)


def publish(tmp: Path, out: str, table: pa.Table, when: datetime, partitions: int
            ) -> dict[str, Any]:
    inv = tmp / f"inv-{when:%d%H}.parquet"
    if not inv.exists():
        pq.write_table(table, inv)
    return run(RunOptions(inventory=str(inv), site_url=SITE, out=out, limits=LIMITS,
                          run_time=when, allow_shrink=True, diff_partitions=partitions,
                          feed_days=7, report=False))


def published(out: str) -> dict[str, Any]:
    """Everything a crawler or a consumer of the changes sees of the live generation."""
    o = read_output(out, max_urls=LIMITS.max_urls)
    m = o.manifest
    changes = pq.read_table(state_file(out, m, "changes")).to_pylist()
    feed = feedparser.parse((Path(out) / FEED_KEY).read_bytes())
    return {
        "files": sorted((s["key"], s["sha256"], s["lastmod"], s["urls"]) for s in m["sitemaps"]),
        "lastmods": o.lastmods,
        "indexes": [i["key"] for i in m["indexes"]],
        "counts": m["counts"],
        "changes": sorted((r["url"], r["change"], r["lastmod"]) for r in changes),
        "feed": [(e.link, e.updated) for e in feed.entries],
        "indexnow": list(generation_changed_urls(state_file(out, m, "changes"))),
    }


def published_then_second(tmp: Path) -> tuple[str, Path, pa.Table]:
    """first_inventory published in one partition: the live snapshot, and second_inventory
    written beside it (its path and rows) for the next run."""
    first = first_inventory(tmp)
    out = str(tmp / "out")
    publish(tmp, out, first, T0, 1)
    second = second_inventory(first)
    inv = tmp / "second.parquet"
    pq.write_table(second, inv)
    return state_file(out, read_live(out).manifest or {}, "snapshot"), inv, second


def sorted_rows(con: Any, uris: list[str]) -> list[tuple]:
    """Every row of the Parquet files at `uris`, sorted: outputs compared whatever their order."""
    register_parquet(con, "compared", uris)
    return con.sql("SELECT * FROM compared ORDER BY ALL").fetchall()


@pytest.mark.parametrize("split_snapshot", [False, True])
def test_three_partitions_publish_what_one_publishes(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    split_snapshot: bool) -> None:
    """With the snapshot's rows cut by partition by the load step (from
    SNAPSHOT_SPLIT_PARTITIONS partitions on) and without."""
    from pipeline import diff as diff_module
    from pipeline import steps

    used: list[int] = []  # the partitions each run's diff was cut in
    partitions = steps.diff_partitions
    monkeypatch.setattr(steps, "diff_partitions",
                        lambda ctx: used.append(partitions(ctx)) or used[-1])
    monkeypatch.setattr(diff_module, "SNAPSHOT_SPLIT_PARTITIONS", 3 if split_snapshot else 4)
    cuts: list[int] = []  # the partitions the snapshot was cut in
    split = diff_module.split_snapshot
    monkeypatch.setattr(diff_module, "split_snapshot",
                        lambda uri, n, work, **kw: cuts.append(n) or split(uri, n, work, **kw))
    first = first_inventory(tmp_path)
    second = second_inventory(first)
    one, three = str(tmp_path / "one"), str(tmp_path / "three")

    s1 = publish(tmp_path, one, first, T0, 1)
    s3 = publish(tmp_path, three, first, T0, 3)
    a, b = published(one), published(three)
    assert a == b
    c = s3["counts"]
    assert (c["added"], c["changed"], c["unchanged"], c["removed"]) == (
        s1["counts"]["added"], 0, 0, 0)
    assert c["news_articles"] > 0 and any("google-news" in f[0] for f in b["files"])

    s1 = publish(tmp_path, one, second, T1, 1)
    s3 = publish(tmp_path, three, second, T1, 3)
    a, b = published(one), published(three)
    for key in a:
        assert a[key] == b[key], key
    c = s3["counts"]
    assert {k: c[k] for k in ("added", "changed", "unchanged", "removed", "lastmod_clamped",
                              "news_articles")} == {
        k: s1["counts"][k] for k in ("added", "changed", "unchanged", "removed",
                                     "lastmod_clamped", "news_articles")}
    assert c["added"] >= 210 and c["changed"] > 0 and c["removed"] > 0
    assert c["shards_reused"] > 0  # an incremental run: unchanged shards keep their keys
    kinds = {change for _, change, _ in b["changes"]}
    assert kinds == {"added", "changed", "removed"}
    assert len(b["indexnow"]) == c["added"] + c["changed"] + c["removed"]
    assert set(used) == {1, 3}
    assert cuts == ([3] if split_snapshot else [])  # the second run's, 3 partitions


def test_partitions_cut_the_join_exactly_and_in_any_order(tmp_path: Path) -> None:
    """diff() per partition, run out of order: the union is the one-join result, row for row."""
    snapshot, inv, _ = published_then_second(tmp_path)
    valid = load(str(inv), SITE, str(tmp_path / "load")).valid

    whole = diff(valid, snapshot, T1, str(tmp_path / "whole"))
    parts = {p: diff(valid, snapshot, T1, str(tmp_path / "parts"), partition=p, partitions=3)
             for p in (2, 0, 1)}
    assert all(r.added + r.changed + r.unchanged > 0 for r in parts.values())  # not lopsided
    combined = combine([parts[p] for p in range(3)])
    assert combined.counts() == whole.counts()
    assert [Path(u).name for u in combined.diffed_uris] == [
        "part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]

    con = sql.connect(memory_limit="512MB", threads=1)
    assert sorted_rows(con, whole.diffed_uris) == sorted_rows(con, combined.diffed_uris)
    assert sorted_rows(con, whole.changes_uris) == sorted_rows(con, combined.changes_uris)
    # IndexNow reads a run's changes parts together as one file.
    assert list(generation_changed_urls(combined.changes_uris)) == list(
        generation_changed_urls(whole.changes_uris[0]))


def test_a_partition_that_matches_all_its_snapshot_rows_skips_the_removed_search(
        tmp_path: Path) -> None:
    """previous_partition_rows counts each partition's snapshot rows; a partition whose
    diffed rows match as many finds no removed URL, so diff looks for none there."""
    first = first_inventory(tmp_path)
    out = str(tmp_path / "out")
    publish(tmp_path, out, first, T0, 1)
    snapshot = state_file(out, read_live(out).manifest or {}, "snapshot")
    # One published URL is gone from the inventory: the partition it hashes to removes it.
    raw = set(first.column("url").to_pylist())
    gone = next(u for u in pq.read_table(snapshot, columns=["url"]).column("url").to_pylist()
                if u in raw)  # published as the inventory wrote it
    inv = tmp_path / "second.parquet"
    pq.write_table(first.filter(pc.not_equal(first.column("url"), gone)), inv)
    valid = load(str(inv), SITE, str(tmp_path / "load")).valid

    counts = previous_partition_rows(snapshot, 3)
    con = sql.connect(memory_limit="512MB", threads=1)
    assert counts == [con.sql("SELECT count(*) FROM read_parquet($s) WHERE hash(url) % 3 = $p",
                              params={"s": snapshot, "p": p}).fetchall()[0][0]
                      for p in range(3)]
    assert sum(counts) == pq.read_metadata(snapshot).num_rows and min(counts) > 0
    assert previous_partition_rows(None, 2) == [0, 0]

    def removed(p: int, previous_rows: int | None) -> list[str]:
        r = diff(valid, snapshot, T1, str(tmp_path / f"d{p}-{previous_rows}"), partition=p,
                 partitions=3, previous_rows=previous_rows)
        register_parquet(con, "changes", r.changes_uris)
        urls = [u for (u,) in con.sql("SELECT url FROM changes WHERE change = 'removed'"
                                      ).fetchall()]
        assert r.removed == len(urls)
        return urls

    found = {p: removed(p, counts[p]) for p in range(3)}
    assert sorted(u for urls in found.values() for u in urls) == [gone]
    assert found == {p: removed(p, None) for p in range(3)}  # as without the counts
    # The counts decide: told that the partition of the gone URL holds one row fewer (as
    # many as match), diff does not look, which is why the counts must be the snapshot's.
    (at,) = [p for p, urls in found.items() if urls]
    assert removed(at, counts[at] - 1) == []


def test_diff_steps_write_one_result_per_partition_and_combine_them(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path / "demo.parquet", 2_000, site=SITE)
    ctx = begin(RunOptions(inventory=str(inv), site_url=SITE, out=str(tmp_path / "out"),
                           work=str(tmp_path / "work"), run_id="r1", run_time=T0,
                           diff_partitions=3))
    assert load_step(ctx).diff_partitions == 3
    diff_partition_step(ctx, 1)
    with pytest.raises(RuntimeError, match=r"diff partition\(s\) \[0, 2\] of 3"):
        diff_combine_step(ctx)
    parts = [diff_partition_step(ctx, p) for p in (2, 0)]
    counts = diff_combine_step(ctx)
    work = tmp_path / "work" / "r1"
    assert sorted(p.name for p in work.glob("diff*.json")) == [
        "diff-00000.json", "diff-00001.json", "diff-00002.json", "diff.json"]
    assert counts.partitions == 3
    assert counts.counts["added"] > sum(p.counts["added"] for p in parts) > 0
    # a first run: each partition's rows in buckets of sections (pipeline.diffed)
    assert sorted(p.name for p in (work / "diffed").iterdir()) == [
        f"part-{p:05d}" for p in range(3)]
    assert all(f.parent.name.startswith("bucket=") for f in (work / "diffed").rglob("*.parquet"))
    # load cut its rows by the 3 partitions (pipeline.load: ValidRows.split)
    assert {f"diff_partition={p}" for p in range(3)} <= {
        p.name for p in (work / "normalized").iterdir()}


def test_automatic_partitions_and_bad_counts(tmp_path: Path) -> None:
    # automatic: as many snapshot rows per partition as DuckDB's memory holds in the join's
    # hash table, at most MAX_AUTO_DIFF_PARTITIONS; one on a first run
    n = sql.parse_bytes(sql.duckdb_memory_limit()) // DIFF_BUILD_ROW_BYTES
    # the suite runs without SITEMAPS_DIFF_PARTITION_ROWS
    assert environment().diff_partition_rows == 0
    assert partitions_for(0) == partitions_for(1) == partitions_for(n) == 1
    assert partitions_for(n + 1) == 2 and partitions_for(100 * n) == 100  # no cap of 16
    assert partitions_for(5_000 * n) == MAX_AUTO_DIFF_PARTITIONS == 1_024  # Airflow's map
    assert partitions_for(100 * n, first_run=True) == 1
    assert partitions_for(10, partition_rows=3) == 4
    with pytest.raises(ConfigError, match="at least 1"):
        begin(RunOptions(inventory="x", site_url=SITE, out=str(tmp_path / "o"),
                         diff_partitions=0))
    with pytest.raises(ConfigError, match="partition 3 of 3"):
        diff("unused", None, T0, str(tmp_path), partition=3, partitions=3)


def as_read_back(made: Any) -> Any:
    """The rows of diff_rows (`made`) as its readers see them: diff_rows makes the status an
    ENUM, one byte to write, which a Parquet part holds as text (VARCHAR)."""
    assert str(made.types[DIFFED_COLUMNS.index("status")]).startswith("ENUM(")
    return made.project(", ".join("status::VARCHAR AS status" if c == "status" else c
                                  for c in made.columns))


def read_back_as_diff_rows(uris: list[str], valid: Any, snapshot: str | None,
                           when: datetime) -> Any:
    """The diffed parts at `uris`, read through register_diffed (the view `diffed` of the
    connection returned), are the rows diff_rows makes: every column, type and value."""
    con = sql.connect(memory_limit="512MB", threads=1)
    register_diffed(con, "diffed", uris)
    got = con.sql("SELECT * FROM diffed ORDER BY url")
    expected = as_read_back(diff_relation(con, valid, snapshot, when)).order("url")
    assert tuple(got.columns) == DIFFED_COLUMNS == tuple(expected.columns)
    assert got.types == expected.types
    assert got.fetchall() == expected.fetchall()
    return con


def test_a_first_runs_parts_leave_out_its_constant_columns(tmp_path: Path) -> None:
    """A first run writes no status, last_changed or prev_shard (one value each there), in
    buckets of sections; register_diffed gives every reader the rows diff_rows makes, those
    columns put back, and files_of_sections the files that hold a section's rows."""
    inventory = make_inventory(tmp_path / "demo.parquet", 2_000, site=SITE)
    valid = load(str(inventory), SITE, str(tmp_path / "load")).valid
    result = diff(valid, None, T0, str(tmp_path / "first"))
    written = pq.read_schema(result.diffed_uris[0]).names
    assert set(FIRST_RUN_OMITTED) & set(written) == set()
    assert set(PLAIN_OMITTED) & set(written) == set()  # the demo has no news, no extensions
    con = read_back_as_diff_rows(result.diffed_uris, valid, None, T0)
    assert con.sql("SELECT DISTINCT status, last_changed, prev_shard FROM diffed").fetchall() == [
        ("added", T0, None)]
    # In buckets of sections: a section's rows are all in the files files_of_sections gives.
    assert bucketed(result.diffed_uris) and len(result.diffed_uris) > 1
    sections = [s for (s,) in con.sql("SELECT DISTINCT section FROM diffed").fetchall()]
    for section in sections:
        files = files_of_sections(con, result.diffed_uris, [section])
        assert 0 < len(files) < len(result.diffed_uris)
        register_diffed(con, "picked", files)
        assert con.sql("SELECT count(*) FROM picked WHERE section = $s", params={"s": section}
                       ).fetchall() == con.sql("SELECT count(*) FROM diffed WHERE section = $s",
                                               params={"s": section}).fetchall()


def test_an_incremental_runs_parts_leave_out_the_inventorys_one_values(tmp_path: Path) -> None:
    """Against a snapshot, an inventory without news or extension XML writes no is_news or
    ext (false and '' in every row); register_diffed puts them back: the rows diff_rows
    makes. Which columns hold one value follows from load's constant columns: an inventory
    with news keeps both."""
    snapshot, inv, second = published_then_second(tmp_path)
    with_news = load(str(inv), SITE, str(tmp_path / "load-news")).valid
    kept = diff(with_news, snapshot, T1, str(tmp_path / "diff-news"))
    assert set(PLAIN_OMITTED) <= set(pq.read_schema(kept.diffed_uris[0]).names)
    pq.write_table(second.drop_columns(["news"]), tmp_path / "plain.parquet")
    valid = load(str(tmp_path / "plain.parquet"), SITE, str(tmp_path / "load")).valid
    result = diff(valid, snapshot, T1, str(tmp_path / "diff"))
    assert set(PLAIN_OMITTED) & set(pq.read_schema(result.diffed_uris[0]).names) == set()
    read_back_as_diff_rows(result.diffed_uris, valid, snapshot, T1)

    no_news = ("NULL::VARCHAR AS news_name", "NULL::TIMESTAMPTZ AS news_date")
    assert plain_omitted((*no_news, "'' AS ext_xml"), with_news=True) == ("is_news", "ext")
    assert plain_omitted(no_news, with_news=True) == ("is_news",)  # extension XML, no news
    assert plain_omitted(("'' AS ext_xml",), with_news=True) == ()  # news: both vary
    assert plain_omitted(("'' AS ext_xml",), with_news=False) == ("is_news", "ext")
    assert plain_omitted((), with_news=False) == ("is_news",)


def test_a_first_run_in_one_partition_writes_no_diffed_row(tmp_path: Path) -> None:
    """Load writes a first run's rows in buckets of sections; the diff writes none of them
    (DiffedView): every reader runs its query over load's files, and gets what it would
    write. Its one pass gives the counts and each section's rows and URL range; load's
    counts give the same, without that pass."""
    inventory = make_inventory(tmp_path / "demo.parquet", 2_000, site=SITE)
    loaded = load(str(inventory), SITE, str(tmp_path / "load"), bucket_sections=True)
    valid = loaded.valid
    assert bucketed(valid.normalized_uris) and len(valid.normalized_uris) > 1
    assert all("/normalized/bucket=" in u for u in valid.normalized_uris)
    work = tmp_path / "first"
    result = diff(valid, None, T0, str(work))
    assert result.view is not None and result.changes_uris == []
    assert result.diffed_uris == list(valid.normalized_uris)
    assert not (work / "diffed").exists() and not (work / "changes").exists()
    view = DiffedView.from_json(result.view)
    assert view is not None
    con = sql.connect(memory_limit="512MB", threads=1)
    register_diffed(con, "diffed", result.diffed_uris, view)
    got = con.sql("SELECT * FROM diffed ORDER BY url")
    expected = as_read_back(diff_relation(sql.connect(), valid, None, T0)).order("url")
    assert tuple(got.columns) == DIFFED_COLUMNS == tuple(expected.columns)
    assert got.types == expected.types
    assert got.fetchall() == expected.fetchall()
    assert result.added == len(got.fetchall()) > 1_900
    assert [list(r) for r in view.section_stats] == [list(r) for r in con.sql(
        "SELECT section, count(*), min(url), max(url) FROM diffed GROUP BY ALL ORDER BY ALL"
    ).fetchall()]
    # Load's counts by section give the same view and counts, where no row is news and no
    # lastmod is after the run's time; else the diff makes its pass.
    stats = loaded.first_run_sections
    assert stats is not None and first_run_stats(stats, T0, news=False) is not None
    from_load = diff(valid, None, T0, str(tmp_path / "from-load"), section_stats=stats)
    assert from_load.view == result.view and from_load.counts() == result.counts()
    newest = max(datetime.fromisoformat(r[4]) for r in stats if r[4] is not None)
    assert first_run_stats(stats, newest, news=False) is not None
    assert first_run_stats(stats, newest - timedelta(seconds=1), news=False) is None
    assert first_run_stats(stats, T0, news=True) is None
    # A section's rows are all in the buckets files_of_sections gives for it.
    for section, *_ in view.section_stats:
        files = files_of_sections(con, result.diffed_uris, [section], view)
        assert 0 < len(files) < len(result.diffed_uris)
        register_diffed(con, "picked", files, view)
        assert con.sql("SELECT count(*) FROM picked WHERE section = $s", params={"s": section}
                       ).fetchall() == con.sql("SELECT count(*) FROM diffed WHERE section = $s",
                                               params={"s": section}).fetchall()
    # The news section's rows come from any bucket: every file is read for it.
    assert NEWS_SECTION not in view.section_buckets
    assert files_of_sections(con, result.diffed_uris, [NEWS_SECTION], view) == \
        result.diffed_uris


def test_a_first_run_in_slices_publishes_what_its_written_diffed_rows_publish(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan slices reading their buckets through the diff's query (one partition) publish
    what slices reading written diffed rows (two forced partitions) do: fresh news articles
    from every bucket, and a section whose path slugs to the news section's own name."""
    from pipeline.plan import slices

    picked: list[tuple[int, list[str]]] = []
    real_pick = slices.files_of_sections
    monkeypatch.setattr(slices, "files_of_sections",
                        lambda con, uris, sections, view: picked.append(
                            (len(uris), real_pick(con, uris, sections, view))) or picked[-1][1])
    table = first_inventory(tmp_path)
    rows = [{**r, "url": f"{SITE}Google-News/{i}"} for i, r in enumerate(table.to_pylist()[:300])]
    table = pa.concat_tables([table, pa.Table.from_pylist(rows, schema=table.schema)])
    inv = tmp_path / "inv.parquet"
    pq.write_table(table, inv)
    outs = {}
    for partitions in (None, 2):
        out = str(tmp_path / f"out-{partitions}")
        run(RunOptions(inventory=str(inv), site_url=SITE, out=out, limits=LIMITS, run_time=T0,
                       diff_partitions=partitions, plan_slice_rows=1_500, feed_days=7,
                       report=False))
        outs[partitions] = published(out)
    assert outs[None] == outs[2]
    assert outs[None]["counts"]["news_articles"] > 0
    assert any("google-news" in f[0] for f in outs[None]["files"])
    view_picks = [(n, files) for n, files in picked
                  if any("/normalized/bucket=" in u for u in files)]
    assert len(view_picks) >= 5  # the first run's slices, in one partition
    assert any(len(files) < n for n, files in view_picks)  # its own buckets only
    assert any(len(files) == n for n, files in view_picks)  # the news section's: all


def test_load_cuts_its_rows_by_the_diff_partitions(tmp_path: Path) -> None:
    """Told the diff's partitions (from the inventory's row count), load writes the
    normalised rows cut by them, and each diff partition reads its own files only: the
    same rows, counts and changes as from one file; diffed in another number of
    partitions, every file is read and the result is still the same."""
    snapshot, inv, second = published_then_second(tmp_path)
    whole = load(str(inv), SITE, str(tmp_path / "whole"))
    asked: list[int] = []
    cut = load(str(inv), SITE, str(tmp_path / "cut"),
               diff_partitions=lambda rows: asked.append(rows) or 3)
    assert asked == [second.num_rows]
    assert (whole.split, len(whole.normalized_uris), cut.split) == (1, 1, 3)
    assert (cut.input_rows, cut.valid_rows, cut.rejected, cut.field_issues) == (
        whole.input_rows, whole.valid_rows, whole.rejected, whole.field_issues)

    con = sql.connect(memory_limit="512MB", threads=1)
    for p in range(3):  # each partition's files hold exactly its rows
        own = cut.valid.normalized_files(p, 3)
        assert own and all(f"/diff_partition={p}/" in u for u in own)
        register_parquet(con, "own", own)
        assert con.sql(f"SELECT count(*) FILTER (WHERE url_hash % 3 <> {p}) FROM own"
                       ).fetchall() == [(0,)]
    assert cut.valid.normalized_files(0, 2) == list(cut.normalized_uris)  # another cut: all

    for partitions in (3, 2):
        parts = combine([diff(cut.valid, snapshot, T1, str(tmp_path / f"cut{partitions}"),
                              partition=p, partitions=partitions)
                         for p in range(partitions)])
        one = diff(whole.valid, snapshot, T1, str(tmp_path / f"whole{partitions}"))
        assert parts.counts() == one.counts() and parts.removed > 0 and parts.added > 0
        assert sorted_rows(con, parts.diffed_uris) == sorted_rows(con, one.diffed_uris)
        assert sorted_rows(con, parts.changes_uris) == sorted_rows(con, one.changes_uris)


def test_the_snapshot_cut_by_partition_diffs_as_the_whole(tmp_path: Path) -> None:
    """split_snapshot writes each partition's snapshot rows (previous_partition's cut) and
    counts them as previous_partition_rows does; each partition diffed from its own files
    gives what one partition of the whole snapshot gives, removed URLs included."""
    from pipeline.diff import split_snapshot

    snapshot, inv, _ = published_then_second(tmp_path)
    valid = load(str(inv), SITE, str(tmp_path / "load"), diff_partitions=lambda rows: 3).valid

    files, counts = split_snapshot(snapshot, 3, str(tmp_path / "work"))
    assert counts == previous_partition_rows(snapshot, 3) and min(counts) > 0
    con = sql.connect(memory_limit="512MB", threads=1)
    register_parquet(con, "whole", [snapshot])
    for p in range(3):
        assert files[p] and all(f"/diff_partition={p}/" in u for u in files[p])
        register_parquet(con, "own", files[p])
        assert con.sql("SELECT * EXCLUDE (diff_partition) FROM own ORDER BY url").fetchall() == \
            con.sql(f"SELECT * FROM whole WHERE hash(url) % 3 = {p} ORDER BY url").fetchall()

    cut = combine([diff(valid, snapshot, T1, str(tmp_path / "cut"), partition=p, partitions=3,
                        previous_rows=counts[p], previous_files=files[p]) for p in range(3)])
    whole = combine([diff(valid, snapshot, T1, str(tmp_path / "whole"), partition=p,
                          partitions=3) for p in range(3)])
    assert cut.counts() == whole.counts() and cut.removed > 0 and cut.unchanged > 0
    assert sorted_rows(con, cut.diffed_uris) == sorted_rows(con, whole.diffed_uris)
    assert sorted_rows(con, cut.changes_uris) == sorted_rows(con, whole.changes_uris)
    # A partition without snapshot rows has no files: an empty snapshot side, all added.
    empty = diff(valid, snapshot, T1, str(tmp_path / "empty"), partition=0, partitions=3,
                 previous_files=[])
    assert (empty.unchanged, empty.changed, empty.removed) == (0, 0, 0) and empty.added > 0


def test_valid_rows_from_a_load_json_written_before_the_cut() -> None:
    """A run begun by an earlier version (its load.json names one `normalized_uri`) resumes:
    its diff partitions read that one file, filtered, as before."""
    from pipeline.load import ValidRows

    valid = ValidRows.from_json({"normalized_uri": "/w/normalized.parquet",
                                 "duplicates_uri": "/w/duplicates.parquet",
                                 "site_prefix": SITE, "section_depth": 1,
                                 "constant_columns": ["false AS x"]})
    assert (valid.normalized_uris, valid.split, valid.constant_columns) == (
        ("/w/normalized.parquet",), 1, ("false AS x",))
    assert valid.normalized_files(1, 3) == ["/w/normalized.parquet"]
    cut = ValidRows.from_json({**asdict(valid), "normalized_uris": [
        f"/w/normalized/diff_partition={p}/data_0.parquet" for p in range(3)], "split": 3})
    assert cut.normalized_files(1, 3) == ["/w/normalized/diff_partition=1/data_0.parquet"]
    assert cut.normalized_files(1, 2) == list(cut.normalized_uris)
    # a partition that got no row: one file of another, whose rows the diff filters out
    gap = replace(cut, normalized_uris=(cut.normalized_uris[0], cut.normalized_uris[2]))
    assert gap.normalized_files(1, 3) == [cut.normalized_uris[0]]


@pytest.mark.parametrize("partitions", [8, 4])  # 8: the snapshot cut by them too
def test_a_partition_without_a_row_diffs_to_nothing(tmp_path: Path, partitions: int) -> None:
    """10 URLs in 8 partitions leave some without a row: a first run and an incremental run
    publish what one partition publishes."""
    inv = tmp_path / "inv.parquet"
    urls = [f"{SITE}a/{i}" for i in range(10)]
    pq.write_table(pa.table({"url": urls}), inv)
    con = sql.connect(memory_limit="256MB", threads=1)
    register_parquet(con, "inv", [str(inv)])
    assert sql.scalar(con, f"SELECT count(DISTINCT hash(url) % {partitions}) FROM inv"
                      ) < partitions  # some partition gets no row

    def runs(out: Path, n: int, first_n: int | None = None) -> list[dict[str, Any]]:
        first = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0,
                               diff_partitions=first_n or n))
        pq.write_table(pa.table({"url": urls[:7] + [f"{SITE}b/{i}" for i in range(4)]}), inv)
        second = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T1,
                                diff_partitions=n))
        pq.write_table(pa.table({"url": urls}), inv)
        return [first, second]

    whole = runs(tmp_path / "whole", 1)
    for name, cut in (("cut", runs(tmp_path / "cut", partitions)),  # first run and next
                      ("next", runs(tmp_path / "next", partitions, first_n=1))):  # next only
        assert [r["counts"]["published"] for r in cut] == [10, 11]
        assert cut[1]["counts"]["removed"] == 3 and cut[1]["counts"]["added"] == 4
        for a, b in zip(cut, whole, strict=True):
            assert {k: v for k, v in a["counts"].items() if k != "diff_partitions"} == {
                k: v for k, v in b["counts"].items() if k != "diff_partitions"}
        assert read_output(str(tmp_path / name)).locs == read_output(str(tmp_path / "whole")).locs
