"""The run report after real runs: counts, rejects by reason, per-section freshness, embedded
charts, the trend, one page per generation, under the private state prefix."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lxml import html as lxml_html

from pipeline.config import Limits
from pipeline.notify.report import (
    MAX_SHARD_BARS,
    REPORT_KEY,
    read_report,
    render_report,
    write_generation_report,
    write_report,
)
from pipeline.run import RunOptions, run
from tests.output_check import write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
LIMITS = Limits(max_urls=10)
SVG = "{http://www.w3.org/2000/svg}"


def publish_two(tmp_path: Path) -> tuple[str, list[dict]]:
    out = str(tmp_path / "out")
    urls = [f"{SITE}product/{i:03d}" for i in range(25)] + [f"{SITE}blog/{i}" for i in range(4)]
    bad = ["https://other.example.org/x", "ftp://www.example.com/y"]
    summaries = []
    for n, inventory in enumerate([urls + bad, urls[1:] + [f"{SITE}news/1"] + bad]):
        inv = write_inventory(tmp_path / f"inv{n}.parquet", {"url": inventory})
        summaries.append(run(RunOptions(inventory=str(inv), site_url=SITE, out=out,
                                        limits=LIMITS, max_reject_share=0.2,
                                        run_time=T0 + timedelta(days=n))))
    return out, summaries


def cells(doc: lxml_html.HtmlElement, table: str) -> dict[str, str]:
    rows = doc.xpath(f"//table[{table}]//tr[td]")
    return {r.xpath("td[1]")[0].text_content(): r.xpath("td[2]")[0].text_content() for r in rows}


def charts(page: str) -> list[ET.Element]:
    """The page's inline SVG charts, each parsed as XML (so well-formed)."""
    found = [ET.fromstring(svg) for svg in re.findall(r"<svg\b.*?</svg>", page, re.DOTALL)]
    for chart in found:
        assert chart.get("role") == "img" and chart.get("aria-label")
        assert chart.findtext(f"{SVG}title") == chart.get("aria-label")
    return found


def texts(chart: ET.Element) -> list[str]:
    return [t.text or "" for t in chart.iter(f"{SVG}text")]


def test_report_shows_counts_charts_sections_and_trend(tmp_path: Path) -> None:
    out, summaries = publish_two(tmp_path)
    uri = write_report(out, limits=LIMITS)
    gen = summaries[-1]["generation"]
    # Internal: beside the generation's private state, nothing under the served output.
    assert uri == f"{out}.state/generations/{gen}/{REPORT_KEY}"
    assert list(Path(out).rglob("*.html")) == []
    page = Path(uri).read_text(encoding="utf-8")
    assert read_report(out, gen) == page.encode("utf-8")
    doc = lxml_html.fromstring(page)
    assert gen in doc.findtext(".//h1")

    c = summaries[-1]["counts"]
    counts = cells(doc, "@class='counts'")
    assert counts["input rows"] == f"{c['input_rows']:,}" == "31"
    assert counts["published URLs"] == "29"
    assert (counts["added"], counts["removed"], counts["changed"]) == ("1", "1", "0")
    assert counts["rejected rows"] == "2"
    assert counts["shards written"] == str(c["shards_written"])
    assert counts["shards reused"] == str(c["shards_reused"])
    reasons = cells(doc, "tr/th[1][text()='reason']")
    assert reasons == {"not_http": "1", "off_site": "1"}
    assert doc.xpath("//table[@class='rejects']//tr[td]/td[4]/text()") == ["URL rules"] * 2

    # Freshness from the snapshot: the second run (a day later) added news/1; every other
    # URL kept its lastmod of the first run, a day before: not within 24 hours.
    fresh = {r.xpath("td[1]")[0].text_content(): [td.text_content() for td in r.xpath("td")[1:]]
             for r in doc.xpath("//table[@class='freshness']//tr[td]")}
    assert fresh["all sections"] == ["29", "2026-12-02T03:00:00Z", "1", "29"]
    assert fresh["product"] == ["24", "2026-12-01T03:00:00Z", "0", "24"]
    assert fresh["news"] == ["1", "2026-12-02T03:00:00Z", "1", "1"]

    fill, largest, trend = charts(page)
    assert "<img" not in page
    # Shard fill: two bars (URLs, bytes) per sitemap file, named section-shard, and the limit.
    files = ["blog-0", "news-0", "product-0", "product-1", "product-2"]
    assert counts["sitemap files"] == str(len(files))
    assert len(fill.findall(f"{SVG}rect[@class='bar']")) == 2 * len(files)
    assert sorted(t for t in texts(fill) if t in files) == files
    assert {"URLs (limit 10)", "limit", "125"} <= set(texts(fill))
    assert "20 URLs" not in page and "10 URLs" in page  # the run's limits, not the protocol's
    # Largest sections: one bar per section, largest first, as long as its URLs.
    bars = largest.findall(f"{SVG}rect[@class='bar']")
    assert [b.findtext(f"{SVG}title") for b in bars] == ["product: 24", "blog: 4", "news: 1"]
    widths = [float(b.get("width", "")) for b in bars]
    assert widths[0] > widths[1] > widths[2] > 0 and widths[0] / widths[1] == pytest.approx(6, 0.01)
    # Trend: a point per generation (oldest first, higher when more URLs are published) over
    # the added/changed/removed bars.
    points = trend.findall(f"{SVG}circle[@class='point']")
    assert len(points) == len(summaries) == 2
    assert float(points[0].get("cx", "")) < float(points[1].get("cx", ""))
    assert len(trend.findall(f"{SVG}rect[@class='bar']")) == 3 * len(summaries)
    assert {"added", "changed", "removed", "2026-12-02 03:00:00"} <= set(texts(trend))

    sections = cells(doc, "tr/th[4][text()='bytes (uncompressed)']")
    assert list(sections) == ["product", "blog", "news"] and sections["product"] == "24"
    trend_gens = doc.xpath("//table[tr/th[1][text()='generation']]//tr/td[1]/text()")
    assert trend_gens == [s["generation"] for s in reversed(summaries)]
    # Self-contained: the SVG namespace is a name, not something to load.
    assert not re.search(r"https?://(?!www\.example\.com|www\.w3\.org/2000/svg\b)", page)


def test_an_older_generation_keeps_its_own_report(tmp_path: Path) -> None:
    out, summaries = publish_two(tmp_path)
    first = summaries[0]["generation"]
    uri = write_generation_report(out, first)
    assert uri == f"{out}.state/generations/{first}/{REPORT_KEY}"
    page = Path(uri).read_text(encoding="utf-8")
    assert first in page and summaries[1]["generation"] not in page
    assert not Path(out, REPORT_KEY).exists()  # nothing served
    # Elsewhere with report_to (`--report-to`, `report_to` in the site TOML).
    elsewhere = write_generation_report(out, first, report_to=str(tmp_path / "reports"))
    assert elsewhere == f"{tmp_path}/reports/generations/{first}/{REPORT_KEY}"
    assert read_report(out, first, report_to=str(tmp_path / "reports"), write_missing=False) \
        == Path(elsewhere).read_bytes()


def test_every_reject_reason_is_shown_the_gate_marked() -> None:
    manifest = {"generation": "g", "created": "2026-12-01T03:00:00Z", "site_url": SITE,
                "indexes": [], "sitemaps": [],
                "counts": {"input_rows": 1000, "published": 900, "rejected": {
                    "not_200": 40, "noindex": 30, "not_canonical": 20, "redirect": 5,
                    "off_site": 4, "some_future_reason": 1}}}
    doc = lxml_html.fromstring(render_report(manifest, []))
    rows = [[td.text_content() for td in r.xpath("td")]
            for r in doc.xpath("//table[@class='rejects']//tr[td]")]
    assert rows == [["not_200", "40", "4.00%", "indexability gate"],
                    ["noindex", "30", "3.00%", "indexability gate"],
                    ["not_canonical", "20", "2.00%", "indexability gate"],
                    ["redirect", "5", "0.50%", "indexability gate"],
                    ["off_site", "4", "0.40%", "URL rules"],
                    ["some_future_reason", "1", "0.10%", "URL rules"]]


def test_many_shards_are_drawn_as_fill_curves_fullest_first() -> None:
    n = MAX_SHARD_BARS + 1
    sitemaps = [{"section": "product", "shard": i, "urls": 1 + i * 97 % 50_000,
                 "bytes": 1_000 + i * 7_919 % 50_000_000} for i in range(n)]
    manifest = {"generation": "g", "created": "2026-12-01T03:00:00Z", "site_url": SITE,
                "indexes": [], "sitemaps": sitemaps, "counts": {}}
    fill = charts(render_report(manifest, []))[0]
    assert fill.findall(f"{SVG}rect[@class='bar']") == []
    lines = fill.findall(f"{SVG}polyline")
    assert len(lines) == 2  # URLs and bytes
    for line in lines:
        ys = [float(p.split(",")[1]) for p in line.get("points", "").split()]
        assert len(ys) == n and ys == sorted(ys)  # fullest (highest, smallest y) first
    assert f"{n:,} sitemap files, fullest first" in texts(fill)


def test_a_hostile_section_name_is_text_in_every_chart() -> None:
    name = 'a<b & "c"</svg><script>x()</script>'
    sitemaps = [{"section": name, "shard": 0, "urls": 5, "bytes": 500}]
    manifest = {"generation": "g", "created": "2026-12-01T03:00:00Z", "site_url": SITE,
                "indexes": [], "sitemaps": sitemaps, "counts": {}}
    page = render_report(manifest, [])
    assert "<script" not in page
    fill, largest = charts(page)  # well-formed: the name did not end an element
    assert f"{name}-0" in ["".join(t.itertext()) for t in fill.iter(f"{SVG}text")]
    assert largest.findtext(f"{SVG}rect/{SVG}title") == f"{name}: 5"
