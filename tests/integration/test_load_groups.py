"""Load by groups of inventory files and its duplicate search by parts (the DAG's
load_groups, normalize, dedupe_parts, dedupe and load tasks): the same rows, counts,
duplicates and rejects as one load of every file, each group reads only its own files and
each dedupe part only its own partitions."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import steps
from pipeline.diffed import register_valid
from pipeline.load import (
    GroupResult,
    LoadPlan,
    LoadResult,
    combine_groups,
    dedupe_part,
    load,
    load_group,
    plan_load,
)
from pipeline.parquet import register_parquet
from pipeline.run import run
from pipeline.settings import RunOptions
from tests.output_check import read_output

pytestmark = pytest.mark.integration

SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
ALT = pa.struct([("hreflang", pa.string()), ("href", pa.string())])


def _strings(values: list[bytes | None]) -> pa.Array:
    return pa.array(values, pa.binary()).view(pa.string())  # written as is, unchecked


def write_inventory(folder: Path, *, bad_utf8: bool = True) -> Path:
    """Six files in two Hive folders, 1,800 rows: duplicates within and across files (the
    newest lastmod wins, then the first row of one content), rejects, bad fields, a file
    without the `priority` column, hreflang sets that name pages of other files, and (with
    `bad_utf8`) a file with a string that is not UTF-8."""
    def url(i: int) -> str:
        return f"{SITE}{'shop' if i % 3 else 'news'}/c{i % 7}/item-{i}"

    for n in range(6):
        rows = range(n * 300, n * 300 + 300)
        urls = [url(i).encode() for i in rows]
        urls[5] = url((n * 300 + 301) % 1800).encode()  # another file's URL
        urls[6] = urls[7]  # the same URL twice in one file
        urls[8] = f"ftp://x.example.com/{n}".encode()  # rejected: not_http
        if bad_utf8 and n == 4:
            urls[9] = SITE.encode() + b"shop/\xff\xfe"
        lastmod = [(T0 - timedelta(days=(i * 7) % 30)).isoformat() for i in rows]
        lastmod[10] = "yesterday"  # dropped and counted: lastmod_invalid
        columns: dict[str, Any] = {
            "url": _strings(urls), "lastmod": pa.array(lastmod),
            "changefreq": pa.array(["daily" if i % 5 else "sometimes" for i in rows]),
            "alternates": pa.array([
                [{"hreflang": "en", "href": url(i)}, {"hreflang": "de", "href": url((i + 300) % 1800)}]
                if i % 50 == 1 else None for i in rows], pa.list_(ALT))}
        if n != 2:  # one file without priority: read as NULL
            columns["priority"] = pa.array([0.5 if i % 11 else 7.0 for i in rows])
        target = folder / f"shop={'a' if n < 3 else 'b'}" / f"{n}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), target)
    return folder


def combined(plan: LoadPlan, results: list[GroupResult], work: str) -> LoadResult:
    """The plan's dedupe parts, each in its own connection and in reverse order, then
    combined."""
    ordered = sorted(results, key=lambda r: r.group)
    dedupes = [dedupe_part(plan, ordered, p, plan.dedupe_parts, work)
               for p in reversed(range(plan.dedupe_parts))]
    return combine_groups(plan, ordered, dedupes[::-1], work)


def grouped(inventory: Path, work: Path, group_rows: int, dedupe_rows: int = 300,
            **options: Any) -> LoadResult:
    """load in groups of about `group_rows` rows, each in its own connection and in
    reverse order (as mapped tasks run: anywhere, in any order), its duplicates found in
    parts of about `dedupe_rows` rows, then combined."""
    plan = plan_load(str(inventory), SITE, group_rows=group_rows, dedupe_rows=dedupe_rows,
                     **options)
    assert len(plan.groups) > 1
    results = [load_group(plan, g, str(work)) for g in reversed(range(len(plan.groups)))]
    return combined(plan, results, str(work))


def valid_rows(result: LoadResult) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    register_valid(con, "valid", result.valid)
    return con.sql("SELECT url, lastmod, changefreq, priority, section, ext_xml "
                   "FROM valid ORDER BY url").fetchall()


def rejects(result: LoadResult) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    register_parquet(con, "rejects", [result.rejects_uri])  # local or S3
    return con.sql("SELECT * FROM rejects ORDER BY row_id").fetchall()


@pytest.mark.parametrize("options", [
    {"bucket_sections": True, "row_hashes": True},  # a first run: buckets of sections
    {"diff_partitions": lambda rows: 3, "row_hashes": True},  # a nightly: 3 diff partitions
    {},  # one partition, not cut
], ids=["first-run", "partitions", "uncut"])
def test_groups_of_files_load_what_one_load_of_every_file_loads(
        tmp_path: Path, options: dict[str, Any]) -> None:
    inventory = write_inventory(tmp_path / "inv")
    whole = load(str(inventory), SITE, str(tmp_path / "whole"), **options)
    parts = grouped(inventory, tmp_path / "groups", 500, **options)

    assert whole.input_rows == parts.input_rows == 1_800
    assert whole.rejected["duplicate"] == 12 and whole.rejected["not_http"] == 6
    assert whole.rejected["invalid_utf8"] == 1
    assert whole.field_issues["lastmod_invalid"] == 6
    for name in ("valid_rows", "rejected", "field_issues", "row_sums", "section_sums",
                 "first_run_sections", "split", "constant_columns"):
        assert getattr(parts, name) == getattr(whole, name), name
    assert whole.field_issues["alternates_not_reciprocal"] > 0
    assert valid_rows(parts) == valid_rows(whole)
    assert rejects(parts) == rejects(whole)
    # each group wrote its own files, side by side in the same partitions
    assert len(parts.normalized_uris) > len(whole.normalized_uris)
    assert {Path(u).name.split("-")[0] for u in parts.normalized_uris} >= {"g00000", "g00003"}


@pytest.mark.parametrize("options, parts", [
    ({"bucket_sections": True}, 6), ({"diff_partitions": lambda rows: 4}, 4), ({}, 1)],
    ids=["first-run", "partitions", "uncut"])
def test_each_dedupe_part_reads_its_own_partitions_once(
        tmp_path: Path, options: dict[str, Any], parts: int) -> None:
    """The duplicate search in parts of about 300 rows (as many as the cut allows): each
    part reads the files of its own partitions, every normalised row is read by one part,
    and the parts' duplicates are one search's."""
    inventory = write_inventory(tmp_path / "inv", bad_utf8=False)
    plan = plan_load(str(inventory), SITE, group_rows=500, dedupe_rows=300, **options)
    assert plan.dedupe_parts == parts
    work = str(tmp_path / "work")
    results = sorted((load_group(plan, g, work) for g in range(len(plan.groups))),
                     key=lambda r: r.group)
    dedupes = [dedupe_part(plan, results, p, parts, work) for p in range(parts)]
    every = [u for r in results for u in r.normalized_uris]
    assert sum(d.files for d in dedupes) == len(every)
    con = duckdb.connect()
    register_parquet(con, "normalized", every)
    with_hash, rows = con.sql("SELECT count(url_hash), count(*) FROM normalized").fetchall()[0]
    read = sum(d.rows for d in dedupes)
    assert with_hash <= read <= rows  # each row once (rejects with no hash in files of theirs)
    if parts > 1:  # no part reads them all; a bucket holds whole sections (shop: 1,200)
        assert max(d.rows for d in dedupes) <= 1_200, [d.rows for d in dedupes]
    if "diff_partitions" in options:  # hash partitions: each part within 2x its share
        assert max(d.rows for d in dedupes) <= 2 * rows / parts, [d.rows for d in dedupes]
    found = sorted(row_id for d in dedupes if d.duplicates_uri
                   for (row_id,) in duckdb.sql(
                       f"SELECT row_id FROM read_parquet('{d.duplicates_uri}')").fetchall())
    whole = load(str(inventory), SITE, str(tmp_path / "whole"), **options)
    assert found == [r for (r,) in duckdb.sql(
        f"SELECT row_id FROM read_parquet('{whole.duplicates_uri}') ORDER BY 1").fetchall()]
    assert len(found) == 12
    # the rejects file is in row order, whatever the cut
    ids = [r[0] for r in duckdb.sql(
        f"SELECT row_id FROM read_parquet('{combine_groups(plan, results, dedupes, work).rejects_uri}')"
    ).fetchall()]
    assert ids == sorted(ids) and len(ids) == 18


def test_row_hashes_of_groups_without_cleaning_are_the_inputs(tmp_path: Path) -> None:
    """Without a row to clean, the groups' sums are the input's (its identity, which the
    next run compares), as one load's are; a group that cleaned its files gives none."""
    inventory = write_inventory(tmp_path / "inv", bad_utf8=False)
    whole = load(str(inventory), SITE, str(tmp_path / "whole"), row_hashes=True)
    parts = grouped(inventory, tmp_path / "groups", 700, row_hashes=True)
    assert whole.row_sums is not None and parts.row_sums == whole.row_sums
    dirty = grouped(write_inventory(tmp_path / "dirty"), tmp_path / "dirty-groups", 700,
                    row_hashes=True)
    assert dirty.row_sums is None


def test_a_retried_group_replaces_its_own_files(tmp_path: Path) -> None:
    """A group run twice (a retried task) leaves one copy of its rows, and the other
    groups' files alone."""
    inventory = write_inventory(tmp_path / "inv", bad_utf8=False)
    plan = plan_load(str(inventory), SITE, group_rows=500, diff_partitions=lambda rows: 2)
    work = str(tmp_path / "work")
    first = [load_group(plan, g, work) for g in range(len(plan.groups))]
    again = load_group(plan, 1, work)
    assert again.normalized_uris == first[1].normalized_uris
    on_disk = sorted(str(p) for p in (tmp_path / "work" / "normalized").rglob("*.parquet"))
    assert on_disk == sorted(u for r in first for u in r.normalized_uris)
    result = combined(plan, first, work)
    assert result.input_rows == 1_800 and result.rejected["duplicate"] == 12


def _manifest_files(out: Path) -> dict[str, str]:
    """Each published file's sha256, by its key (the generation's own folder left out)."""
    found = read_output(str(out))
    return {k.split("/", 1)[-1]: hashlib.sha256((out / k).read_bytes()).hexdigest()
            for k in found.files}


def test_dag_order_groups_publish_what_the_cli_publishes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The DAG's steps (load_groups, normalize in groups of files in any order,
    dedupe_parts, dedupe in parts in any order, load, then the rest as the CLI runs them)
    publish the CLI's files; each normalize task reads its own files' rows only."""
    inventory = write_inventory(tmp_path / "inv")
    opts = RunOptions(inventory=str(inventory), site_url=SITE, out=str(tmp_path / "cli"),
                      run_time=T0, max_reject_share=0.5, report=False)
    cli = run(opts)
    assert cli["published"]

    monkeypatch.setattr("pipeline.load.DEDUPE_PASS_ROWS", 600)
    dag = dataclasses.replace(opts, out=str(tmp_path / "dag"), load_group_rows=500,
                              work=str(tmp_path / "work"), run_id="r1")
    ctx = steps.begin(dag)
    groups = steps.load_groups_step(ctx)
    assert groups == [0, 1, 2, 3, 4, 5]
    with pytest.raises(RuntimeError, match=r"load group\(s\) \[0, 1, 2, 3, 4\] of 6"):
        steps.load_group_step(ctx, 5) and steps.load_combine_step(ctx)
    counts = [steps.load_group_step(ctx, g) for g in reversed(groups[:-1])]
    assert all(c.io.rows_read == c.rows == 300 and c.io.files_read == 1 for c in counts)
    parts = steps.dedupe_parts_step(ctx)
    assert parts == [0, 1, 2]  # DEDUPE_PASS_ROWS of 600: a part per 600 rows, of 64 buckets
    with pytest.raises(RuntimeError, match=r"dedupe part\(s\) \[0, 1\] of 3"):
        steps.dedupe_step(ctx, 2) and steps.load_combine_step(ctx)
    found = [steps.dedupe_step(ctx, p) for p in reversed(parts[:-1])]
    assert sum(f.duplicates for f in found) + steps.dedupe_step(ctx, 2).duplicates == \
        cli["counts"]["rejected"]["duplicate"]
    assert all(f.io.rows_read == f.rows for f in found)
    loaded = steps.load_combine_step(ctx)
    assert loaded.input_rows == 1_800 and loaded.rejected == cli["counts"]["rejected"]
    steps.diff_step(ctx)
    steps.plan_step(ctx)
    rendered = steps.render_step(ctx, None)
    steps.state_step(ctx)
    published = steps.publish_step(ctx, [rendered.uri])
    assert published.published
    steps.finish(ctx)
    assert read_output(str(tmp_path / "dag")).locs == read_output(str(tmp_path / "cli")).locs
    assert _manifest_files(tmp_path / "dag") == _manifest_files(tmp_path / "cli")


def test_groups_of_files_on_s3_load_what_one_load_does(s3_bucket: Any, tmp_path: Path) -> None:
    """On S3 (a pyarrow dataset, numbered by a scan): the groups keep the inventory's Hive
    folders (`shop`, part of each row's hash) and their rows' order, so the same rows, the
    same duplicates and the same identity."""
    inventory = write_inventory(tmp_path / "inv", bad_utf8=False)
    for path in sorted(inventory.rglob("*.parquet")):
        s3_bucket.client.upload_file(str(path), s3_bucket.name,
                                     f"inv/{path.relative_to(inventory)}")
    options: dict[str, Any] = {"diff_partitions": lambda rows: 2, "row_hashes": True}
    whole = load(s3_bucket.url("inv/"), SITE, s3_bucket.url("whole"), **options)
    plan = plan_load(s3_bucket.url("inv/"), SITE, group_rows=500, dedupe_rows=900, **options)
    assert plan.dedupe_parts == 2
    results = [load_group(plan, g, s3_bucket.url("groups")) for g in reversed(range(6))]
    parts = combined(plan, results, s3_bucket.url("groups"))
    assert whole.row_sums is not None and "shop" in whole.row_sums[3]
    for name in ("input_rows", "valid_rows", "rejected", "field_issues", "row_sums",
                 "section_sums"):
        assert getattr(parts, name) == getattr(whole, name), name
    assert valid_rows(parts) == valid_rows(whole)
    # row ids differ (each group numbers from its first file; a duplicate's winner's too),
    # their order does not
    assert [r[1:7] + r[8:] for r in rejects(parts)] == [r[1:7] + r[8:] for r in rejects(whole)]
    assert all(r[7] is not None for r in rejects(parts) if r[1] == "duplicate")


def test_a_column_the_first_file_on_s3_lacks_is_read_from_the_others(
        s3_bucket: Any, tmp_path: Path) -> None:
    """On S3 the files' columns are all of theirs, as locally: the first file has no
    `priority` and a `lastmod` of dates, the second has both; its priorities are kept and
    the first file's rows read NULL (pyarrow's dataset alone takes the first file's)."""
    first = tmp_path / "a.parquet"
    second = tmp_path / "b.parquet"
    pq.write_table(pa.table({"url": [f"{SITE}a/{i}" for i in range(3)],
                             "lastmod": ["2026-12-01"] * 3}), first)
    pq.write_table(pa.table({"url": [f"{SITE}b/{i}" for i in range(3)],
                             "lastmod": ["2026-12-02"] * 3, "priority": [0.1, 0.2, 0.3]}), second)
    for path in (first, second):
        s3_bucket.client.upload_file(str(path), s3_bucket.name, f"inv/{path.name}")
    for options in ({}, {"row_hashes": True}):
        on_s3 = load(s3_bucket.url("inv/"), SITE, s3_bucket.url("work"), **options)
        local = load(str(tmp_path / "*.parquet"), SITE, str(tmp_path / "work"), **options)
        assert valid_rows(on_s3) == valid_rows(local)
        assert [r[3] for r in valid_rows(on_s3)] == [None, None, None, 0.1, 0.2, 0.3]
        assert on_s3.row_sums == local.row_sums
