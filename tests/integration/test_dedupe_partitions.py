"""Duplicates found partition by partition: every copy of a URL is in one of load's
partitions (diff partitions or buckets of sections), so dedupe reads each row once, a
group of partitions at a time, and keeps the same rows as one pass over every row."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import load as load_module
from pipeline.load import DedupeGroup, LoadResult, dedupe_groups, load

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _inventory(path: Path) -> dict[int, str]:
    """2,796 rows of 800 URLs in 8 sections, 1 to 6 copies each, and 20 rejects, shuffled.
    Returns the row the rule keeps of each URL where it is plain (the newest lastmod; of
    copies of one content without lastmod, the first), by row id; the others tie on
    lastmod with another content each (kept by their content's hash)."""
    rng = random.Random(41)
    rows: list[dict[str, Any]] = []
    for i in range(800):
        url = f"{SITE}s{i % 8}/page-{i}"
        kind = i % 4
        for c in range(1 + i % 6):
            if kind == 0:  # distinct lastmods: the newest wins
                row = {"url": url, "lastmod": T0 + timedelta(hours=rng.randrange(10**6)),
                       "changefreq": "daily", "priority": 0.5}
            elif kind == 1:  # one content, no lastmod: the first wins
                row = {"url": url, "lastmod": None, "changefreq": "weekly", "priority": 0.3}
            elif kind == 2:  # one lastmod, another content each: by content
                row = {"url": url.replace("https://www.", "HTTPS://WWW.") if c % 2 else url,
                       "lastmod": T0, "changefreq": None, "priority": round(0.1 * (c % 10), 1)}
            else:  # one lastmod set newest, others older or none
                row = {"url": url, "lastmod": T0 + timedelta(days=c) if c % 3 else None,
                       "changefreq": "monthly", "priority": None}
            rows.append(row)
    rows += [{"url": "", "lastmod": None, "changefreq": None, "priority": None}] * 20  # rejects
    rng.shuffle(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([
        ("url", pa.string()), ("lastmod", pa.timestamp("us", tz="UTC")),
        ("changefreq", pa.string()), ("priority", pa.float64())])), path)
    kept: dict[str, tuple[int, Any]] = {}
    for row_id, row in enumerate(rows):
        if not row["url"] or "HTTPS://WWW." in row["url"] or row["lastmod"] == T0:
            continue
        key = (row["lastmod"] is not None, row["lastmod"])
        if row["url"] not in kept or key > kept[row["url"]][1]:  # a tie: the first stays
            kept[row["url"]] = (row_id, key)
    return {r: u for u, (r, _) in kept.items()}


def _rejected_duplicates(result: LoadResult) -> list[dict[str, Any]]:
    rejects = pq.read_table(result.rejects_uri).to_pylist()
    return sorted((r for r in rejects if r["reason"] == "duplicate"), key=lambda r: r["row_id"])


def test_many_duplicates_in_many_partitions_keep_the_same_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut in 5 diff partitions or in buckets of sections, with partitions smaller or
    larger than a pass, load keeps the same row of each URL (and rejects the others with
    the same fields) as one pass over every row; each row's hash is read by one group."""
    inv = tmp_path / "inventory.parquet"
    winners = _inventory(inv)
    whole = load(str(inv), SITE, str(tmp_path / "whole"))
    assert whole.dedupe_passes == ((whole.input_rows, 1),)
    reference = _rejected_duplicates(whole)
    assert len(reference) == whole.input_rows - 20 - 800  # all copies but one

    # the plain URLs keep the row their rule picks
    duplicate_ids = {r["row_id"] for r in reference}
    assert len(winners) == 600 and not duplicate_ids & set(winners)

    cuts = {"cut-small": (5, False, 300), "cut-packed": (5, False, 1300),
            "buckets": (1, True, 300), "buckets-packed": (1, True, 100_000)}
    for name, (split, buckets, pass_rows) in cuts.items():
        monkeypatch.setattr(load_module, "DEDUPE_PASS_ROWS", pass_rows)
        got = load(str(inv), SITE, str(tmp_path / name), bucket_sections=buckets,
                   diff_partitions=(lambda rows, s=split: s))
        assert (got.split, got.valid_rows, got.rejected) == (
            split, whole.valid_rows, whole.rejected), name
        assert _rejected_duplicates(got) == reference, name
        assert sorted(pq.read_table(got.duplicates_uri).column("row_id").to_pylist()) == sorted(
            duplicate_ids), name
        # each row is read by one group of whole partitions: as many rows as the input
        assert sum(rows for rows, _ in got.dedupe_passes) == got.input_rows, name
        if pass_rows == 300:  # each partition alone, in passes of its own rows
            assert len(got.dedupe_passes) == len({u.rsplit("/", 2)[1]
                                                  for u in got.normalized_uris}), name
            assert all(passes == -(-rows // 300) for rows, passes in got.dedupe_passes), name
        else:  # partitions put together: fewer groups, each read once
            assert all(passes == 1 for _, passes in got.dedupe_passes), name
            assert len(got.dedupe_passes) < len(got.normalized_uris), name


def test_dedupe_groups_take_whole_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load_module, "DEDUPE_PASS_ROWS", 100)
    rows = {"/w/n/diff_partition=0/a.parquet": 40, "/w/n/diff_partition=0/b.parquet": 30,
            "/w/n/diff_partition=1/a.parquet": 20, "/w/n/diff_partition=2/a.parquet": 250,
            "/w/n/diff_partition=3/a.parquet": 60, "/w/n/diff_partition=NULL/a.parquet": 50}
    groups = dedupe_groups(list(rows), rows.__getitem__)
    assert groups == [
        DedupeGroup(("/w/n/diff_partition=0/a.parquet", "/w/n/diff_partition=0/b.parquet",
                     "/w/n/diff_partition=1/a.parquet"), 90, 1),
        DedupeGroup(("/w/n/diff_partition=2/a.parquet",), 250, 3),
        DedupeGroup(("/w/n/diff_partition=3/a.parquet",), 60, 1),
        DedupeGroup(("/w/n/diff_partition=NULL/a.parquet",), 50, 1)]
    # not cut: one group, in as many passes as before
    assert dedupe_groups(["/w/normalized.parquet"], lambda u: 250) == [
        DedupeGroup(("/w/normalized.parquet",), 250, 3)]
