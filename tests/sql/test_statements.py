"""Each SQL statement of sql/ on a few input rows, against the expected output rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from pipeline import load, plan, sql
from pipeline.extensions import NAMESPACE_MARKERS
from pipeline.limits import CHANGEFREQ_VALUES
from pipeline.load import ISSUE_COUNTS, first_run_sections
from pipeline.unchanged import ROW_HASH_COLUMN, sums_by_section

T = datetime(2026, 12, 2, 3, 0, 0, tzinfo=UTC)
EARLIER = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return sql.connect(memory_limit="256MB", threads=1)


def register_with_url_hash(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    """`table` as the view `name`, with the url_hash normalize_inventory writes: hash(url),
    NULL for a row without a URL (a reject)."""
    con.register(f"{name}_rows", table)
    con.sql(f"SELECT *, CASE WHEN url IS NOT NULL THEN hash(url) END AS url_hash "
            f"FROM {name}_rows").create_view(name, replace=True)


def _dedupe(con: duckdb.DuckDBPyConnection, table: pa.Table) -> None:
    register_with_url_hash(con, "normalized", table)
    con.sql("SELECT * FROM normalized").create_view("dedupe_group", replace=True)
    con.register("repeated_url_hashes", load.repeated_url_hashes(con))
    con.execute("DROP TABLE IF EXISTS duplicate_rows")
    con.sql(sql.load_sql("dedupe_rows")).create("duplicate_rows")
    con.execute(sql.load_sql("classified_rows"))


@pytest.mark.parametrize("passes", [1, 3], ids=["one-pass", "three-passes"])
def test_dedupe_keeps_newest_lastmod_then_one_content(con: duckdb.DuckDBPyConnection,
                                                    passes: int) -> None:
    register_with_url_hash(con, "normalized", pa.table({
        "row_id": [1, 2, 3, 4, 5, 6],
        "url": ["u1", "u1", "u2", "u2", None, "u3"],
        "reason": [None, None, None, None, "empty", None],
        "lastmod": [EARLIER, T, None, None, None, None],
        "original_url": [" u1", None, None, None, "  ", None],
        "changefreq": ["daily", None, None, None, None, None],
        "priority": [0.5, None, None, None, None, None],
        ROW_HASH_COLUMN: pa.array([11, 12, 13, 14, 15, 16], pa.uint64()),
    }))
    con.sql("SELECT * FROM normalized").create_view("dedupe_group")
    repeated = load.repeated_url_hashes(con, passes)
    assert sorted(repeated.column("url_hash").to_pylist()) == sorted(
        r[0] for r in con.sql("SELECT DISTINCT hash(url) FROM normalized "
                              "WHERE url IN ('u1', 'u2')").fetchall())
    con.register("repeated_url_hashes", repeated)
    con.sql(sql.load_sql("dedupe_rows")).create("duplicate_rows")
    con.execute(sql.load_sql("classified_rows"))
    got = con.sql("SELECT row_id, reason FROM classified ORDER BY row_id").fetchall()
    # u2: one content in both rows (their raw rows' hashes apart): the first is kept
    assert got == [(1, "duplicate"), (2, None), (3, None), (4, "duplicate"), (5, "empty"),
                   (6, None)]
    # each duplicate with its own fields, as its reject gives them (rejected_rows)
    assert con.sql("SELECT row_id, url, lastmod, original_url, changefreq, priority "
                   "FROM duplicate_rows ORDER BY row_id").fetchall() == [
        (1, "u1", EARLIER, " u1", "daily", 0.5), (4, "u2", None, None, None, None)]


def test_dedupe_ties_go_by_content_not_by_order(con: duckdb.DuckDBPyConnection) -> None:
    """Rows of one URL and one lastmod that differ: the same one is kept in any order of
    the rows (the input's identity does not see the order, pipeline.unchanged)."""
    rows = [("u", T, "daily", 0.1, "a"), ("u", T, "weekly", 0.9, "b"), ("u", EARLIER, None, 0.5, "c"),
            ("v", None, None, 0.2, "d"), ("v", None, None, 0.3, "e"), ("w", T, None, 1.0, "f")]
    kept = []
    for order in (rows, rows[::-1], rows[1:] + rows[:1]):
        _dedupe(con, pa.table({
            "row_id": list(range(len(order))), "url": [r[0] for r in order],
            "reason": [None] * len(order), "lastmod": [r[1] for r in order],
            "original_url": [None] * len(order), "changefreq": [r[2] for r in order],
            "priority": [r[3] for r in order], "content_hash": [r[4] for r in order]}))
        kept.append(con.sql("SELECT url, content_hash FROM classified WHERE reason IS NULL "
                            "ORDER BY url").fetchall())
    assert kept[0] == kept[1] == kept[2]
    assert [u for u, _ in kept[0]] == ["u", "v", "w"] and kept[0][0][1] in ("a", "b")


def test_repeated_url_hashes_in_both_halves_of_the_hash_range(
        con: duckdb.DuckDBPyConnection) -> None:
    # dedupe sorts the lower and the upper half of the hash range apart, on two threads
    top = 2**63
    con.register("dedupe_group", pa.table({"url_hash": pa.array(
        [5, top + 7, 5, 9, top + 7, 2**64 - 1, top, top - 1, top - 1, None], pa.uint64())}))
    assert sorted(load.repeated_url_hashes(con).column("url_hash").to_pylist()) == [
        5, top - 1, top + 7]


@pytest.mark.parametrize("split", [1, 4])
def test_url_hashes_passes_share_a_partitions_rows(con: duckdb.DuckDBPyConnection,
                                                   split: int) -> None:
    """The passes over one diff partition (url_hash % split = K) take every hash of it once,
    each about as many: a pass by url_hash % passes alone would give one pass all of them
    when passes and split share a factor."""
    hashes = [h for h in range(0, 4000 * split, split)]  # one partition: url_hash % split = 0
    con.register("dedupe_group", pa.table({"url_hash": pa.array(hashes, pa.uint64())}))
    taken = [[h for (h,) in con.sql(sql.load_sql("url_hashes"), params={
        "pass": k, "passes": 4, "split": split}).fetchall()] for k in range(4)]
    assert sorted(h for t in taken for h in t) == hashes
    assert all(len(t) == 1000 for t in taken)


def test_valid_rows_sections(con: duckdb.DuckDBPyConnection) -> None:
    p = "https://ex.com/"
    urls = [p, p + "about", p + "product/1", p + "Product/2?x=1", p + "%C3%BCber-uns/a",
            p + "a/b/c", p + "blog/"]
    con.register("classified_base", pa.table({
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
        # raw_section as normalize_inventory cuts it
        con.sql("SELECT *, raw_section(url, $p, $d) AS raw_section, hash(url) AS url_hash "
                "FROM classified_base",
                params={"p": p, "d": depth}).create_view("classified", replace=True)
        con.sql("SELECT * FROM classified").create_view("normalized", replace=True)
        con.sql("SELECT raw_section FROM normalized WHERE reason IS NULL"
                ).create_view("section_names", replace=True)
        con.execute(sql.load_sql("section_slugs"))
        return {r[0]: r[1] for r in con.sql(sql.load_sql("valid_rows")).fetchall()}

    got = sections(1)
    assert got == {p: "root", p + "about": "root", p + "product/1": "product",
                   p + "Product/2?x=1": "product", p + "%C3%BCber-uns/a": "uber-uns",
                   p + "a/b/c": "a", p + "blog/": "blog"}
    got2 = sections(2)
    assert got2[p + "a/b/c"] == "a-b" and got2[p + "product/1"] == "root"


def test_raw_section_takes_the_prefix_literally(con: duckdb.DuckDBPyConnection) -> None:
    # raw_section matches the site prefix inside its pattern: regex characters in it (a path
    # may hold them) are literal text there.
    p = "https://ex.com/c++(x)[1]/"
    got = con.sql("SELECT raw_section(u, $p, 1), raw_section(u, $p, 2) FROM (VALUES "
                  "($p || 'product/1'), ($p || 'a/b/c'), ('https://exxcom/c++(x)[1]/product/1')"
                  ") t(u)", params={"p": p}).fetchall()
    assert got == [("product/", ""), ("a/", "a/b/"), ("", "")]


@pytest.mark.parametrize("legacy", [False, True], ids=["hashes", "md5-snapshot"])
def test_diff_rows_lastmod_rules(con: duckdb.DuckDBPyConnection, legacy: bool) -> None:
    future = datetime(2030, 1, 1, tzinfo=UTC)
    inv_lastmod = datetime(2026, 11, 15, 12, 30, 45, tzinfo=UTC)
    register_with_url_hash(con, "current_rows", pa.table({
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
    if legacy:  # a snapshot of an earlier version: md5 hex strings
        fp = {u: con.sql("SELECT md5(concat_ws('|', $h, NULL))", params={"h": h}).fetchall()[0][0]
              for u, h in [("same", "a"), ("changed", "b1")]}
        prints = {"fingerprint": pa.nulls(3, pa.uint64()),
                  "legacy_fingerprint": [fp["same"], fp["changed"], "x"]}
    else:
        fp = {u: con.sql("SELECT hash('content_hash', $h, NULL::TIMESTAMPTZ)",
                         params={"h": h}).fetchall()[0][0]
              for u, h in [("same", "a"), ("changed", "b1")]}
        prints = {"fingerprint": pa.array([fp["same"], fp["changed"], 7], pa.uint64()),
                  "legacy_fingerprint": pa.nulls(3, pa.string())}
    con.register("previous_rows", pa.table({
        "url": ["same", "changed", "gone"], "section": ["s"] * 3, "shard": [0, 0, 0],
        **prints,
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
    con.sql(sql.load_sql("changed_rows")).union(con.sql(sql.load_sql("removed_rows"))
                                                 ).to_table("changes")
    assert sorted(con.sql("SELECT url, change FROM changes").fetchall()) == [
        ("changed", "changed"), ("future", "added"), ("given", "added"), ("gone", "removed"),
        ("new", "added")]
    counts = sql.first_row(con, sql.load_sql("diff_counts"))
    assert counts == {"added": 3, "changed": 1, "unchanged": 1, "removed": 1,
                      "lastmod_clamped": 1, "news_articles": 1}


def test_partitions_cut_both_sides_of_the_diff_by_the_same_hash(
        con: duckdb.DuckDBPyConnection) -> None:
    urls = [f"https://ex.com/p/{i}" for i in range(60)]
    kept = [f"https://ex.com/q/{i}" for i in range(5)]  # a section left out as unchanged
    register_with_url_hash(con, "current_all", pa.table({
        "url": urls + kept, "section": ["p"] * 60 + ["q"] * 5}))
    con.register("previous_all", pa.table({"url": urls[20:] + ["https://ex.com/gone"] + kept,
                                           "section": ["p"] * 41 + ["q"] * 5,
                                           "shard": [0] * 46}))
    got: dict[str, list[set[str]]] = {"current": [], "previous": []}
    for side in got:
        for partition in range(3):
            got[side].append({u for (u,) in con.sql(
                f"SELECT url FROM ({sql.load_sql(side + '_partition').rstrip().rstrip(';')})",
                params={"partition": partition, "partitions": 3,
                        "unchanged_sections": ["q"]}).fetchall()})
    cur, prev = got["current"], got["previous"]
    # Each side is split exactly: disjoint, and together every row but the unchanged section's.
    assert set().union(*cur) == set(urls) and sum(map(len, cur)) == 60
    assert set().union(*prev) == set(urls[20:]) | {"https://ex.com/gone"}
    assert sum(map(len, prev)) == 41 and all(cur)
    # A URL is in the same partition on both sides.
    for p in range(3):
        assert cur[p] & set(urls[20:]) == prev[p] - {"https://ex.com/gone"}
    one = con.sql(sql.load_sql("current_partition"),
                  params={"partition": 0, "partitions": 1, "unchanged_sections": []}).fetchall()
    assert len(one) == 65
    counted = dict(con.sql(sql.load_sql("previous_partition_rows"),
                           params={"partitions": 1, "unchanged_sections": ["q"]}).fetchall())
    assert counted == {0: 41}


def test_time_macros_equal_duckdb_builtins(con: duckdb.DuckDBPyConnection) -> None:
    """utc_second and w3c_time (integer arithmetic, no ICU) give exactly what date_trunc and
    strftime of a TIMESTAMPTZ give, before 1970 and at the ends of the range too."""
    con.register("times", pa.table({"t": pa.array([
        T, T + timedelta(microseconds=999_999),
        datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC),
        datetime(1, 1, 1, 0, 0, 0, 700_000, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=UTC), None], type=pa.timestamp("us", tz="UTC"))}))
    rows = con.sql("SELECT utc_second(t), date_trunc('second', t), hash(utc_second(t)), "
                   "hash(date_trunc('second', t)), w3c_time(t), strftime(t, '%Y-%m-%dT%H:%M:%SZ') "
                   "FROM times").fetchall()
    assert len(rows) == 7
    for ours_t, duck_t, ours_h, duck_h, ours_s, duck_s in rows:
        assert (ours_t, ours_h, ours_s) == (duck_t, duck_h, duck_s)
    assert rows[2][0] == datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)  # floor, not toward 0
    assert rows[1][4] == "2026-12-02T03:00:00Z"
    assert con.sql("SELECT w3c_time(NULL), utc_second(NULL)").fetchall() == [(None, None)]


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


def test_url_line_bytes_is_the_rendered_length(con: duckdb.DuckDBPyConnection) -> None:
    """Plan budgets bytes with url_line_bytes; render builds url_line: they must agree."""
    con.register("rows", pa.table({
        "url": ["https://e.com/a?x=1&y='2'", "https://e.com/%3Cb%3E%22&amp",
                "https://e.com/caf%C3%A9", "https://e.com/é日本", "https://e.com/c"],
        "lastmod": pa.array([T, None, datetime(1, 1, 1, tzinfo=UTC), T, T],
                            pa.timestamp("us", tz="UTC")),
        "changefreq": ["daily", None, "never", "always", None],
        "priority": [0.5, 1.0, 0.0005, None, 0.123456],
        "ext": ["<image:image><image:loc>https://e.com/i.png</image:loc></image:image>", "",
                None, "ü", "&amp;"]}))
    got = con.sql("SELECT strlen(url_line(url, lastmod, changefreq, priority, ext)), "
                  "url_line_bytes(url, lastmod, changefreq, priority, ext) FROM rows").fetchall()
    assert len(got) == 5 and all(rendered == measured for rendered, measured in got), got


def test_priority_bytes_is_the_printed_length(con: duckdb.DuckDBPyConnection) -> None:
    """priority_bytes counts what priority_text prints, without printing, and priority_text's
    shortcut for the tenths and 0 prints what printf does: every thousandth, the halves between
    them and values a rounding error off them, -0.0, and random ones."""
    con.execute(sql.load_sql("url_line"))
    thousandths = np.arange(1001) / 1000
    halves = np.arange(1000) / 1000 + 0.0005
    rng = np.random.default_rng(7)
    values = np.concatenate([
        thousandths, halves, np.nextafter(halves, 0), np.nextafter(halves, 1),
        np.arange(11) / 10, np.nextafter(np.arange(11) / 10, 0), np.nextafter(np.arange(11) / 10, 1),
        [0.0, -0.0, 1e-300, 0.0004999999, 0.9995, 0.99949999, np.nan],
        rng.random(200_000)])
    con.register("priorities", pa.table({"p": values}))
    wrong = con.sql("SELECT p, priority_text(p), priority_bytes(p) FROM priorities "
                    "WHERE priority_bytes(p) <> strlen(priority_text(p))").fetchall()
    assert wrong == []
    # the tenths' shortcut prints what printf does, for every value (NULL included)
    differ = con.sql("SELECT p, priority_text(p), priority_printed(p) FROM priorities "
                     "WHERE priority_text(p) IS DISTINCT FROM priority_printed(p)").fetchall()
    assert differ == []
    assert con.sql("SELECT list(priority_text(p) ORDER BY p) FROM (SELECT unnest(range(11)) / 10 "
                   "AS p)").fetchall() == [(["0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7",
                                             "0.8", "0.9", "1"],)]
    assert con.sql("SELECT priority_text(-0.0::DOUBLE), priority_bytes(-0.0::DOUBLE), "
                   "priority_bytes(0.25), priority_bytes(0.1), priority_bytes(1.0), "
                   "priority_bytes(NULL::DOUBLE)").fetchall() == [("-0", 2, 4, 3, 1, None)]


def test_assigned_rows_and_group_stats(con: duckdb.DuckDBPyConnection) -> None:
    """Kept URLs keep their shard, a new URL goes to the shard whose range holds it (or the
    section's first), a new section has none; the sums are the rows' own."""
    con.register("diffed", pa.table({
        "url": ["a/1", "a/5", "a/0", "a/7", "b/1"], "section": ["a", "a", "a", "a", "b"],
        "lastmod": pa.array([T] * 5, pa.timestamp("us", tz="UTC")),
        "changefreq": [None] * 5, "priority": pa.array([None] * 5, pa.float64()),
        "ext": ["", "", "", "<xhtml:link rel=\"alternate\" hreflang=\"x\" href=\"a/7\"/>",
                "<image:image><image:loc>i</image:loc></image:image><news:news></news:news>"],
        "fingerprint": ["f"] * 5, "first_seen": pa.array([T] * 5, pa.timestamp("us", tz="UTC")),
        "last_changed": pa.array([T] * 5, pa.timestamp("us", tz="UTC")),
        "status": ["unchanged", "unchanged", "added", "added", "added"],
        "prev_shard": pa.array([0, 3, None, None, None], pa.int32())}))
    con.register("shard_bounds", pa.table({
        "section": ["a", "a"], "shard": pa.array([0, 3], pa.int32()), "lower": ["a/1", "a/5"],
        "upper": ["a/4", "a/6"], "urls": [1, 1]}))
    plan.register_assigned(con, "xml")
    got = con.sql("SELECT url, base_shard, ns, changed, line_bytes = strlen(url_line(url, "
                  "lastmod, changefreq, priority, ext)) FROM assigned ORDER BY url").fetchall()
    assert got == [("a/0", 0, 0, True, True), ("a/1", 0, 0, False, True),
                   ("a/5", 3, 0, False, True), ("a/7", 3, 8, True, True),
                   ("b/1", None, 5, True, True)]
    stats = con.sql(sql.load_sql("group_stats")).fetchall()
    assert [(r[0], r[1], r[2], r[7], r[8]) for r in stats] == [
        ("a", 0, 2, 0, 1), ("a", 3, 2, 8, 1), ("b", None, 1, 5, 1)]
    hashes = dict(con.sql("SELECT url, row_hash FROM assigned").fetchall())
    assert stats[0][5] == hashes["a/0"] ^ hashes["a/1"]


def test_new_section_stats_has_group_stats_columns_and_each_sections_url_range(
        con: duckdb.DuckDBPyConnection) -> None:
    """A first run's groups: one per section, in section order, with its URL count and
    smallest and largest URL, in the columns group_stats gives (plan reads them by position)."""
    con.register("diffed", pa.table({"url": ["b/2", "a/9", "a/1", "b/1", "a/5"],
                                     "section": ["b", "a", "a", "b", "a"]}))
    got = con.sql(sql.load_sql("new_section_stats"))
    assert [(r[0], r[1], r[2], r[9], r[10]) for r in got.fetchall()] == [
        ("a", None, 3, "a/1", "a/9"), ("b", None, 2, "b/1", "b/2")]
    con.register("assigned", pa.table({"section": ["a"], "base_shard": pa.array([None], pa.int32()),
                                       "url": ["a/1"], "line_bytes": [1], "row_hash": [1],
                                       "lastmod": pa.array([T], pa.timestamp("us", tz="UTC")),
                                       "ns": [0], "changed": [True]}))
    assert got.columns == con.sql(sql.load_sql("group_stats")).columns


def planned_rows(con: duckdb.DuckDBPyConnection, params: dict[str, Any]) -> duckdb.DuckDBPyRelation:
    """sql/planned_rows.sql with `params`, after the type of its sections, as plan runs it."""
    con.execute(sql.load_sql("planned_section_type"), {"sections": params["sections"]})
    return con.sql(sql.load_sql("planned_rows"), params=params)


def test_planned_rows_leave_out_reused_groups_in_file_order(
        con: duckdb.DuckDBPyConnection) -> None:
    con.register("assigned", pa.table({
        "url": ["a/2", "a/1", "a/9", "b/1", "a/3"], "section": ["a", "a", "a", "b", "a"],
        "base_shard": pa.array([0, 0, 1, None, 2], pa.int32()),
        **{c: [None] * 5 for c in ("lastmod", "changefreq", "priority", "ext", "fingerprint",
                                   "first_seen", "last_changed")},
        "line_bytes": [1] * 5, "row_hash": [1] * 5, "ns": [0] * 5, "changed": [True] * 5}))
    con.register("shard_groups", pa.table({
        "section": ["a", "a", "a", "b"], "base_shard": pa.array([0, 1, 2, None], pa.int32()),
        "group_id": [0, 1, 1, 2], "reused": [False, True, True, False],
        "skip": [2, 2, 2, 2]}))
    got = planned_rows(con, {
        "prefixes": ["a/", "a/", "b/"], "sections": ["a", "a", "b"], "format": "xml",
        "ns_markers": NAMESPACE_MARKERS, "first_run_time": None, "ext_empty": False})
    rows = [dict(zip(got.columns, r, strict=True)) for r in got.fetchall()]
    # The sort drops each URL's group prefix; the URL, the section and the line's
    # measures are whole again after it.
    assert [(r["group_id"], r["section"], r["url"], r["line_bytes"]) for r in rows] == [
        (0, "a", "a/1", 26), (0, "a", "a/2", 26), (2, "b", "b/1", 26)]


def test_planned_rows_come_in_file_order_from_two_threads() -> None:
    """The sort is followed by a projection (the URL made whole, the lines measured): the
    part's rows must still be in (group, URL) order, as plan writes them with two threads.
    A first run's without extensions: its time put back as every row's first seen and last
    changed time, and '' as every row's ext."""
    con = sql.connect(threads=2)
    n = 300_000
    rng = np.random.default_rng(7)
    sections = rng.integers(0, 3, n)
    urls = [f"https://e.com/s{s}/item-{i}" for s, i in zip(sections, rng.permutation(n),
                                                           strict=True)]
    con.register("assigned", pa.table({
        "url": urls, "section": [f"s{s}" for s in sections],
        "base_shard": pa.nulls(n, pa.int32()), "ext": [""] * n, "changed": [True] * n,
        **{c: pa.nulls(n) for c in ("lastmod", "changefreq", "priority", "fingerprint",
                                    "first_seen", "last_changed")}}))
    prefixes = [f"https://e.com/s{s}/item-" for s in range(3)]
    con.register("shard_groups", pa.table({
        "section": ["s0", "s1", "s2"], "base_shard": pa.nulls(3, pa.int32()),
        "group_id": [0, 1, 2], "reused": [False] * 3, "skip": [len(p) for p in prefixes]}))
    with sql.insertion_order(con):
        rel = planned_rows(con, {
            "prefixes": prefixes, "sections": ["s0", "s1", "s2"], "format": "xml",
            "ns_markers": NAMESPACE_MARKERS, "first_run_time": T, "ext_empty": True})
        columns, got = rel.columns, rel.fetchall()
    keys = [(r[0], r[2]) for r in got]
    assert len(keys) == n and keys == sorted(keys)
    assert all(section == f"s{gid}" for gid, section, *_ in got)
    state = [columns.index(c) for c in ("changed", "first_seen", "last_changed", "ext")]
    assert {tuple(r[i] for i in state) for r in got} == {(True, T, T, "")}


def test_planned_rows_carry_every_changefreq_load_lets_through() -> None:
    """The sort carries the changefreq as an ENUM spelled out in the SQL: it must hold every
    value load accepts (and NULL), each given back as it was."""
    con = sql.connect(threads=1)
    values = [*CHANGEFREQ_VALUES, None]
    n = len(values)
    con.register("assigned", pa.table({
        "url": [f"a/{i}" for i in range(n)], "section": ["a"] * n,
        "base_shard": pa.nulls(n, pa.int32()), "changefreq": pa.array(values, pa.string()),
        "ext": [""] * n, "changed": [True] * n,
        **{c: pa.nulls(n) for c in ("lastmod", "priority", "fingerprint", "first_seen",
                                    "last_changed")}}))
    con.register("shard_groups", pa.table({
        "section": ["a"], "base_shard": pa.nulls(1, pa.int32()), "group_id": [0],
        "reused": [False], "skip": [2]}))
    rel = planned_rows(con, {
        "prefixes": ["a/"], "sections": ["a"], "format": "xml",
        "ns_markers": NAMESPACE_MARKERS, "first_run_time": None, "ext_empty": False})
    got = dict(rel.select("url, changefreq").fetchall())
    assert got == {f"a/{i}": v for i, v in enumerate(values)}


def test_pack_subs_cuts_by_count_and_bytes() -> None:
    """A hand-worked example: 3 URLs or 25 bytes (budget less the longest line) a bucket."""
    from pipeline.plan import pack_subs

    sizes = np.array([10, 10, 10, 10, 10, 5, 5, 5])
    # cumulative bytes 10 20 30 40 50 55 60 65 -> byte buckets 0 0 1 1 1 2 2 2;
    # count buckets 0 0 0 1 1 1 2 2; a shard for each distinct pair
    assert pack_subs(sizes, fill_urls=3, fill_bytes=25) == [0, 2, 3, 5, 6]
    assert pack_subs(sizes, fill_urls=100, fill_bytes=1000) == [0]
    assert pack_subs(sizes, fill_urls=1, fill_bytes=1000) == list(range(8))
    assert pack_subs(np.array([], dtype=np.int64), 3, 25) == []


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


def test_section_counts_and_diffed_slice_and_sample_urls(
        con: duckdb.DuckDBPyConnection) -> None:
    urls = [f"a/{i:02d}" for i in range(40)] + ["b/1", "b/2", "c/1"]
    con.register("diffed_all", pa.table({"url": urls, "section": [u[0] for u in urls]}))
    assert con.sql(sql.load_sql("section_counts")).fetchall() == [("a", 40), ("b", 2), ("c", 1)]

    def sliced(sections: list[str], lo: str | None, hi: str | None) -> list[str]:
        return [u for (u,) in con.sql(
            f"SELECT url FROM ({sql.load_sql('diffed_slice').rstrip().rstrip(';')}) ORDER BY url",
            params={"sections": sections, "lo": lo, "hi": hi}).fetchall()]

    assert sliced(["b", "c"], None, None) == ["b/1", "b/2", "c/1"]
    assert sliced(["a"], "a/10", "a/13") == ["a/10", "a/11", "a/12"]  # [lo, hi)
    assert sliced(["a"], None, "a/02") == ["a/00", "a/01"]
    assert sliced(["a"], "a/38", None) == ["a/38", "a/39"]
    sample = con.sql(sql.load_sql("sample_urls"), params={"sections": ["a"], "every": 4}
                     ).fetchall()
    want = sorted(("a", u) for (u, h) in con.sql(
        "SELECT url, hash(url) FROM diffed_all WHERE section = 'a'").fetchall() if h % 4 == 0)
    assert sample == want and 0 < len(sample) < 40
    assert len(con.sql(sql.load_sql("sample_urls"), params={"sections": ["a"], "every": 1}
                       ).fetchall()) == 40


def test_previous_shard_bounds(con: duckdb.DuckDBPyConnection) -> None:
    con.register("previous_rows", pa.table({
        "url": ["a/3", "a/1", "a/2", "a/9", "b/5"], "section": ["a", "a", "a", "a", "b"],
        "shard": pa.array([0, 0, 0, 7, 0], pa.int32())}))
    con.execute(sql.load_sql("previous_shard_bounds"))
    assert con.sql("SELECT * FROM shard_bounds ORDER BY ALL").fetchall() == [
        ("a", 0, "a/1", "a/3", 3), ("a", 7, "a/9", "a/9", 1), ("b", 0, "b/5", "b/5", 1)]


def test_rejected_rows_and_classified_counts(con: duckdb.DuckDBPyConnection) -> None:
    # Row 5 repeats row 1's URL: dedupe_rows found it (duplicate_rows), classified says so.
    con.register("normalized", pa.table({
        "row_id": [1, 2, 3, 4, 5],
        "reason": [None, "off_site", None, "empty", None],
        "url": ["https://e.com/a", "https://o.org/x", "https://e.com/b", None, "https://e.com/a"],
        "original_url": [None, "  HTTPS://o.org/x ", None, "   ", "https://E.com/a"],
        "lastmod": pa.array([T, EARLIER, None, None, EARLIER], pa.timestamp("us", tz="UTC")),
        "changefreq": ["daily", "weekly", None, None, "never"],
        "priority": [0.5, 0.3, None, None, 0.1],
        "lastmod_raw_invalid": [True, True, False, False, False],
        "changefreq_invalid": [False, False, True, True, False],
        "priority_invalid": [False, False, True, False, False],
        "images_dropped": [3, 9, None, None, 1], "videos_dropped": [None, None, 1, None, None],
        "alternates_dropped": [0, 0, 2, 0, 0], "deprecated_tags": [4, 7, 1, 0, 0],
        "extension_fields_invalid": [2, 5, 1, 0, 0], "news_dropped": [0, 1, 1, 0, 0],
        "raw_section": ["a/", "", "b/", "", "a/"],
        "gate_detail": pa.array([None] * 5, pa.string()),
        "_input_row_hash": pa.array([11, 22, 33, 44, 55], pa.uint64())}))
    # as dedupe_rows keeps it: the duplicate's id and its own fields
    con.register("duplicate_rows", pa.table({
        "row_id": [5], "url": ["https://e.com/a"], "lastmod": pa.array([EARLIER], pa.timestamp(
            "us", tz="UTC")), "original_url": ["https://E.com/a"], "changefreq": ["never"],
        "priority": [0.1], "winner_row_id": [1],
        "winner_lastmod": pa.array([T], pa.timestamp("us", tz="UTC")),
        "won_by": ["newer lastmod"]}))
    con.execute(sql.load_sql("classified_rows"))
    load.register_url_rules(con)
    rejects = " UNION ALL ".join(f"({sql.load_sql(name).rstrip().rstrip(';')})"
                                 for name in ("rejected_rows", "duplicate_rejects"))
    # each with what caused it: off_site's host, a duplicate's winner and the rule it won by
    assert con.sql(f"SELECT * FROM ({rejects}) ORDER BY row_id",
                   params={"site_prefix": "https://e.com/"}).fetchall() == [
        (2, "off_site", "  HTTPS://o.org/x ", EARLIER, "weekly", 0.3, "host=o.org", None, None),
        (4, "empty", "   ", None, None, None, None, None, None),
        (5, "duplicate", "https://E.com/a", EARLIER, "never", 0.1, "newer lastmod", 1, T)]
    # the reasons rejected_rows and duplicate_rejects give are classified's, row for row
    assert con.sql(f"SELECT row_id, reason FROM ({rejects}) "
                   "EXCEPT SELECT row_id, reason FROM classified",
                   params={"site_prefix": "https://e.com/"}).fetchall() == []
    # Rows per reason (NULL: the published rows) and path segments; a rejected row's fields
    # are not "dropped", load reads the dropped fields of the NULL reason only.
    # load's view: a first run's also gives the URLs' bounds, others a NULL column
    con.execute("CREATE VIEW counted AS SELECT *, url AS bounded_url FROM classified")
    counts = con.sql(sql.load_sql("classified_counts"))
    groups = [dict(zip(counts.columns, r, strict=True)) for r in counts.fetchall()]
    issues = ("rows", "lastmod_given", "lastmod_invalid", "changefreq_invalid",
              "priority_invalid", "images_dropped", "videos_dropped", "alternates_without_self",
              "deprecated_tags", "extension_fields_invalid", "news_dropped")
    assert {(g["reason"], g["raw_section"]): tuple(g[k] for k in issues) for g in groups} == {
        (None, "a/"): (1, 1, 1, 0, 0, 3, 0, 0, 4, 2, 0),
        (None, "b/"): (1, 0, 0, 1, 1, 0, 1, 2, 1, 1, 1),
        ("duplicate", "a/"): (1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0),
        ("empty", ""): (1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0),
        ("off_site", ""): (1, 1, 1, 0, 0, 9, 0, 0, 7, 5, 1)}
    assert ISSUE_COUNTS == issues  # what load adds up by reason

    def h(expr: str) -> int:
        return int(con.sql(f"SELECT ({expr})::HUGEINT").fetchall()[0][0])

    # The sums of the input rows' hashes: every row's, and the duplicates' hashed once more.
    sums = {(g["reason"], g["raw_section"]): (g["hash_sum"], g["hash_hash_sum"],
                                              g["tagged_hash_sum"], g["tagged_hash_hash_sum"],
                                              g["newest"]) for g in groups}
    assert sums[(None, "a/")] == (11, h("hash(11::UBIGINT)"), 0, 0, T)
    assert sums[("duplicate", "a/")] == (
        55, h("hash(55::UBIGINT)"), h("hash(55::UBIGINT, 'duplicate')"),
        h("hash(hash(55::UBIGINT, 'duplicate'))"), EARLIER)
    assert sums[(None, "b/")][:2] == (33, h("hash(33::UBIGINT)"))
    assert sum(g["hash_sum"] for g in groups) == 11 + 22 + 33 + 44 + 55
    # By section: the rows to publish, their duplicates' hashes tagged; rejects left out.
    assert sums_by_section(groups, {"a/": "a"}) == [
        ("a", 1, 11 + h("hash(55::UBIGINT, 'duplicate')"),
         h("hash(11::UBIGINT)") + h("hash(hash(55::UBIGINT, 'duplicate'))"), T.isoformat()),
        ("root", 1, 33, h("hash(33::UBIGINT)"), None)]
    # A first run's sections: the rows to publish, their URLs' bounds and newest lastmod.
    assert first_run_sections(groups, {"a/": "a"}) == [
        ["a", 1, "https://e.com/a", "https://e.com/a", T.isoformat()],
        ["root", 1, "https://e.com/b", "https://e.com/b", None]]
    # two path segments of one slug: one section, its bounds over both
    assert first_run_sections(groups, {"a/": "a", "b/": "a"}) == [
        ["a", 2, "https://e.com/a", "https://e.com/b", T.isoformat()]]


def test_changed_rows_and_reused_rows(con: duckdb.DuckDBPyConnection) -> None:
    con.register("diffed", pa.table({
        "url": ["u1", "u2", "u3"], "status": ["unchanged", "changed", "added"],
        "lastmod": pa.array([EARLIER, T, T], pa.timestamp("us", tz="UTC"))}))
    con.register("previous_rows", pa.table({"url": ["u1", "u2", "gone"]}))
    assert sorted(con.sql(sql.load_sql("changed_rows")).fetchall()) == [
        ("u2", "changed", T), ("u3", "added", T)]
    assert con.sql(sql.load_sql("removed_rows")).fetchall() == [("gone", "removed", None)]

    con.register("assigned", pa.table({
        "url": ["a/1", "a/2", "a/9", "b/1", "c/1"], "section": ["a", "a", "a", "b", "c"],
        "base_shard": pa.array([0, 0, 4, 0, None], pa.int32()),
        "fingerprint": pa.array([1, 2, 3, 4, 5], pa.uint64()),
        "lastmod": pa.array([T] * 5, pa.timestamp("us", tz="UTC")),
        "first_seen": pa.array([EARLIER] * 5, pa.timestamp("us", tz="UTC")),
        "last_changed": pa.array([EARLIER] * 5, pa.timestamp("us", tz="UTC"))}))
    con.register("reused_shards", pa.table({"section": ["a", "b"],
                                            "shard": pa.array([0, 4], pa.int32()),
                                            "section_code": pa.array([7, 3], pa.int32())}))
    got = con.sql(f"SELECT url, section_code, shard, fingerprint FROM "
                  f"({sql.load_sql('reused_rows').rstrip().rstrip(';')}) ORDER BY url").fetchall()
    assert got == [("a/1", 7, 0, 1), ("a/2", 7, 0, 2)]  # not a/9 (shard 4), not b/1
