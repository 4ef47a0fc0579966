"""sql/feed_entries.sql and sql/indexnow_urls.sql on a few rows; the Atom document itself."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lxml import etree

from pipeline import sql
from pipeline.notify import ATOM_NS, atom_feed, feed_entries

T = [datetime(2026, 12, d, 3, 0, tzinfo=UTC) for d in (3, 2, 1)]  # gen_rank 0, 1, 2
TS = pa.timestamp("s", tz="UTC")


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return sql.connect(memory_limit="256MB", threads=1)


def test_newest_change_wins_and_removed_drop_out(tmp_path: Path) -> None:
    rows = [  # url, change, lastmod, gen_rank
        ("u/a", "changed", T[0], 0), ("u/a", "added", T[2], 2),   # newest: changed
        ("u/b", "removed", None, 0), ("u/b", "added", T[1], 1),   # newest: removed
        ("u/c", "added", datetime(2026, 11, 20, tzinfo=UTC), 1),  # own older lastmod
        ("u/d", "changed", None, 2),                              # no lastmod: gen time
        ("u/e", "added", T[1], 1),
    ]
    generations = []
    for rank in range(3):
        mine = [r for r in rows if r[3] == rank]
        path = tmp_path / f"changes-{rank}.parquet"
        pq.write_table(pa.table({"url": [r[0] for r in mine], "change": [r[1] for r in mine],
                                 "lastmod": pa.array([r[2] for r in mine], TS)}), path)
        generations.append((f"g{rank}", T[rank], str(path)))
    got = feed_entries(generations, 100)
    assert got == [("u/a", "changed", "2026-12-03T03:00:00Z"),
                   ("u/e", "added", "2026-12-02T03:00:00Z"),
                   ("u/c", "added", "2026-11-20T00:00:00Z"),
                   ("u/d", "changed", "2026-12-01T03:00:00Z")]
    assert feed_entries(generations, 2) == got[:2]
    assert feed_entries(generations, 3) == got[:3]


def test_indexnow_urls_lists_every_change_once(con: duckdb.DuckDBPyConnection) -> None:
    con.register("generation_changes", pa.table({
        "url": ["u/b", "u/a", "u/c", None], "change": ["removed", "added", "changed", "added"],
        "lastmod": pa.array([None, T[0], T[0], None], TS)}))
    assert con.sql(sql.load_sql("indexnow_urls")).fetchall() == [("u/a",), ("u/b",), ("u/c",)]


def test_atom_feed_is_well_formed_and_escaped() -> None:
    body = atom_feed(feed_url="https://ex.com/feed.atom", site_url="https://ex.com/",
                     updated="2026-12-03T03:00:00Z",
                     entries=[("https://ex.com/a?x=1&y='2'", "changed", "2026-12-03T03:00:00Z")])
    doc = etree.fromstring(body)
    ns = {"a": ATOM_NS}
    assert doc.findtext("a:id", namespaces=ns) == "https://ex.com/feed.atom"
    assert doc.find("a:link[@rel='self']", ns).get("href") == "https://ex.com/feed.atom"
    entry = doc.find("a:entry", ns)
    assert entry.findtext("a:id", namespaces=ns) == "https://ex.com/a?x=1&y='2'"
    assert entry.find("a:link", ns).get("href") == "https://ex.com/a?x=1&y='2'"
    assert entry.find("a:category", ns).get("term") == "changed"
