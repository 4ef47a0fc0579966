"""End to end on a local output folder: limits, escaping, sections, indexes, rejects."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.config import Limits
from pipeline.errors import InventoryError, TooManyRejects
from pipeline.run import RunOptions, run
from tests.output_check import read_output, state_file, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"


def _run(tmp_path: Path, urls: list[str], **kw: object) -> dict:
    inv = write_inventory(tmp_path / "inv.parquet", {"url": urls})
    opts = RunOptions(inventory=str(inv), site_url=kw.pop("site_url", SITE),  # type: ignore[arg-type]
                      out=str(tmp_path / "out"), **kw)  # type: ignore[arg-type]
    return run(opts)


@pytest.mark.parametrize("n, files", [(9, 1), (10, 1), (11, 2), (25, 3)])
def test_url_limit_splits_exactly(tmp_path: Path, n: int, files: int) -> None:
    urls = [f"{SITE}product/{i:04d}" for i in range(n)]
    summary = _run(tmp_path, urls, limits=Limits(max_urls=10))
    out = read_output(str(tmp_path / "out"), max_urls=10)
    assert len(out.files) == files
    assert sorted(out.locs) == sorted(urls)
    assert summary["counts"]["published"] == n
    assert sorted(len(v) for v in out.files.values())[-1] == min(n, 10)
    # The exact shard of every URL: shards in number order hold the sorted URLs, 10 at a
    # time (not one a shard, not out of order).
    in_order = [out.files[k] for k in sorted(out.files)]
    assert in_order == [sorted(urls)[i:i + 10] for i in range(0, n, 10)]


def test_byte_limit_hit_before_url_limit(tmp_path: Path) -> None:
    urls = [f"{SITE}article/{'x' * 200}-{i:05d}" for i in range(300)]
    max_bytes = 10_000
    _run(tmp_path, urls, limits=Limits(max_urls=1000, max_bytes=max_bytes))
    out = read_output(str(tmp_path / "out"), max_bytes=max_bytes)
    assert len(out.files) > 1
    assert all(size <= max_bytes for size in out.raw_sizes.values())
    # Files are filled close to the limit (within two entries of it), not split early.
    entry = len(f"<url><loc>{urls[0]}</loc><lastmod>2026-12-02T00:00:00Z</lastmod></url>\n")
    full = sorted(out.raw_sizes.values())[1:]  # all but the remainder
    assert all(size > max_bytes - 2 * entry for size in full)
    assert sorted(out.locs) == sorted(urls)


def test_escaping_and_non_ascii(tmp_path: Path) -> None:
    urls = [
        f"{SITE}search/q?a=1&b=2",
        f"{SITE}people/o'neil",
        f"{SITE}café/crème brûlée",
        f"{SITE}日本/東京",
        f"{SITE}tags/<b>\"quoted\"",
        "https://WWW.EXAMPLE.COM:443/product/Upper#frag",
    ]
    _run(tmp_path, urls)
    out = read_output(str(tmp_path / "out"))
    assert sorted(out.locs) == sorted([
        f"{SITE}search/q?a=1&b=2",
        f"{SITE}people/o'neil",
        f"{SITE}caf%C3%A9/cr%C3%A8me%20br%C3%BBl%C3%A9e",
        f"{SITE}%E6%97%A5%E6%9C%AC/%E6%9D%B1%E4%BA%AC",
        f"{SITE}tags/%3Cb%3E%22quoted%22",
        f"{SITE}product/Upper",
    ])
    raw = b"".join(gzip.decompress((tmp_path / "out" / k).read_bytes()) for k in out.files)
    assert b"q?a=1&amp;b=2" in raw and b"o&apos;neil" in raw


def test_sections_shard_names_and_multiple_indexes(tmp_path: Path) -> None:
    urls = ([f"{SITE}product/{i}" for i in range(30)] + [f"{SITE}blog/{i}" for i in range(12)]
            + [f"{SITE}about", f"{SITE}"])
    summary = _run(tmp_path, urls, limits=Limits(max_urls=10, max_sitemaps_per_index=2))
    out = read_output(str(tmp_path / "out"), max_urls=10, max_per_index=2)
    names = sorted(Path(k).name.rsplit("-", 1)[0] for k in out.files)
    assert names == ["blog-00000", "blog-00001", "product-00000", "product-00001",
                     "product-00002", "root-00000"]
    indexes = [i["key"] for i in out.manifest["indexes"]]
    assert indexes == ["sitemap_index.xml", "sitemap_index-2.xml", "sitemap_index-3.xml"]
    robots = (tmp_path / "out" / "robots-sitemaps.txt").read_text()
    # Every index, then the feed (a run writes one by default, as `sitemaps run` does).
    assert robots == "".join(f"Sitemap: {SITE}{k}\n" for k in [*indexes, "feed.atom"])
    assert summary["root_indexes"] == [f"{SITE}{k}" for k in indexes]


def test_public_url_builds_every_index_loc(tmp_path: Path) -> None:
    public = "https://www.example.com/static/sitemaps/"
    summary = _run(tmp_path, [f"{SITE}a/1", f"{SITE}a/2"], public_url=public)
    out = read_output(str(tmp_path / "out"))
    assert all(s["url"].startswith(public) for s in out.manifest["sitemaps"])
    assert summary["root_indexes"] == [public + "sitemap_index.xml"]
    assert any("cross-submission" in w for w in summary["warnings"])


def test_rejects_are_counted_and_written(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    good = [f"{SITE}p/{i}" for i in range(100)]
    bad = ["https://other.example.org/p/1", "ftp://www.example.com/x", None, "",
           f"{SITE}p/" + "y" * 2100, f"{SITE}p/1", "/p/2"]
    summary = _run(tmp_path, good + bad, max_reject_share=0.5)
    c = summary["counts"]
    assert c["rejected"] == {"duplicate": 1, "empty": 2, "not_http": 1, "off_site": 1,
                             "relative": 1, "too_long": 1}
    assert c["input_rows"] == c["published"] + c["rejected_rows"] == 107
    out = read_output(str(tmp_path / "out"))
    rejects = pq.read_table(state_file(str(tmp_path / "out"), out.manifest, "rejects")).to_pylist()
    by_reason: dict[str, int] = {}
    for r in rejects:
        by_reason[r["reason"]] = by_reason.get(r["reason"], 0) + 1
    assert by_reason == c["rejected"]
    assert {r["url"] for r in rejects if r["reason"] == "off_site"} == {bad[0]}


def test_site_path_limits_what_is_published(tmp_path: Path) -> None:
    urls = ["https://ex.com/shop/a/1", "https://ex.com/shop/b/2", "https://ex.com/blog/x",
            "https://ex.com/shopping/y"]
    summary = _run(tmp_path, urls, site_url="https://ex.com/shop/", max_reject_share=1.0)
    out = read_output(str(tmp_path / "out"))
    assert sorted(out.locs) == urls[:2]
    assert summary["counts"]["rejected"] == {"off_site": 2}


def test_too_many_rejects_fail_before_publishing(tmp_path: Path) -> None:
    with pytest.raises(TooManyRejects, match="rejected"):
        _run(tmp_path, [f"{SITE}a/1", "https://other.org/x"])
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.parametrize("columns, message", [
    ({"link": ["https://www.example.com/a"]}, "no `url` column"),
    ({"url": [1, 2, 3]}, "`url` column is BIGINT"),
    ({"url": [f"{SITE}a/1"], "lastmod": ["garbage"]}, "lastmod"),
])
def test_schema_errors_are_clear_and_write_nothing(tmp_path: Path, columns: dict,
                                                   message: str) -> None:
    inv = write_inventory(tmp_path / "inv.parquet", columns)
    with pytest.raises(InventoryError, match=message):
        run(RunOptions(inventory=str(inv), site_url=SITE, out=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.gz"))


def test_missing_and_corrupt_inventory(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="matches no Parquet"):
        run(RunOptions(inventory=str(tmp_path / "nothing/*.parquet"), site_url=SITE,
                       out=str(tmp_path / "out")))
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InventoryError, match="bad.parquet"):
        run(RunOptions(inventory=str(bad), site_url=SITE, out=str(tmp_path / "out")))
    empty = tmp_path / "zero.parquet"
    empty.write_bytes(b"")
    with pytest.raises(InventoryError, match="zero.parquet"):
        run(RunOptions(inventory=str(empty), site_url=SITE, out=str(tmp_path / "out")))
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_hive_folder_and_glob_inventory(tmp_path: Path) -> None:
    for part in ("a", "b"):
        write_inventory(tmp_path / "inv" / f"site={part}" / "part-0.parquet",
                        {"url": [f"{SITE}{part}/{i}" for i in range(5)]})
    summary = run(RunOptions(inventory=str(tmp_path / "inv"), site_url=SITE,
                             out=str(tmp_path / "out1")))
    assert summary["counts"]["published"] == 10
    summary = run(RunOptions(inventory=str(tmp_path / "inv" / "*" / "*.parquet"), site_url=SITE,
                             out=str(tmp_path / "out2")))
    assert summary["counts"]["published"] == 10


def test_inventory_lastmod_types(tmp_path: Path) -> None:
    when = datetime(2026, 11, 30, 8, 15, 30, tzinfo=UTC)
    write_inventory(tmp_path / "inv.parquet", {
        "url": [f"{SITE}a/1", f"{SITE}a/2", f"{SITE}a/3"],
        "lastmod": ["2026-11-30T09:15:30+01:00", "2026-11-29", "not a date"],
        "changefreq": ["DAILY", "sometimes", None],
        "priority": [0.8, 1.5, None],
    })
    summary = run(RunOptions(inventory=str(tmp_path / "inv.parquet"), site_url=SITE,
                             out=str(tmp_path / "out"), run_time=datetime(2026, 12, 2, tzinfo=UTC)))
    out = read_output(str(tmp_path / "out"))
    assert out.lastmods[f"{SITE}a/1"] == when.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert out.lastmods[f"{SITE}a/2"] == "2026-11-29T00:00:00Z"
    assert out.lastmods[f"{SITE}a/3"] == "2026-12-02T00:00:00Z"  # first seen now
    assert summary["counts"]["dropped_fields"] == {
        "lastmod_invalid": 1, "changefreq_invalid": 1, "priority_invalid": 1,
        "images_dropped": 0, "videos_dropped": 0, "alternates_without_self": 0,
        "deprecated_tags": 0, "extension_fields_invalid": 0, "news_dropped": 0,
        "alternates_not_reciprocal": 0}


def test_lastmods_of_a_year_or_a_month(tmp_path: Path) -> None:
    # W3C datetimes too: the first instant of the year or month, in the pipeline's one form
    write_inventory(tmp_path / "inv.parquet", {
        "url": [f"{SITE}a/1", f"{SITE}a/2", f"{SITE}a/3"],
        "lastmod": ["2026-11", "2025", "2026-02"]})
    summary = run(RunOptions(inventory=str(tmp_path / "inv.parquet"), site_url=SITE,
                             out=str(tmp_path / "out"), run_time=datetime(2026, 12, 2, tzinfo=UTC)))
    assert summary["counts"]["dropped_fields"]["lastmod_invalid"] == 0
    assert read_output(str(tmp_path / "out")).lastmods == {
        f"{SITE}a/1": "2026-11-01T00:00:00Z", f"{SITE}a/2": "2025-01-01T00:00:00Z",
        f"{SITE}a/3": "2026-02-01T00:00:00Z"}


def test_timestamp_column(tmp_path: Path) -> None:
    write_inventory(tmp_path / "inv.parquet", {
        "url": [f"{SITE}a/1"], "lastmod": [datetime(2026, 1, 2, 3, 4, 5)]},
        schema=pa.schema([("url", pa.string()), ("lastmod", pa.timestamp("us"))]))
    run(RunOptions(inventory=str(tmp_path / "inv.parquet"), site_url=SITE,
                   out=str(tmp_path / "out")))
    assert read_output(str(tmp_path / "out")).lastmods[f"{SITE}a/1"] == "2026-01-02T03:04:05Z"


def test_plain_text_sitemaps(tmp_path: Path) -> None:
    urls = [f"{SITE}a/{i:03d}?x=1&y=2" for i in range(25)] + [f"{SITE}b/é"]
    _run(tmp_path, urls, limits=Limits(max_urls=10), format="txt")
    import json

    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    lines: list[str] = []
    for s in manifest["sitemaps"]:
        assert s["key"].endswith(".txt.gz") and s["urls"] <= 10
        body = gzip.decompress((out / s["key"]).read_bytes()).decode()
        assert len(body.encode()) == s["bytes"] and body.endswith("\n")
        lines += body.splitlines()
    assert sorted(lines) == sorted(urls[:-1] + [f"{SITE}b/%C3%A9"])
