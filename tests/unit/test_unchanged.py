"""The input identity that lets an unchanged run stop after begin (pipeline.unchanged)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import unchanged

T = datetime(2026, 12, 1, tzinfo=UTC)
OPTIONS = {"site_url": "https://www.example.com/", "format": "xml"}


def _inventory(path: Path, urls: list[str], lastmods: list[datetime | None],
               **more: pa.Array) -> str:
    pq.write_table(pa.table({"url": urls, "lastmod": pa.array(lastmods, pa.timestamp("us", "UTC")),
                             **more}), path)
    return str(path)


def test_the_same_rows_in_another_order_or_layout_are_the_same_input(tmp_path: Path) -> None:
    urls = [f"https://www.example.com/p/{i}" for i in range(1_000)]
    lastmods: list[datetime | None] = [T] * 999 + [None]
    one = unchanged.input_identity([_inventory(tmp_path / "a.parquet", urls, lastmods)], OPTIONS)
    assert one is not None and len(one) == 32
    shuffled = unchanged.input_identity(
        [_inventory(tmp_path / "b.parquet", urls[::-1], lastmods[::-1])], OPTIONS)
    # two files (another layout) holding the same rows
    (tmp_path / "c").mkdir()
    split = unchanged.input_identity(
        [_inventory(tmp_path / "c" / "1.parquet", urls[:300], lastmods[:300]),
         _inventory(tmp_path / "c" / "2.parquet", urls[300:], lastmods[300:])], OPTIONS)
    assert one == shuffled == split


def test_any_change_of_rows_or_options_is_another_input(tmp_path: Path) -> None:
    urls = [f"https://www.example.com/p/{i}" for i in range(100)]
    base = _inventory(tmp_path / "a.parquet", urls, [T] * 100)
    ident = unchanged.input_identity([base], OPTIONS)
    later = [T] * 99 + [datetime(2026, 12, 2, tzinfo=UTC)]
    new_url = [*urls[:99], "https://www.example.com/p/new"]
    # pairs of equal rows, as many rows: a sum of row hashes tells them apart (an XOR
    # of them would cancel each pair out)
    pair_x = [*urls, "https://www.example.com/p/x", "https://www.example.com/p/x"]
    pair_y = [*urls, "https://www.example.com/p/y", "https://www.example.com/p/y"]
    others = {
        unchanged.input_identity([_inventory(tmp_path / "b.parquet", urls, later)], OPTIONS),
        unchanged.input_identity([_inventory(tmp_path / "c.parquet", new_url, [T] * 100)],
                                 OPTIONS),
        unchanged.input_identity([_inventory(tmp_path / "d.parquet", pair_x, [T] * 102)],
                                 OPTIONS),
        unchanged.input_identity([_inventory(tmp_path / "f.parquet", pair_y, [T] * 102)],
                                 OPTIONS),
        unchanged.input_identity([base], {**OPTIONS, "format": "txt"}),
        unchanged.input_identity([_inventory(tmp_path / "e.parquet", urls, [T] * 100,
                                             priority=pa.array([0.5] * 100))], OPTIONS),
    }
    assert ident not in others and len(others) == 6


def test_an_inventory_with_news_is_never_unchanged(tmp_path: Path) -> None:
    news = pa.array([{"title": "t"}] * 2)
    path = _inventory(tmp_path / "n.parquet", ["https://www.example.com/a", "https://www.example.com/b"],
                      [T, T], news=news)
    assert unchanged.input_identity([path], OPTIONS) is None


def test_why_not_skipped() -> None:
    live: dict = {"generation": "g1", "counts": {"lastmod_clamped": 0}}

    def why(live_id: str | None, ident: str | None, m: dict | None = live, force: bool = False,
            missing: int = 0) -> str | None:
        return unchanged.why_not_skipped(m, live_id, ident, force=force,  # type: ignore[arg-type]
                                         missing_files=missing)

    assert why("abc", "abc") is None
    assert why("abc", "abc", force=True) == "--force"
    assert why("abc", "abc", m=None)
    assert why("abc", None)  # news, or rows that need cleaning
    assert why("abc", "abd")
    assert why(None, "abc")  # nothing recorded for the live generation
    assert why("abc", "abc", missing=2)
    clamped = {**live, "counts": {"lastmod_clamped": 3}}
    assert "clamped" in (why("abc", "abc", m=clamped) or "")


def test_work_regardless_needs_no_identity() -> None:
    """What makes a run do the work whatever its input's identity: then begin takes none
    (load does)."""
    live: dict = {"generation": "g1", "counts": {"lastmod_clamped": 0, "input_rows": 100}}

    def regardless(live_id: str | None = "abc", m: dict | None = live, rows: int | None = 100,
                   **kw: object) -> str | None:
        return unchanged.work_regardless(m, live_id, rows=rows,  # type: ignore[arg-type]
                                         **{"force": False, "missing_files": 0, **kw})

    assert regardless() is None  # only the identity can tell
    assert regardless(rows=None) is None  # the row count unknown: the identity tells
    assert regardless(m=None) == "no live generation"
    assert regardless(None) == "no input identity is recorded for the live generation"
    assert regardless(rows=101) == "the inventory has 101 rows, the live generation's input 100"
    assert regardless(force=True) == "--force"
    assert regardless(rebuild=True) == "--rebuild"
    assert regardless(missing_files=2)
    assert "clamped" in (regardless(m={**live, "counts": {"lastmod_clamped": 1}}) or "")
    # a live manifest without the input's rows: the identity tells
    assert regardless(m={"generation": "g1", "counts": {}}, rows=5) is None
    # why_not_skipped gives the same reasons first
    assert unchanged.why_not_skipped(live, "abc", "abc", force=False, missing_files=0,
                                     rows=101) == regardless(rows=101)


def test_load_sums_the_rows_as_begin_does(tmp_path: Path) -> None:
    """load's sums of its rows' hashes (`row_hashes`) are row_sums' numbers, Hive partition
    columns, rejected and duplicate rows included: the identity is the same either way."""
    from pipeline.load import load

    inv = tmp_path / "inv"
    for shop, first in (("a", 0), ("b", 50)):
        (inv / f"shop={shop}").mkdir(parents=True)
        urls = [f"https://www.example.com/p/{i}" for i in range(first, first + 50)]
        urls[3] = "ftp://elsewhere/x"  # rejected
        urls[4] = urls[5]  # a duplicate
        pq.write_table(pa.table({"url": urls, "lastmod": pa.array([T] * 50, pa.timestamp(
            "us", "UTC")), "priority": pa.array([0.5] * 49 + [None])}),
            inv / f"shop={shop}" / "0.parquet")
    files = sorted(str(p) for p in inv.rglob("*.parquet"))
    loaded = load(str(inv), "https://www.example.com/", str(tmp_path / "work"), row_hashes=True)
    assert loaded.row_sums is not None and loaded.row_sums[3] == ["url", "lastmod", "priority",
                                                                  "shop"]
    assert loaded.row_sums == unchanged.row_sums(files)
    assert unchanged.identity_of(loaded.row_sums, OPTIONS) == unchanged.input_identity(
        files, OPTIONS)
    # not asked: no sums, and the rows' files hold no hash columns
    plain = load(str(inv), "https://www.example.com/", str(tmp_path / "work2"))
    assert plain.row_sums is None
    written = pq.read_schema(plain.normalized_uris[0]).names
    assert unchanged.ROW_HASH_COLUMN not in written


def test_the_record_applies_to_its_generation_only(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    assert unchanged.recorded(state, "g1") is None
    unchanged.record(state, "g1", "abc")
    assert unchanged.recorded(state, "g1") == "abc"
    assert unchanged.recorded(state, "g2") is None  # a rollback or another run's publish
    assert unchanged.recorded(state, None) is None
    unchanged.record(state, "g2", None)  # no identity: the record stays as it was
    assert unchanged.recorded(state, "g1") == "abc"


def _shard(section: str, number: int) -> dict[str, object]:
    from dataclasses import asdict

    from pipeline.plan.model import Shard

    return asdict(Shard(section=section, shard=number, urls=10, body_bytes=1000,
                        lastmod="2026-12-01T00:00:00Z", digest=f"{number:016x}",
                        changed_rows=3, part=0, row_start=0))


def test_each_sections_rows_from_load(tmp_path: Path) -> None:
    """load's sums by section: the rows that publish in it and its duplicates, apart; the
    rejects in none; the same rows in another order the same sums, a repeated URL's rows
    that tie on lastmod included (the tie goes by content, not by order)."""
    from pipeline.load import load

    def sums(urls: list[str], lastmods: list[datetime | None], priorities: list[float],
             name: str) -> dict[str, tuple]:
        inv = _inventory(tmp_path / f"{name}.parquet", urls, lastmods,
                         priority=pa.array(priorities))
        loaded = load(inv, "https://www.example.com/", str(tmp_path / name), row_hashes=True)
        assert loaded.section_sums is not None
        return {s[0]: s[1:] for s in loaded.section_sums}

    urls = [f"https://www.example.com/{s}/{i}" for s in ("a", "b") for i in range(20)]
    # a/3 again, older (it never publishes), a reject and the site's root page
    urls += ["https://www.example.com/a/3", "ftp://www.example.com/b/1", "https://www.example.com/"]
    lastmods: list[datetime | None] = [T] * 40 + [datetime(2026, 1, 1, tzinfo=UTC), T, None]
    priorities = [0.5] * 40 + [0.8, 0.5, 0.5]
    one = sums(urls, lastmods, priorities, "one")
    assert sorted(one) == ["a", "b", "root"]
    assert one["a"][0] == 20 and one["b"][0] == 20 and one["root"][0] == 1  # rows published
    assert one["a"][3] == T.isoformat()  # the newest lastmod
    assert sums(urls[::-1], lastmods[::-1], priorities[::-1], "reversed") == one
    # both rows of a/3 of the same time: the same one publishes in either order
    tie = lastmods[:40] + [T] + lastmods[41:]
    first = sums(urls, tie, priorities, "tie")
    other = sums(urls[::-1], tie[::-1], priorities[::-1], "tie-reversed")
    assert other == first and first["a"][:3] != one["a"][:3] and first["b"] == one["b"]
    assert unchanged.section_identities(
        [("a", 1, 2, 3, None)], (1, 2, 3, ["url", "news"]), OPTIONS) is None  # news


def test_which_sections_are_unchanged(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    rows = [("a", 10, 1, 2, "2026-11-30T00:00:00+00:00"), ("b", 10, 3, 4, None),
            ("c", 10, 5, 6, "2026-12-01T12:00:00+00:00"), ("d", 10, 7, 8, None)]
    ident = unchanged.section_identities(rows, (40, 16, 20, ["url", "lastmod"]), OPTIONS)
    assert ident is not None and ident["a"]["rows"] == 10
    shards = [_shard("a", 0), _shard("a", 1), _shard("b", 0), _shard("c", 0), _shard("d", 0)]
    recorded = unchanged.sections_to_record(ident, shards)
    assert all(s["part"] is None and s["changed_rows"] == 0
               for r in recorded.values() for s in r["shards"])
    unchanged.record(state, "g1", None, recorded, "2026-12-01T00:00:00+00:00")
    from pipeline.plan.model import Shard

    live = {Shard(**s).key for s in shards} - {Shard(**_shard("d", 0)).key}  # d's file gone
    now = "2026-12-02T00:00:00+00:00"
    found = unchanged.unchanged_sections(ident, state, "g1", live, now)
    # c: a lastmod after the live generation's time; d: a live file missing
    assert sorted(found) == ["a", "b"]
    assert found["a"]["rows"] == 10 and len(found["a"]["shards"]) == 2
    assert unchanged.unchanged_sections(ident, state, "g2", live, now) == {}  # another live
    changed = unchanged.section_identities(
        [("a", 10, 1, 9, rows[0][4]), *rows[1:]], (40, 16, 20, ["url", "lastmod"]), OPTIONS)
    assert sorted(unchanged.unchanged_sections(changed, state, "g1", live, now)) == ["b"]
    other_options = unchanged.section_identities(rows, (40, 16, 20, ["url", "lastmod"]),
                                                 {**OPTIONS, "format": "txt"})
    assert unchanged.unchanged_sections(other_options, state, "g1", live, now) == {}
    # an earlier run's time (a backfill) clamps what the live run did not
    assert sorted(unchanged.unchanged_sections(
        ident, state, "g1", live, "2026-11-29T00:00:00+00:00")) == ["b"]
