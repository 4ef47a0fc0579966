"""`sitemaps explain URL`: two real runs (the second changes one URL and removes another),
then the answer for a published URL in another spelling, a rejected one with its reason and
value, a duplicate, one not in the inventory and the removed one's history; exit codes and
the JSON's shape; and the same on S3."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline.cli import main
from pipeline.explain import explain
from pipeline.run import run
from pipeline.settings import RunOptions
from tests.output_check import write_inventory

pytestmark = pytest.mark.integration

SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
SCHEMA = pa.schema([("url", pa.string()), ("lastmod", pa.timestamp("us", tz="UTC")),
                    ("http_status", pa.int16())])
DAY1 = datetime(2026, 11, 1, tzinfo=UTC)
DAY2 = datetime(2026, 11, 20, tzinfo=UTC)


def inventory_rows(second: bool) -> list[tuple[str, datetime | None, int | None]]:
    """Ten shop items (the second run: item-1 changed, item-0 gone), a duplicate whose newer
    row wins, and four rejects of different reasons."""
    rows: list[tuple[str, datetime | None, int | None]] = [
        (f"{SITE}shop/item-{i}", DAY2 if second and i == 1 else DAY1, None)
        for i in range(1 if second else 0, 10)]
    rows += [
        (f"{SITE}shop/dup", DAY1, None),
        (f"{SITE}shop/dup", DAY2, None),  # row 2 of the URL: the newest lastmod wins
        ("HTTPS://WWW.EXAMPLE.COM/shop/gone", DAY1, 404),  # not_200, given in another spelling
        ("ftp://www.example.com/shop/file", None, None),  # not_http
        ("https://other.example.org/shop/x", None, None),  # off_site
        (f"{SITE}shop/bad%zz", None, None),  # bad_percent_encoding
    ]
    return rows


def publish_twice(inventory_at: Any, out: str, tmp_path: Path, **extra: Any) -> None:
    for n, second in enumerate((False, True)):
        rows = inventory_rows(second)
        path = write_inventory(tmp_path / f"inv{n}.parquet", {
            "url": [r[0] for r in rows], "lastmod": [r[1] for r in rows],
            "http_status": [r[2] for r in rows]}, SCHEMA)
        summary = run(RunOptions(inventory=inventory_at(path), site_url=SITE, out=out,
                                 run_time=T0 + timedelta(days=n), max_reject_share=0.9,
                                 allow_shrink=True, report=False, feed_days=0, **extra))
        assert summary["published"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("explain")
    out = str(tmp / "out")
    publish_twice(str, out, tmp)
    return out


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["-q", "explain", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_published_url_in_another_spelling(out: str, capsys: pytest.CaptureFixture[str]) -> None:
    answer = explain(out, "HTTPS://WWW.Example.COM:443/shop/item-3#top")
    assert answer.normalized == f"{SITE}shop/item-3"
    assert answer.published and answer.verdict == "published" and not answer.rejects
    listing = answer.listing
    assert listing is not None
    assert listing.sitemap_url.startswith(f"{SITE}sitemaps/shop-00000-")
    assert listing.index_url == f"{SITE}sitemap_index.xml"
    assert listing.lastmod == "2026-11-01T00:00:00Z"
    # published in both runs, unchanged by the second: unchanged since the first
    assert [(g.published, g.change) for g in answer.history] == [(True, None), (True, "added")]
    assert answer.unchanged_since == answer.history[-1].generation
    code, text, _ = cli(capsys, "https://www.example.com:443/shop/item-3", "--out", out)
    assert code == 0
    assert f"sitemap: {listing.sitemap_url}" in text and "index: " in text


def test_a_changed_url_is_unchanged_since_the_run_that_changed_it(out: str) -> None:
    answer = explain(out, f"{SITE}shop/item-1")
    assert [(g.published, g.change) for g in answer.history] == [(True, "changed"),
                                                                 (True, "added")]
    assert answer.unchanged_since == answer.generation
    assert answer.listing is not None and answer.listing.lastmod == "2026-11-20T00:00:00Z"


def test_a_rejected_url_says_its_reason_and_value(out: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    answer = explain(out, f"{SITE}shop/gone")
    assert not answer.published and answer.verdict == "rejected"
    [reject] = answer.rejects
    assert reject.reason == "not_200" and "http_status" in reject.why
    assert reject.url == "HTTPS://WWW.EXAMPLE.COM/shop/gone"  # as it came in
    assert reject.lastmod == "2026-11-01T00:00:00Z"
    code, text, _ = cli(capsys, f"{SITE}shop/gone", "--out", out)
    assert code == 1
    assert "rejected: not_200" in text and "HTTPS://WWW.EXAMPLE.COM/shop/gone" in text


def test_a_duplicate_names_the_row_that_won(out: str, capsys: pytest.CaptureFixture[str]) -> None:
    answer = explain(out, f"{SITE}shop/dup")
    assert answer.published and answer.verdict == "duplicate"
    [lost] = answer.rejects
    assert lost.reason == "duplicate" and lost.lastmod == "2026-11-01T00:00:00Z"
    assert "newest lastmod" in lost.why
    assert answer.listing is not None and answer.listing.lastmod == "2026-11-20T00:00:00Z"
    code, text, _ = cli(capsys, f"{SITE}shop/dup", "--out", out, "--json")
    assert code == 0
    assert json.loads(text)["verdict"] == "duplicate"


def test_a_url_not_in_the_inventory(out: str, capsys: pytest.CaptureFixture[str]) -> None:
    answer = explain(out, f"{SITE}shop/never")
    assert not answer.published and answer.verdict == "not_in_inventory"
    assert [(g.published, g.change) for g in answer.history] == [(False, None), (False, None)]
    code, text, _ = cli(capsys, f"{SITE}shop/never", "--out", out)
    assert code == 1 and "not in the inventory" in text


def test_a_removed_url_has_its_history(out: str, capsys: pytest.CaptureFixture[str]) -> None:
    answer = explain(out, f"{SITE}shop/item-0")
    assert not answer.published and answer.verdict == "not_in_inventory"
    assert [(g.published, g.change) for g in answer.history] == [(False, "removed"),
                                                                 (True, "added")]
    assert answer.history[0].live and answer.history[1].sitemap_url is not None
    code, text, _ = cli(capsys, f"{SITE}shop/item-0", "--out", out, "--json")
    assert code == 1
    shape = json.loads(text)
    assert set(shape) == {"url", "normalized", "out", "generation", "published", "verdict",
                          "listing", "rejects", "unchanged_since", "history"}
    assert shape["listing"] is None and shape["published"] is False
    assert [h["change"] for h in shape["history"]] == ["removed", "added"]
    assert set(shape["history"][0]) == {"generation", "live", "created", "published", "change",
                                        "sitemap_url"}


def test_bad_input_exits_2(out: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, f"{SITE}shop/bad%zz", "--out", out)
    assert code == 2 and "bad_percent_encoding" in err
    code, _, err = cli(capsys, "https://other.example.org/shop/x", "--out", out)
    assert code == 2 and "not on the site" in err
    code, _, err = cli(capsys, "/shop/item-3", "--out", out)
    assert code == 2 and "relative" in err
    code, _, err = cli(capsys, f"{SITE}shop/item-3", "--out", str(tmp_path / "nothing"))
    assert code == 2 and "no generation at" in err


def test_explain_on_s3(s3_bucket: Any, tmp_path: Path) -> None:
    def upload(path: Path) -> str:
        s3_bucket.client.upload_file(str(path), s3_bucket.name, f"inv/{path.name}")
        return s3_bucket.url(f"inv/{path.name}")

    out = s3_bucket.url("site/out/")
    publish_twice(upload, out, tmp_path)
    published = explain(out, "https://WWW.EXAMPLE.COM/shop/item-1")
    assert published.published and published.listing is not None
    assert [g.change for g in published.history] == ["changed", "added"]
    removed = explain(out, f"{SITE}shop/item-0")
    assert [(g.published, g.change) for g in removed.history] == [(False, "removed"),
                                                                  (True, "added")]
    rejected = explain(out, f"{SITE}shop/gone")
    assert [r.reason for r in rejected.rejects] == ["not_200"]
