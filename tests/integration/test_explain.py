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
import pyarrow.parquet as pq
import pytest

from pipeline import sql
from pipeline.cli import main
from pipeline.explain import explain, find_rejects
from pipeline.run import run
from pipeline.settings import RunOptions
from pipeline.urls import Site
from tests.output_check import state_file, write_inventory

pytestmark = pytest.mark.integration

SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
SCHEMA = pa.schema([("url", pa.string()), ("lastmod", pa.timestamp("us", tz="UTC")),
                    ("changefreq", pa.string()), ("http_status", pa.int16()),
                    ("redirect_to", pa.string()), ("noindex", pa.bool_()),
                    ("canonical_url", pa.string())])
DAY1 = datetime(2026, 11, 1, tzinfo=UTC)
DAY2 = datetime(2026, 11, 20, tzinfo=UTC)
LONG_URL = f"{SITE}shop/{'é' * 400}"  # 417 characters, 2,417 once encoded: too_long


def row(url: str, lastmod: datetime | None = None, **gate: Any) -> dict[str, Any]:
    return {"url": url, "lastmod": lastmod, **gate}


def inventory_rows(second: bool) -> list[dict[str, Any]]:
    """Ten shop items (the second run: item-1 changed, item-0 gone), duplicates that lose by
    each tie rule, rejects of the indexability gate and of bad URLs."""
    rows = [row(f"{SITE}shop/item-{i}", DAY2 if second and i == 1 else DAY1)
            for i in range(1 if second else 0, 10)]
    rows += [
        row(f"{SITE}shop/dup", DAY1),
        row(f"{SITE}shop/dup", DAY2),  # the newest lastmod wins
        row(f"{SITE}shop/dated"),
        row(f"{SITE}shop/dated", DAY1),  # a lastmod wins over none
        row(f"{SITE}shop/tie", DAY1, changefreq="daily"),
        row(f"{SITE}shop/tie", DAY1, changefreq="weekly"),  # the smaller content hash wins
        row(f"{SITE}shop/twin", DAY1),  # the first of one content wins
        row(f"{SITE}shop/twin", DAY1),
        row("HTTPS://WWW.EXAMPLE.COM/shop/gone", DAY1, http_status=404),  # another spelling
        row(f"{SITE}shop/moved", redirect_to=f"{SITE}shop/new"),
        row(f"{SITE}shop/hidden", noindex=True),
        row(f"{SITE}shop/copy", canonical_url=f"{SITE}shop/item-2?ref=copy"),
        row(f"{SITE}shop/self", canonical_url=f"{SITE}shop/self"),  # itself: published
        row(LONG_URL),
        row("ftp://www.example.com/shop/file"),  # not_http
        row("https://other.example.org/shop/x"),  # off_site
        row(f"{SITE}shop/bad%zz"),  # bad_percent_encoding
    ]
    return rows


def row_of(url: str, second: bool = True, nth: int = 0) -> int:
    """The row id of the nth row of `url` in a run's inventory (one file: its position)."""
    return [i for i, r in enumerate(inventory_rows(second)) if r["url"] == url][nth]


def publish_twice(inventory_at: Any, out: str, tmp_path: Path, **extra: Any) -> None:
    for n, second in enumerate((False, True)):
        rows = inventory_rows(second)
        path = write_inventory(tmp_path / f"inv{n}.parquet", {
            name: [r.get(name) for r in rows] for name in SCHEMA.names}, SCHEMA)
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
    assert reject.detail == "http_status=404" and reject.winner_row_id is None
    assert reject.url == "HTTPS://WWW.EXAMPLE.COM/shop/gone"  # as it came in
    assert reject.lastmod == "2026-11-01T00:00:00Z"
    code, text, _ = cli(capsys, f"{SITE}shop/gone", "--out", out)
    assert code == 1
    assert "rejected: not_200 (http_status=404): " in text
    assert "HTTPS://WWW.EXAMPLE.COM/shop/gone" in text
    code, text, _ = cli(capsys, f"{SITE}shop/gone", "--out", out, "--json")
    [shown] = json.loads(text)["rejects"]
    assert (shown["detail"], shown["winner_row_id"], shown["winner_lastmod"]) == (
        "http_status=404", None, None)


@pytest.mark.parametrize(("url", "reason", "detail"), [
    (f"{SITE}shop/moved", "redirect", f"redirect_to={SITE}shop/new"),
    (f"{SITE}shop/hidden", "noindex", "noindex=true"),
    (f"{SITE}shop/copy", "not_canonical", f"canonical_url={SITE}shop/item-2?ref=copy"),
])
def test_a_gate_reject_says_the_value_of_its_column(out: str, url: str, reason: str,
                                                    detail: str) -> None:
    answer = explain(out, url)
    assert answer.verdict == "rejected"
    assert [(r.reason, r.detail) for r in answer.rejects] == [(reason, detail)]


def test_a_canonical_url_naming_itself_is_published(out: str) -> None:
    answer = explain(out, f"{SITE}shop/self")
    assert answer.verdict == "published" and not answer.rejects


def test_the_rejects_file_holds_each_url_reject_s_value(out: str) -> None:
    """URLs explain refuses to look up (exit 2, as load would reject them) have their
    value in the generation's rejects file: the encoded length, the scheme, the host."""
    live = json.loads(Path(out, "manifest.json").read_text())
    rejects = pq.read_table(state_file(out, live, "rejects")).to_pylist()
    by_row = {r["row_id"]: r for r in rejects}
    assert {(by_row[row_of(u)]["reason"], by_row[row_of(u)]["detail"]) for u in (
        LONG_URL, "ftp://www.example.com/shop/file", "https://other.example.org/shop/x",
        f"{SITE}shop/bad%zz")} == {
        ("too_long", f"length={len(SITE) + 5 + 400 * 6}"), ("not_http", "scheme=ftp"),
        ("off_site", "host=other.example.org"), ("bad_percent_encoding", "escape=%zz")}
    assert all(r["winner_row_id"] is None for r in rejects if r["reason"] != "duplicate")


def test_a_duplicate_names_the_row_that_won(out: str, capsys: pytest.CaptureFixture[str]) -> None:
    answer = explain(out, f"{SITE}shop/dup")
    assert answer.published and answer.verdict == "duplicate"
    [lost] = answer.rejects
    assert lost.reason == "duplicate" and lost.lastmod == "2026-11-01T00:00:00Z"
    assert "newest lastmod" in lost.why
    winner = row_of(f"{SITE}shop/dup", nth=1)
    assert (lost.row_id, lost.winner_row_id, lost.winner_lastmod, lost.detail) == (
        row_of(f"{SITE}shop/dup"), winner, "2026-11-20T00:00:00Z", "newer lastmod")
    assert answer.listing is not None and answer.listing.lastmod == "2026-11-20T00:00:00Z"
    code, text, _ = cli(capsys, f"{SITE}shop/dup", "--out", out)
    assert code == 0
    assert (f"lost: duplicate (lost to row {winner} (lastmod 2026-11-20T00:00:00Z): newer "
            "lastmod): ") in text
    code, text, _ = cli(capsys, f"{SITE}shop/dup", "--out", out, "--json")
    assert code == 0
    shape = json.loads(text)
    assert shape["verdict"] == "duplicate"
    [shown] = shape["rejects"]
    assert (shown["winner_row_id"], shown["winner_lastmod"], shown["detail"]) == (
        winner, "2026-11-20T00:00:00Z", "newer lastmod")


def test_each_tie_rule_names_the_winner(out: str) -> None:
    """A lastmod beats none; of one lastmod the smaller content hash wins; of one content
    the first row."""
    dated = explain(out, f"{SITE}shop/dated")
    [lost] = dated.rejects
    assert (lost.row_id, lost.lastmod, lost.winner_row_id, lost.winner_lastmod, lost.detail) == (
        row_of(f"{SITE}shop/dated"), None, row_of(f"{SITE}shop/dated", nth=1),
        "2026-11-01T00:00:00Z", "newer lastmod")
    twin = explain(out, f"{SITE}shop/twin")
    [lost] = twin.rejects
    assert (lost.row_id, lost.winner_row_id, lost.detail) == (
        row_of(f"{SITE}shop/twin", nth=1), row_of(f"{SITE}shop/twin"),
        "same lastmod and content, first row")
    tie = explain(out, f"{SITE}shop/tie")
    [lost] = tie.rejects
    rows = {row_of(f"{SITE}shop/tie"), row_of(f"{SITE}shop/tie", nth=1)}
    assert {lost.row_id, lost.winner_row_id} == rows  # which one: the hashes decide
    assert (lost.winner_lastmod, lost.detail) == ("2026-11-01T00:00:00Z",
                                                  "same lastmod, smaller content hash")
    assert lost.cause() == (f"lost to row {lost.winner_row_id} (lastmod 2026-11-01T00:00:00Z): "
                            "same lastmod, smaller content hash")


def test_a_rejects_file_of_an_earlier_version_has_no_detail(tmp_path: Path) -> None:
    """Rejects written before the detail columns: read as they are, the detail None."""
    path = tmp_path / "rejects.parquet"
    pq.write_table(pa.table({
        "row_id": pa.array([3], pa.int64()), "reason": ["not_200"],
        "url": [f"{SITE}shop/gone"], "lastmod": pa.array([DAY1], pa.timestamp("us", tz="UTC")),
        "changefreq": pa.array([None], pa.string()), "priority": pa.array([None], pa.float64())}),
        path)
    [reject] = find_rejects(sql.connect(threads=1), str(path), f"{SITE}shop/gone",
                            f"{SITE}shop/gone", Site.parse(SITE))
    assert (reject.reason, reject.detail, reject.winner_row_id, reject.winner_lastmod) == (
        "not_200", None, None, None)
    assert reject.cause() is None


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
