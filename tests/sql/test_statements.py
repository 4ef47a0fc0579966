"""Each SQL statement of sql/ on a few input rows, against the expected output rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pytest

from pipeline import sql

T = datetime(2026, 12, 2, 3, 0, 0, tzinfo=UTC)
EARLIER = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return sql.connect(memory_limit="256MB", threads=1)


def test_dedupe_keeps_newest_lastmod_then_first_row(con: duckdb.DuckDBPyConnection) -> None:
    con.register("normalized", pa.table({
        "row_id": [1, 2, 3, 4, 5, 6],
        "url": ["u1", "u1", "u2", "u2", None, "u3"],
        "reason": [None, None, None, None, "empty", None],
        "lastmod": [EARLIER, T, None, None, None, None],
    }))
    con.execute(sql.load_sql("dedupe_rows"))
    got = con.sql("SELECT row_id, reason FROM classified ORDER BY row_id").fetchall()
    assert got == [(1, "duplicate"), (2, None), (3, None), (4, "duplicate"), (5, "empty"),
                   (6, None)]


def test_valid_rows_sections(con: duckdb.DuckDBPyConnection) -> None:
    p = "https://ex.com/"
    urls = [p, p + "about", p + "product/1", p + "Product/2?x=1", p + "%C3%BCber-uns/a",
            p + "a/b/c", p + "blog/"]
    con.register("classified", pa.table({
        "url": urls, "reason": [None] * len(urls), "lastmod": [None] * len(urls),
        "changefreq": [None] * len(urls), "priority": [None] * len(urls),
        "content_hash": [None] * len(urls), "ext_xml": [""] * len(urls),
        **{c: [None] * len(urls) for c in ("news_name", "news_language", "news_title")},
        "news_date": [None] * len(urls),
    }, schema=pa.schema([("url", pa.string()), ("reason", pa.string()),
                         ("lastmod", pa.timestamp("s", tz="UTC")), ("changefreq", pa.string()),
                         ("priority", pa.float64()), ("content_hash", pa.string()),
                         ("ext_xml", pa.string()), ("news_name", pa.string()),
                         ("news_language", pa.string()), ("news_title", pa.string()),
                         ("news_date", pa.timestamp("s", tz="UTC"))])))
    def sections(depth: int) -> dict[str, str]:
        return {r[0]: r[1] for r in con.sql(sql.load_sql("valid_rows"), params={
            "site_prefix": p, "section_depth": depth}).fetchall()}

    got = sections(1)
    assert got == {p: "root", p + "about": "root", p + "product/1": "product",
                   p + "Product/2?x=1": "product", p + "%C3%BCber-uns/a": "uber-uns",
                   p + "a/b/c": "a", p + "blog/": "blog"}
    got2 = sections(2)
    assert got2[p + "a/b/c"] == "a-b" and got2[p + "product/1"] == "root"


def test_diff_rows_lastmod_rules(con: duckdb.DuckDBPyConnection) -> None:
    future = datetime(2030, 1, 1, tzinfo=UTC)
    inv_lastmod = datetime(2026, 11, 15, 12, 30, 45, tzinfo=UTC)
    con.register("current_rows", pa.table({
        "url": ["same", "changed", "new", "future", "given"],
        "section": ["s"] * 5,
        "lastmod": [None, None, None, future, inv_lastmod],
        "changefreq": [None] * 5, "priority": [None] * 5,
        "content_hash": ["a", "b2", "c", "d", "e"], "ext_xml": [""] * 5,
        "news_name": ["Daily", None, "Daily", None, None], "news_language": ["en"] * 5,
        "news_date": [T - timedelta(days=3), None, T - timedelta(hours=5), None, None],
        "news_title": ["Old", None, "Fresh & new", None, None],
    }, schema=pa.schema([("url", pa.string()), ("section", pa.string()),
                         ("lastmod", pa.timestamp("s", tz="UTC")), ("changefreq", pa.string()),
                         ("priority", pa.float64()), ("content_hash", pa.string()),
                         ("ext_xml", pa.string()), ("news_name", pa.string()),
                         ("news_language", pa.string()),
                         ("news_date", pa.timestamp("s", tz="UTC")),
                         ("news_title", pa.string())])))
    fp = {u: con.sql("SELECT md5(concat_ws('|', $h, NULL))", params={"h": h}).fetchall()[0][0]
          for u, h in [("same", "a"), ("changed", "b1")]}
    con.register("previous_rows", pa.table({
        "url": ["same", "changed", "gone"], "section": ["s"] * 3, "shard": [0, 0, 0],
        "fingerprint": [fp["same"], fp["changed"], "x"],
        "lastmod": [EARLIER] * 3, "first_seen": [EARLIER] * 3, "last_changed": [EARLIER] * 3,
    }))
    con.sql(sql.load_sql("diff_rows"), params={
        "run_time": T, "news_section": "google-news", "news_max_age_days": 2,
        "with_news": True}).to_table("diffed")
    got = {r[0]: r[1:] for r in con.sql(
        "SELECT url, status, lastmod, lastmod_clamped, first_seen FROM diffed").fetchall()}
    assert got["same"] == ("unchanged", EARLIER, False, EARLIER)
    assert got["changed"] == ("changed", T, False, EARLIER)
    assert got["new"] == ("added", T, False, T)
    assert got["future"] == ("added", T, True, T)
    assert got["given"] == ("added", inv_lastmod, False, T)
    news = dict(con.sql("SELECT url, section || ' ' || ext FROM diffed").fetchall())
    assert news["same"] == "s "  # published three days ago: no longer news
    assert news["new"] == (
        "google-news <news:news><news:publication><news:name>Daily</news:name><news:language>"
        "en</news:language></news:publication><news:publication_date>2026-12-01T22:00:00Z"
        "</news:publication_date><news:title>Fresh &amp; new</news:title></news:news>")
    counts = sql.first_row(con, sql.load_sql("diff_counts"))
    assert counts == {"added": 3, "changed": 1, "unchanged": 1, "removed": 1,
                      "lastmod_clamped": 1, "news_articles": 1}


def test_partitions_cut_both_sides_of_the_diff_by_the_same_hash(
        con: duckdb.DuckDBPyConnection) -> None:
    urls = [f"https://ex.com/p/{i}" for i in range(60)]
    con.register("current_all", pa.table({"url": urls, "section": ["p"] * 60}))
    con.register("previous_all", pa.table({"url": urls[20:] + ["https://ex.com/gone"],
                                           "shard": [0] * 41}))
    got: dict[str, list[set[str]]] = {"current": [], "previous": []}
    for side in got:
        for partition in range(3):
            got[side].append({u for (u,) in con.sql(
                f"SELECT url FROM ({sql.load_sql(side + '_partition').rstrip().rstrip(';')})",
                params={"partition": partition, "partitions": 3}).fetchall()})
    cur, prev = got["current"], got["previous"]
    # Each side is split exactly: disjoint, and together every row.
    assert set().union(*cur) == set(urls) and sum(map(len, cur)) == 60
    assert set().union(*prev) == set(urls[20:]) | {"https://ex.com/gone"}
    assert sum(map(len, prev)) == 41 and all(cur)
    # A URL is in the same partition on both sides.
    for p in range(3):
        assert cur[p] & set(urls[20:]) == prev[p] - {"https://ex.com/gone"}
    one = con.sql(sql.load_sql("current_partition"),
                  params={"partition": 0, "partitions": 1}).fetchall()
    assert len(one) == 60


def test_url_line_escapes_and_formats(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(sql.load_sql("url_line"))
    got = con.sql("SELECT url_line($u, $t, 'daily', 0.5, ''), url_line('https://e.com/b', NULL, "
                  "NULL, 1.0, NULL)", params={"u": "https://e.com/a?x=1&y='2'", "t": T}
                  ).fetchall()[0]
    assert got == (
        "<url><loc>https://e.com/a?x=1&amp;y=&apos;2&apos;</loc>"
        "<lastmod>2026-12-02T03:00:00Z</lastmod><changefreq>daily</changefreq>"
        "<priority>0.5</priority></url>\n",
        "<url><loc>https://e.com/b</loc><priority>1</priority></url>\n")


def test_pack_shards_respects_both_limits(con: duckdb.DuckDBPyConnection) -> None:
    sizes = [10, 10, 10, 30, 5, 5, 5, 5, 5, 5]
    con.register("assigned", pa.table({
        "url": [f"u{i:02d}" for i in range(len(sizes))], "section": ["s"] * len(sizes),
        "line_bytes": sizes, "base_shard": pa.nulls(len(sizes), pa.int32()),
    }))
    budget, max_line, max_urls = 40, 30, 4
    con.register("shard_groups", pa.table({
        "section": ["s"], "base_shard": pa.array([None], pa.int32()), "group_id": [0],
        "repack": [True], "fill_urls": [max_urls], "fill_bytes": [budget - max_line + 1]}))
    con.execute(sql.load_sql("pack_shards"))
    subs = con.sql("SELECT sub, count(*), sum(line_bytes) FROM packed GROUP BY sub "
                   "ORDER BY sub").fetchall()
    assert all(n <= max_urls and b <= budget for _, n, b in subs)
    assert sum(n for _, n, _ in subs) == len(sizes)


def test_slice_shard_bounds_keeps_the_slice_sections(con: duckdb.DuckDBPyConnection) -> None:
    con.register("bounds_all", pa.table({
        "section": ["a", "a", "b", "c"], "shard": pa.array([0, 1, 0, 4], pa.int32()),
        "lower": ["a/1", "a/5", "b/1", "c/1"], "upper": ["a/4", "a/9", "b/9", "c/9"],
        "urls": [4, 5, 9, 9]}))
    con.execute(sql.load_sql("slice_shard_bounds"), {"sections": ["a", "c"]})
    got = con.sql("SELECT section, shard, lower, upper, urls FROM shard_bounds "
                  "ORDER BY ALL").fetchall()
    assert got == [("a", 0, "a/1", "a/4", 4), ("a", 1, "a/5", "a/9", 5),
                   ("c", 4, "c/1", "c/9", 9)]


def test_snapshot_rows_get_final_shard_numbers(con: duckdb.DuckDBPyConnection) -> None:
    from pipeline.diff import SNAPSHOT_COLUMNS

    late = 3 << 32  # a provisional number: a new shard of a section's later plan slice
    con.register("planned", pa.table({
        "section": ["a", "a", "a", "b", "b"],
        "shard": pa.array([0, late, late + 1, late, 2], pa.int64()),
        "url": ["a/1", "a/2", "a/3", "b/1", "b/2"], "line": ["x"] * 5,
        "fingerprint": ["f"] * 5, "lastmod": pa.array([T] * 5, pa.timestamp("s", tz="UTC")),
        "first_seen": pa.array([T] * 5, pa.timestamp("s", tz="UTC")),
        "last_changed": pa.array([T] * 5, pa.timestamp("s", tz="UTC")), "status": ["added"] * 5}))
    con.register("renumbered", pa.table({
        "section": ["a", "a", "b"], "planned_shard": pa.array([late, late + 1, late], pa.int64()),
        "shard": pa.array([7, 8, 3], pa.int32())}))
    rel = con.sql(sql.load_sql("snapshot_rows"))
    assert tuple(rel.columns) == SNAPSHOT_COLUMNS
    assert str(dict(zip(rel.columns, rel.types, strict=True))["shard"]) == "INTEGER"
    got = sorted((r[0], r[1], r[2]) for r in rel.fetchall())
    assert got == [("a/1", "a", 0), ("a/2", "a", 7), ("a/3", "a", 8), ("b/1", "b", 3),
                   ("b/2", "b", 2)]
