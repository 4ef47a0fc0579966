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


def test_the_record_applies_to_its_generation_only(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    assert unchanged.recorded(state, "g1") is None
    unchanged.record(state, "g1", "abc")
    assert unchanged.recorded(state, "g1") == "abc"
    assert unchanged.recorded(state, "g2") is None  # a rollback or another run's publish
    assert unchanged.recorded(state, None) is None
    unchanged.record(state, "g2", None)  # no identity: the record stays as it was
    assert unchanged.recorded(state, "g1") == "abc"
