"""sql/normalize_inventory.sql on a hand-made inventory: one output row per input row, its
URL normalised or its reject reason, the indexability gate in its order, and the fields
the typed view checked (pipeline.load builds `inventory_typed` from code constants: the
test builds it the same way) passed through with their flags."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import extensions, load, sql
from pipeline.errors import InternalError
from pipeline.limits import MAX_URL_LENGTH
from pipeline.parquet import ROW_ID
from pipeline.urls import CLEAN_URL_REGEX, IRI_PATH_REGEX

P = "https://ex.com/"
LONGEST = P + "x" * (MAX_URL_LENGTH - len(P))
TOO_LONG = LONGEST + "x"
COLUMNS = {  # the inventory's columns and types
    "url": pa.string(), "lastmod": pa.string(), "changefreq": pa.string(),
    "priority": pa.string(), "http_status": pa.int32(), "canonical_url": pa.string(),
    "noindex": pa.bool_(), "redirect_to": pa.string(), load.INVALID_UTF8: pa.bool_(),
}
_ = None
#: url, lastmod, changefreq, priority, http_status, canonical_url, noindex, redirect_to,
#: a string that was not UTF-8 (clean_utf8's flag)
INVENTORY: list[tuple[Any, ...]] = [
    (P + "shop/a", "2026-11-01T10:00:00Z", "daily", "0.5", 200, _, False, _, False),
    (P + "shop/a", "2026-11-02", " Weekly ", "1", _, _, _, _, False),  # a duplicate: kept
    ("HTTPS://EX.COM/shop/b#top", "not a date", "sometimes", "1.5", _, _, _, _, False),
    (P + "über/x", "1970-01-01T00:00:00Z", _, "-0.1", _, _, _, _, False),
    ("https://other.com/x", _, _, "abc", _, _, _, _, False),
    (_, _, _, _, _, _, _, _, False),
    (P + "gone", _, _, _, 404, _, _, _, False),
    (P + "moved", _, _, _, 200, _, _, P + "new", False),
    (P + "hidden", _, _, _, _, _, True, _, False),
    (P + "copy", _, _, _, _, P + "original", _, _, False),
    (P + "self", _, _, _, _, "HTTPS://EX.COM/self", _, _, False),
    (P + "same", _, _, _, _, P + "same", _, _, False),
    (P + "blank", _, _, _, _, " ", _, " ", False),
    ("ftp://ex.com/a", _, _, _, 404, _, _, _, False),
    (P + "bytes", _, _, _, 404, _, _, _, True),
    (LONGEST, _, _, _, _, _, _, _, False),
    (TOO_LONG, _, _, _, _, _, _, _, False),
    # W3C datetimes of a year or a month: their first instant, UTC
    (P + "year", "2024", _, _, _, _, _, _, False),
    (P + "month", " 2024-05 ", _, _, _, _, _, _, False),
    (P + "month13", "2024-13", _, _, _, _, _, _, False),
    (P + "short", "2024-5", _, _, _, _, _, _, False),
    (P + "early", "1990", _, _, _, _, _, _, False),
]
NOV1 = datetime(2026, 11, 1, 10, tzinfo=UTC)
NOV2 = datetime(2026, 11, 2, tzinfo=UTC)
#: row_id, original_url, url, reason, raw_section, lastmod, lastmod_raw_invalid, changefreq,
#: changefreq_invalid, priority, priority_invalid
EXPECTED = [
    (0, _, P + "shop/a", _, "shop/", NOV1, False, "daily", False, 0.5, False),
    (1, _, P + "shop/a", _, "shop/", NOV2, False, "weekly", False, 1.0, False),
    (2, "HTTPS://EX.COM/shop/b#top", P + "shop/b", _, "shop/", _, True, _, True, _, True),
    (3, P + "über/x", P + "%C3%BCber/x", _, "%C3%BCber/", _, True, _, False, _, True),
    (4, "https://other.com/x", _, "off_site", "", _, False, _, False, _, True),
    (5, _, _, "empty", "", _, False, _, False, _, False),
    (6, P + "gone", _, "not_200", "", _, False, _, False, _, False),
    (7, P + "moved", _, "redirect", "", _, False, _, False, _, False),
    (8, P + "hidden", _, "noindex", "", _, False, _, False, _, False),
    (9, P + "copy", _, "not_canonical", "", _, False, _, False, _, False),
    (10, _, P + "self", _, "", _, False, _, False, _, False),
    (11, _, P + "same", _, "", _, False, _, False, _, False),
    (12, _, P + "blank", _, "", _, False, _, False, _, False),
    (13, "ftp://ex.com/a", _, "not_http", "", _, False, _, False, _, False),
    (14, P + "bytes", _, "invalid_utf8", "", _, False, _, False, _, False),
    (15, _, LONGEST, _, "", _, False, _, False, _, False),
    (16, TOO_LONG, _, "too_long", "", _, False, _, False, _, False),
    (17, _, P + "year", _, "", datetime(2024, 1, 1, tzinfo=UTC), False, _, False, _, False),
    (18, _, P + "month", _, "", datetime(2024, 5, 1, tzinfo=UTC), False, _, False, _, False),
    (19, _, P + "month13", _, "", _, True, _, False, _, False),
    (20, _, P + "short", _, "", _, True, _, False, _, False),
    (21, _, P + "early", _, "", _, True, _, False, _, False),
]


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = sql.connect(memory_limit="256MB", threads=1)
    inventory = pa.table({name: pa.array([row[i] for row in INVENTORY], type_)
                          for i, (name, type_) in enumerate(COLUMNS.items())})
    con.register("inventory_file", inventory)
    con.sql(f"SELECT *, row_number() OVER () - 1 AS {ROW_ID} FROM inventory_file"
            ).create_view("inventory_raw")
    # the typed view, as pipeline.load makes it (of a cleaned copy: with the UTF-8 flag)
    probe = con.sql(f"SELECT * EXCLUDE ({ROW_ID}, {load.INVALID_UTF8}) FROM inventory_raw")
    duck_types = dict(zip(probe.columns, probe.types, strict=True))
    types = {k: str(v).upper() for k, v in duck_types.items()}
    typed = ", ".join(load._typed_columns(types, duck_types)).replace(
        "false AS invalid_utf8", f"{load.INVALID_UTF8} AS invalid_utf8")
    con.sql(f"SELECT {typed} FROM inventory_raw").create_view("inventory_typed")
    con.create_function("check_url", load._check_url_batch, ["VARCHAR", "VARCHAR"], "VARCHAR",
                        type="arrow", null_handling="special",  # type: ignore[call-overload]
                        side_effects=False)
    con.execute(sql.load_sql("normalize_macros"))
    return con


def test_normalize_inventory_rows(con: duckdb.DuckDBPyConnection) -> None:
    rel = con.sql(sql.load_sql("normalize_inventory"), params={
        "site_prefix": P, "clean_regex": CLEAN_URL_REGEX, "iri_regex": IRI_PATH_REGEX,
        "max_len": MAX_URL_LENGTH, "section_depth": 1, "max_line_bytes": None,
        "ext_budget": None})
    got = rel.order("row_id").select(
        "row_id, original_url, url, reason, raw_section, lastmod, lastmod_raw_invalid, "
        "changefreq, changefreq_invalid, priority, priority_invalid").fetchall()
    assert len(got) == len(INVENTORY)  # one row per input row, duplicates too
    for want, row in zip(EXPECTED, got, strict=True):
        assert row == want
    # no extension columns in this inventory: nothing rendered, nothing dropped
    rest = rel.select("content_hash, ext_xml, images_dropped, videos_dropped, "
                      "alternates_dropped, deprecated_tags, extension_fields_invalid, "
                      "news_dropped, news_name, news_date").distinct()
    assert rest.fetchall() == [(None, "", 0, 0, 0, 0, 0, 0, None, None)]


def test_constant_columns_are_literal_expressions_that_reach_the_output() -> None:
    typed = ["url", "0 AS images_dropped", "'' AS ext_xml", "NULL::TIMESTAMPTZ AS news_date",
             "(lastmod IS NOT NULL AND NOT ok) AS lastmod_raw_invalid",
             "NULL::INTEGER AS http_status"]  # a gate column: read, never in the output
    got = load.constant_columns(typed, ["url", "images_dropped", "ext_xml", "news_date",
                                        "lastmod_raw_invalid"])
    assert got == ("0 AS images_dropped", "'' AS ext_xml", "NULL::TIMESTAMPTZ AS news_date")


@pytest.mark.parametrize("column", [
    pa.field("images", pa.list_(pa.struct([("loc", pa.string())]))),
    pa.field("news", pa.struct([("publication_name", pa.string()), ("language", pa.string()),
                                ("publication_date", pa.timestamp("s", tz="UTC")),
                                ("title", pa.string())])),
])
def test_an_inventory_with_an_extension_may_have_ext(column: pa.Field) -> None:
    """Image XML or a news article make `ext` vary: plan's sort must carry it."""
    con = duckdb.connect()
    con.register("inventory", pa.table({"url": pa.array([], pa.string()),
                                        column.name: pa.array([], column.type)}))
    rel = con.sql("SELECT * FROM inventory")
    duck_types = dict(zip(rel.columns, rel.types, strict=True))
    typed = extensions.extension_columns(duck_types)
    names = [c.rpartition(" AS ")[2] for c in typed]
    assert not extensions.ext_always_empty(load.constant_columns(typed, names))
    assert extensions.ext_always_empty(load.constant_columns(
        extensions.extension_columns({}), names))


def test_load_leaves_constant_columns_out_of_the_file_and_the_view_puts_them_back(
        tmp_path: Path) -> None:
    """An inventory without extensions or content_hash: their columns are one literal each,
    not written; the view `normalized` has them, as normalize_inventory made them."""
    inventory = tmp_path / "inventory.parquet"
    pq.write_table(pa.table({"url": [P + "a/1", P + "a/2", "ftp://x"],
                             "lastmod": pa.array([NOV1, None, None], pa.timestamp("s", "UTC"))}),
                   inventory)
    result = load.load(str(inventory), P, str(tmp_path / "work"))
    written = set(pq.ParquetFile(result.normalized_uris[0]).schema_arrow.names)
    left_out = {"content_hash", "ext_xml", "images_dropped", "videos_dropped",
                "alternates_dropped", "deprecated_tags", "extension_fields_invalid",
                "news_dropped", "news_name", "news_language",
                "news_date", "news_title"}
    assert written.isdisjoint(left_out) and {"url", "url_hash", "lastmod", "reason"} <= written
    con = sql.connect()
    load.register_normalized(con, result.normalized_uris[0], result.constant_columns)
    view = con.sql("SELECT * FROM normalized")
    assert left_out <= set(view.columns)
    rows = con.sql("SELECT url, ext_xml, images_dropped, news_date, content_hash, reason "
                   "FROM normalized ORDER BY row_id").fetchall()
    assert rows == [(P + "a/1", "", 0, None, None, None), (P + "a/2", "", 0, None, None, None),
                    (None, "", 0, None, None, "not_http")]
    assert (result.valid_rows, result.rejected) == (2, {"not_http": 1})
    assert extensions.ext_always_empty(result.constant_columns)  # plan's sort leaves ext out
    # read back from load.json by the diff: only literals are ever put into SQL
    with pytest.raises(InternalError, match="not a literal"):
        load.register_normalized(con, result.normalized_uris[0], ("1 AS x; DROP TABLE y",))
