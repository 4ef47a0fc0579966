"""Notify after real runs: the feed (read by feedparser), robots.txt, IndexNow of a generation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import feedparser
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import Limits
from pipeline.layout import default_state
from pipeline.notify import FEED_KEY, notify_step, robots_for_output, write_feed
from pipeline.run import RunOptions, run
from tests.unit.test_notify_indexnow import Endpoint

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)
KEY = "feedc0ffee1234567890"
#: The last run's added and changed URLs, as the feed lists them.
NEWEST = [f"{SITE}blog/00", f"{SITE}product/001", f"{SITE}product/002"]


class Site:
    """An inventory edited between runs, published to one output."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.out = tmp, str(tmp / "out")
        self.rows = {f"{SITE}product/{i:03d}": f"h{i}" for i in range(30)}
        self.rows.update({f"{SITE}blog/{i:02d}": f"b{i}" for i in range(5)})
        self.runs = 0
        self.limits = Limits(max_urls=10)

    def publish(self, when: datetime) -> dict[str, Any]:
        self.runs += 1
        inv = self.tmp / f"inv-{self.runs}.parquet"
        urls = sorted(self.rows)
        pq.write_table(pa.table({"url": urls, "content_hash": [self.rows[u] for u in urls]}), inv)
        # Publish only: these tests call notify themselves.
        return run(RunOptions(inventory=str(inv), site_url=SITE, out=self.out, run_time=when,
                              limits=self.limits, allow_shrink=True, feed_days=0, report=False))

    def ctx(self) -> Any:
        """The part of the run context notify reads (a RunContext holds more)."""
        return SimpleNamespace(out=self.out, site_url=SITE, public_url=SITE,
                               state=default_state(self.out),
                               options=SimpleNamespace(limits=self.limits, report_to=None))


@pytest.fixture
def three_runs(tmp_path: Path) -> tuple[Site, list[dict[str, Any]]]:
    site = Site(tmp_path)
    summaries = [site.publish(T0)]                                      # 35 added
    site.rows[f"{SITE}product/001"] = "changed"
    site.rows[f"{SITE}product/010"] = "changed"
    site.rows[f"{SITE}news/a"] = "n"
    del site.rows[f"{SITE}blog/00"]
    summaries.append(site.publish(T0 + timedelta(days=1, hours=2)))    # 2 changed, 1 added, 1 removed
    site.rows[f"{SITE}product/002"] = "changed"
    site.rows[f"{SITE}product/001"] = "changed again"
    site.rows[f"{SITE}blog/00"] = "back"
    del site.rows[f"{SITE}news/a"]
    summaries.append(site.publish(T0 + timedelta(days=2, hours=4)))    # 2 changed, 1 added, 1 removed
    assert all(s["published"] for s in summaries)
    return site, summaries


def parse(path: Path) -> Any:
    feed = feedparser.parse(path.read_bytes())
    assert not feed.bozo, feed.bozo_exception
    assert feed.version == "atom10"
    return feed


def test_feed_lists_exactly_the_changes_of_the_generations_it_covers(
        three_runs: tuple[Site, list[dict[str, Any]]]) -> None:
    site, _ = three_runs
    out = Path(site.out)
    # Two days back from the live generation: the last two runs, not the first.
    result = write_feed(site.out, days=2)
    assert len(result["generations"]) == 2
    feed = parse(out / FEED_KEY)
    links = [e.link for e in feed.entries]
    # Newest change first (then by URL); product/001 once (its newest change); news/a's
    # newest change is its removal, so it is left out; blog/00 was removed and came back.
    assert links == [*NEWEST, f"{SITE}product/010"]
    for e in feed.entries:
        assert e.id == e.link and e.title == e.link
    # updated: the time the change was first seen (the run's time: no lastmod in the inventory)
    assert [e.updated for e in feed.entries] == ["2026-12-03T07:00:00Z"] * 3 + [
        "2026-12-02T05:00:00Z"]
    assert feed.feed.id == f"{SITE}{FEED_KEY}" and feed.feed.updated == "2026-12-03T07:00:00Z"
    assert any(link.rel == "self" and link.href == f"{SITE}{FEED_KEY}"
               for link in feed.feed.links)

    # Seven days: the first run's 35 added URLs too (less the ones changed or removed since).
    result = write_feed(site.out, days=7)
    assert len(result["generations"]) == 3
    links = [e.link for e in parse(out / FEED_KEY).entries]
    assert sorted(links) == sorted(set(site.rows))  # every live URL was added or changed
    assert links[:3] == NEWEST

    # Capped: the newest entries stay.
    result = write_feed(site.out, days=7, max_entries=2)
    assert result["truncated"] and [e.link for e in parse(out / FEED_KEY).entries] == NEWEST[:2]


def test_unchanged_feed_is_not_rewritten(three_runs: tuple[Site, list[dict[str, Any]]]) -> None:
    site, _ = three_runs
    assert write_feed(site.out)["written"] is True
    mtime = (Path(site.out) / FEED_KEY).stat().st_mtime_ns
    assert write_feed(site.out)["written"] is False
    assert (Path(site.out) / FEED_KEY).stat().st_mtime_ns == mtime


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    e = Endpoint()
    e.thread.start()
    yield e
    e.close()


def test_notify_step_feed_report_and_indexnow(
        three_runs: tuple[Site, list[dict[str, Any]]], endpoint: Endpoint) -> None:
    site, summaries = three_runs
    out = Path(site.out)
    result = notify_step(site.ctx(), summaries[-1], indexnow_key=KEY,
                         indexnow_endpoint=endpoint.url)
    assert result["feed_entries"] == 35
    # The report is internal: under the state prefix, not the served output.
    assert Path(default_state(str(out)), "generations", summaries[-1]["generation"],
                "report.html").is_file()
    assert not list(out.rglob("*.html"))
    # The generation's added, changed and removed URLs, once each, in one POST.
    assert len(endpoint.requests) == 1
    body = endpoint.requests[0]["json"]
    assert body["host"] == "www.example.com" and body["key"] == KEY
    assert sorted(body["urlList"]) == sorted([f"{SITE}product/001", f"{SITE}product/002",
                                              f"{SITE}blog/00", f"{SITE}news/a"])
    assert result["indexnow"]["submitted"] == 4
    assert (out / f"{KEY}.txt").read_text() == KEY  # the output is served at the host's root
    json.dumps(result)  # small and JSON-able (XCom)

    # An unchanged run submits nothing; a lost feed is written again.
    (out / FEED_KEY).unlink()
    again = notify_step(site.ctx(), {**summaries[-1], "published": False}, indexnow_key=KEY,
                        indexnow_endpoint=endpoint.url)
    assert again["skipped"] == "unchanged" and (out / FEED_KEY).is_file()
    assert len(endpoint.requests) == 1


def test_indexnow_skips_a_first_generation(tmp_path: Path, endpoint: Endpoint) -> None:
    site = Site(tmp_path)
    summary = site.publish(T0)
    result = notify_step(site.ctx(), summary, indexnow_key=KEY, indexnow_endpoint=endpoint.url,
                         report=False)
    assert result["indexnow"] == {"skipped": "first generation"} and not endpoint.requests


def test_robots_for_output(three_runs: tuple[Site, list[dict[str, Any]]],
                           tmp_path: Path) -> None:
    site, _ = three_runs
    robots = tmp_path / "www" / "robots.txt"
    robots.parent.mkdir()
    robots.write_bytes(b"User-agent: *\nDisallow: /admin\n"
                       b"Sitemap: https://www.example.com/news-sitemap.xml\n"
                       b"Sitemap: https://www.example.com/sitemap_index-2.xml\n")
    write_feed(site.out)
    assert robots_for_output(site.out, str(robots)) is True
    assert robots.read_bytes() == (
        b"User-agent: *\nDisallow: /admin\n"
        b"Sitemap: https://www.example.com/news-sitemap.xml\n"
        b"Sitemap: https://www.example.com/sitemap_index.xml\n"
        b"Sitemap: https://www.example.com/feed.atom\n")
    assert robots_for_output(site.out, str(robots)) is False


def test_cli_subcommands(three_runs: tuple[Site, list[dict[str, Any]]], tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from pipeline import cli_notify

    site, _ = three_runs
    parser = argparse.ArgumentParser()
    cli_notify.add_parsers(parser.add_subparsers(dest="command", required=True))
    robots = tmp_path / "robots.txt"
    for argv in (["feed", "--out", site.out, "--days", "2"], ["report", "--out", site.out],
                 ["robots", "--out", site.out, "--robots", str(robots)],
                 ["indexnow-key", "--out", site.out, "--key", KEY]):
        args = parser.parse_args(argv)
        assert cli_notify.COMMANDS[args.command](args) == 0
    printed = capsys.readouterr().out
    assert "4 entries from 2 generation(s)" in printed and f"{robots}: updated" in printed
    assert "open the report: file://" in printed and (Path(site.out) / f"{KEY}.txt").is_file()
    assert robots.read_text() == (f"Sitemap: {SITE}sitemap_index.xml\n"
                                  f"Sitemap: {SITE}feed.atom\n")
