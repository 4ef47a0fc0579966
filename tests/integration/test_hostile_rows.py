"""Hostile rows (issue 14): impossible lastmods are dropped and counted, never published."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.layout import default_state
from pipeline.run import RunOptions, run
from tests.output_check import read_output, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def test_impossible_string_lastmods_are_dropped_and_counted(tmp_path: Path) -> None:
    values = ["-infinity", "infinity", "epoch", "0001-01-01", "1970-01-01T00:00:00Z",
              "1990-12-31", "2026-11-30T09:15:30+01:00", "2026-11-29", "1991-01-01",
              "today", None]
    urls = [f"{SITE}p/{i}" for i in range(len(values))]
    inv = write_inventory(tmp_path / "inv.parquet", {"url": urls, "lastmod": values})
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0))
    assert summary["counts"]["dropped_fields"]["lastmod_invalid"] == 7
    lastmods = read_output(str(out)).lastmods
    assert lastmods[urls[6]] == "2026-11-30T08:15:30Z"
    assert lastmods[urls[7]] == "2026-11-29T00:00:00Z"
    assert lastmods[urls[8]] == "1991-01-01T00:00:00Z"
    # Dropped: the row's lastmod is the run's (a first run), never 1970 or year 1.
    for i in (0, 1, 2, 3, 4, 5, 9):
        assert lastmods[urls[i]] == "2026-12-01T03:00:00Z", (values[i], lastmods[urls[i]])


def test_impossible_timestamp_lastmods_are_dropped_and_counted(tmp_path: Path) -> None:
    values = [datetime(1, 1, 1, tzinfo=UTC), datetime(1970, 1, 1, tzinfo=UTC),
              datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)]
    urls = [f"{SITE}t/{i}" for i in range(len(values))]
    inv = write_inventory(tmp_path / "inv.parquet", {"url": urls, "lastmod": values},
                          pa.schema([("url", pa.string()), ("lastmod", pa.timestamp("us", "UTC"))]))
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0))
    assert summary["counts"]["dropped_fields"]["lastmod_invalid"] == 2
    lastmods = read_output(str(out)).lastmods
    assert [lastmods[u] for u in urls] == ["2026-12-01T03:00:00Z", "2026-12-01T03:00:00Z",
                                           "2026-01-02T03:04:05Z"]


def test_hostile_extension_fields_are_cleaned_or_dropped(tmp_path: Path) -> None:
    """Issue 14, item 11: a control character in a caption would make the whole file
    unparseable; javascript: URLs must never be published; a bad duration is no failure."""
    import gzip

    import pyarrow.parquet as pq

    image = pa.struct([("loc", pa.string()), ("caption", pa.string())])
    video = pa.struct([("thumbnail_loc", pa.string()), ("title", pa.string()),
                       ("description", pa.string()), ("content_loc", pa.string()),
                       ("duration", pa.string())])
    alt = pa.struct([("hreflang", pa.string()), ("href", pa.string())])
    schema = pa.schema([("url", pa.string()), ("images", pa.list_(image)),
                        ("videos", pa.list_(video)), ("alternates", pa.list_(alt))])
    rows = [
        {"url": f"{SITE}g/1", "images": [
            {"loc": f"{SITE}i/1.jpg", "caption": "bell\x07 and\x00 nul\x1f"},
            {"loc": "javascript:alert(1)", "caption": "x"},
            {"loc": "/relative.jpg", "caption": "y"}], "videos": None, "alternates": None},
        {"url": f"{SITE}v/1", "images": None, "videos": [
            {"thumbnail_loc": "javascript:alert(2)", "title": "t", "description": "d",
             "content_loc": f"{SITE}v.mp4", "duration": "60"},
            {"thumbnail_loc": f"{SITE}t.jpg", "title": "t\x0b", "description": "d",
             "content_loc": f"{SITE}v.mp4", "duration": "abc"}], "alternates": None},
        {"url": f"{SITE}h/en", "images": None, "videos": None, "alternates": [
            {"hreflang": "en", "href": f"{SITE}h/en"},
            {"hreflang": "de", "href": "javascript:alert(3)"}]},
    ]
    inv = tmp_path / "inv.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), inv)
    out = tmp_path / "out"
    # captions are deprecated tags: kept here, so that their cleaning shows in the output
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0,
                             keep_deprecated_tags=True))
    dropped = summary["counts"]["dropped_fields"]
    assert (dropped["images_dropped"], dropped["videos_dropped"]) == (2, 1)
    output = read_output(str(out))  # every file parses and validates against the XSDs
    assert sorted(output.locs) == sorted(r["url"] for r in rows)
    body = b"".join(gzip.decompress(p.read_bytes()) for p in (out / "sitemaps").iterdir())
    assert b"javascript:" not in body and b"relative.jpg" not in body
    assert b"<image:caption>bell and nul</image:caption>" in body
    assert b"<video:title>t</video:title>" in body and b"<video:duration>" not in body
    assert b'hreflang="en"' in body and b'hreflang="de"' not in body


def test_invalid_utf8_rows_are_rejected_not_fatal(tmp_path: Path) -> None:
    """Issue 14, item 13: DuckDB refuses a Parquet file with one string that is not UTF-8;
    the run rejects just those rows (`invalid_utf8`, the bytes escaped in the rejects file)
    and publishes the rest, Hive partition values and row ids kept."""
    import duckdb
    import pyarrow.parquet as pq

    from tests.output_check import state_file

    def strings(values: list[bytes | None]) -> pa.Array:
        return pa.array(values, pa.binary()).view(pa.string())  # written as is, unchecked

    inv = tmp_path / "inv"
    for part, rows in {"a": [b"p/1", b"p/\xff\xfe", b"p/3"], "b": [b"p/4", b"p/5"]}.items():
        (inv / f"shop={part}").mkdir(parents=True)
        changefreq = [b"daily", b"daily", b"week\xc3" if part == "a" else b"daily"]
        pq.write_table(pa.table({
            "url": strings([SITE.encode() + r for r in rows]),
            "changefreq": strings(changefreq[:len(rows)])}), inv / f"shop={part}" / "0.parquet")
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0,
                             max_reject_share=0.5))
    assert summary["counts"]["rejected"] == {"invalid_utf8": 2}
    published = read_output(str(out))
    assert sorted(published.locs) == [SITE + "p/1", SITE + "p/4", SITE + "p/5"]
    rejects = duckdb.sql(
        f"SELECT url, reason FROM read_parquet('{state_file(str(out), published.manifest, 'rejects')}') "
        "ORDER BY row_id").fetchall()
    assert rejects == [(SITE + "p/\\xff\\xfe", "invalid_utf8"), (SITE + "p/3", "invalid_utf8")]
    # rows that needed cleaning have no input identity: none is recorded (the next run of
    # them does the work)
    assert not Path(default_state(str(out)), "input-identity.json").exists()


# Issue 40, item 6: one hostile value per facet of the vendored XSDs (and hreflang's rule).
_VIDEO = pa.struct([(f, pa.string()) for f in (
    "thumbnail_loc", "title", "description", "content_loc", "player_loc", "duration",
    "expiration_date", "rating", "view_count", "publication_date", "family_friendly")])
_NEWS = pa.struct([(f, pa.string()) for f in (
    "publication_name", "language", "publication_date", "title")])
_IMAGE = pa.struct([("loc", pa.string()), ("license", pa.string())])
_ALT = pa.struct([("hreflang", pa.string()), ("href", pa.string())])
_EXT_SCHEMA = pa.schema([("url", pa.string()), ("images", pa.list_(_IMAGE)),
                         ("videos", pa.list_(_VIDEO)), ("news", _NEWS),
                         ("alternates", pa.list_(_ALT))])
#: The counters of fields an extension drops.
_EXT_COUNTS = ("images_dropped", "videos_dropped", "alternates_without_self",
               "extension_fields_invalid", "news_dropped")


def _ext_rows(bad: dict[str, dict[str, str]]) -> list[dict[str, object]]:
    """One row per extension, every field valid but those `bad` gives (by extension)."""
    video = {"thumbnail_loc": f"{SITE}t.jpg", "title": "T" * 100, "description": "D" * 2048,
             "content_loc": f"{SITE}v.mp4", "player_loc": f"{SITE}player",
             "duration": "28800", "expiration_date": "2027-01-01", "rating": "5",
             "view_count": "0", "publication_date": "2026-11-01T10:00:00+01:00",
             "family_friendly": "yes", **bad.get("video", {})}
    news = {"publication_name": "The Example", "language": "zh-cn",
            "publication_date": "2026-11-30T22:00:00Z", "title": "N", **bad.get("news", {})}
    image = {"loc": f"{SITE}i.jpg", "license": f"{SITE}license", **bad.get("image", {})}
    alt_en = {"hreflang": "en-GB", "href": f"{SITE}h/en", **bad.get("alt", {})}
    alts = [{"hreflang": "x-default", "href": f"{SITE}h/en"}, alt_en,
            {"hreflang": "de", "href": f"{SITE}h/de"}]
    none = {"images": None, "videos": None, "news": None, "alternates": None}
    return [{**none, "url": f"{SITE}v/1", "videos": [video]},
            {**none, "url": f"{SITE}n/1", "news": news},
            {**none, "url": f"{SITE}i/1", "images": [image]},
            {**none, "url": f"{SITE}h/de", "alternates": alts},
            {**none, "url": f"{SITE}h/en", "alternates": alts[:1] + alts[2:]}]


@pytest.mark.parametrize("bad, counter", [
    ({}, None),  # every value at its facet's limit: all written
    ({"video": {"title": "T" * 101}}, "videos_dropped"),  # maxLength 100
    ({"video": {"description": "D" * 2049}}, "videos_dropped"),  # maxLength 2048
    ({"video": {"thumbnail_loc": "not a URL"}}, "videos_dropped"),  # anyURI
    ({"video": {"content_loc": "javascript:x", "player_loc": "/p"}}, "videos_dropped"),
    ({"video": {"content_loc": "javascript:x"}}, "extension_fields_invalid"),  # anyURI
    ({"video": {"player_loc": "/relative"}}, "extension_fields_invalid"),  # anyURI
    ({"video": {"duration": "28801"}}, "extension_fields_invalid"),  # maxInclusive 28800
    ({"video": {"duration": "-1"}}, "extension_fields_invalid"),  # nonNegativeInteger
    ({"video": {"expiration_date": "infinity"}}, "extension_fields_invalid"),  # xsd:date
    ({"video": {"publication_date": "soon"}}, "extension_fields_invalid"),  # xsd:dateTime
    ({"video": {"rating": "abc"}}, "extension_fields_invalid"),  # xsd:decimal
    ({"video": {"rating": "nan"}}, "extension_fields_invalid"),  # xsd:decimal
    ({"video": {"rating": "7.5"}}, "extension_fields_invalid"),  # maxInclusive 5
    ({"video": {"rating": "-0.5"}}, "extension_fields_invalid"),  # minInclusive 0
    ({"video": {"view_count": "-5"}}, "extension_fields_invalid"),  # nonNegativeInteger
    ({"video": {"view_count": "many"}}, "extension_fields_invalid"),
    ({"video": {"family_friendly": "maybe"}}, "extension_fields_invalid"),  # tYesNo
    ({"image": {"loc": "relative.jpg"}}, "images_dropped"),  # anyURI, required
    ({"image": {"license": "javascript:alert(1)"}}, "extension_fields_invalid"),  # anyURI
    ({"alt": {"hreflang": ""}}, "extension_fields_invalid"),  # Google's rule: a language
    ({"alt": {"hreflang": "English"}}, "extension_fields_invalid"),
    ({"alt": {"href": "javascript:x"}}, "extension_fields_invalid"),  # anyURI
    ({"news": {"language": "en-US"}}, "news_dropped"),  # pattern zh-cn|zh-tw|[a-z]{2,3}
    ({"news": {"language": "English"}}, "news_dropped"),
    ({"news": {"language": "EN"}}, "news_dropped"),
    ({"news": {"publication_date": "yesterday"}}, "news_dropped"),  # xsd:dateTime
], ids=lambda v: (",".join(f"{k}.{f}" for k, d in v.items() for f in d) or "valid")
   if isinstance(v, dict) else str(v))
def test_a_field_failing_its_schema_facet_is_left_out_and_counted(
        tmp_path: Path, bad: dict[str, dict[str, str]], counter: str | None) -> None:
    from pipeline.cli import main
    from pipeline.validate import validate

    rows = _ext_rows(bad)
    inv = tmp_path / "inv.parquet"
    pq_write(pa.Table.from_pylist(rows, schema=_EXT_SCHEMA), inv)
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0,
                             keep_deprecated_tags=True))  # image:license is written
    dropped = summary["counts"]["dropped_fields"]
    assert {k: dropped[k] for k in _EXT_COUNTS} == {k: int(k == counter) for k in _EXT_COUNTS}
    result = validate(str(out))  # lxml against the vendored XSDs, and Google's hreflang rules
    assert result.ok and result.urls == len(rows), result.problems
    assert main(["validate", "--out", str(out)]) == 0
    assert summary["counts"]["news_articles"] == int(counter != "news_dropped")


def pq_write(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)


# Issue 40, item 7: a row whose <url> line no sitemap file can hold.
_CAPTIONED = pa.schema([("url", pa.string()), ("images", pa.list_(pa.struct(
    [("loc", pa.string()), ("caption", pa.string())])))])


def _captioned_rows(captions: dict[str, list[str]], plain: int) -> pa.Table:
    rows = [{"url": url, "images": [{"loc": f"{SITE}i/{n}.jpg", "caption": c}
                                    for n, c in enumerate(caps)]}
            for url, caps in captions.items()]
    rows += [{"url": f"{SITE}p/{i}", "images": None} for i in range(plain)]
    return pa.Table.from_pylist(rows, schema=_CAPTIONED)


def _line_bytes(url: str, captions: list[str]) -> int:
    """The bytes of a first run's <url> line for `url` with these images (as url_line)."""
    images = "".join(f"<image:image><image:loc>{SITE}i/{n}.jpg</image:loc><image:caption>{c}"
                     "</image:caption></image:image>" for n, c in enumerate(captions))
    return len(f"<url><loc>{url}</loc><lastmod>2026-12-01T03:00:00Z</lastmod>{images}</url>\n")


def test_a_row_no_sitemap_file_can_hold_is_rejected_and_the_run_goes_on(tmp_path: Path) -> None:
    """A lower --max-bytes-per-sitemap stands in for the protocol's 50 MiB: one row over the
    budget of any file (the limit less the largest header and footer) is rejected as
    too_large; one exactly at it is published."""
    import duckdb
    import pyarrow.parquet as pq

    from pipeline.config import Limits
    from pipeline.validate import validate
    from tests.output_check import state_file

    limits = Limits(max_bytes=20_000)
    over, at = f"{SITE}g/over", f"{SITE}g/at"
    fill = limits.body_budget - _line_bytes(at, ["", ""])
    captions = {over: ["c" * (fill // 2), "c" * (fill - fill // 2 + 1)],
                at: ["c" * (fill // 2), "c" * (fill - fill // 2)]}
    assert _line_bytes(at, captions[at]) == limits.body_budget
    inv = tmp_path / "inv.parquet"
    pq.write_table(_captioned_rows(captions, plain=30), inv)
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0,
                             keep_deprecated_tags=True, limits=limits))
    assert summary["counts"]["rejected"] == {"too_large": 1}
    published = read_output(str(out), max_bytes=limits.max_bytes)
    assert over not in published.locs and at in published.locs and len(published.locs) == 31
    assert validate(str(out)).ok
    rejects = duckdb.sql(
        f"SELECT url, reason FROM read_parquet('{state_file(str(out), published.manifest, 'rejects')}')"
    ).fetchall()
    assert rejects == [(over, "too_large")]


def test_a_row_over_50_mib_is_rejected_at_the_protocols_limit(tmp_path: Path) -> None:
    """The real case: 1,000 images (the most a URL may list) with 53 KB captions (no facet
    limits a caption) make a 53 MB line, which no 52,428,800-byte file holds."""
    import pyarrow.parquet as pq

    big = f"{SITE}g/huge"
    inv = tmp_path / "inv.parquet"
    pq.write_table(_captioned_rows({big: ["c" * 53_000] * 1_000}, plain=30), inv)
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0,
                             keep_deprecated_tags=True))
    assert summary["counts"]["rejected"] == {"too_large": 1}
    published = read_output(str(out))
    assert big not in published.locs and len(published.locs) == 30


def test_a_news_article_too_large_for_any_file_is_rejected(tmp_path: Path) -> None:
    """The news element, which the diff adds, counts: a title no file can hold (no facet
    limits a news title) makes the row too_large at load."""
    import pyarrow.parquet as pq

    from pipeline.config import Limits

    news = pa.struct([(f, pa.string()) for f in ("publication_name", "language",
                                                "publication_date", "title")])
    schema = pa.schema([("url", pa.string()), ("news", news)])
    article = {"publication_name": "P", "language": "en",
               "publication_date": "2026-11-30T12:00:00Z"}
    limits = Limits(max_bytes=20_000)
    rows = [{"url": f"{SITE}n/big", "news": {**article, "title": "t" * limits.body_budget}},
            {"url": f"{SITE}n/ok", "news": {**article, "title": "t" * 100}},
            *({"url": f"{SITE}p/{i}", "news": None} for i in range(30))]
    inv = tmp_path / "inv.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), inv)
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=T0,
                             limits=limits))
    assert summary["counts"]["rejected"] == {"too_large": 1}
    assert summary["counts"]["news_articles"] == 1
    published = read_output(str(out), max_bytes=limits.max_bytes)
    assert f"{SITE}n/big" not in published.locs and len(published.locs) == 31
