"""The names of the output and state trees are a contract with crawlers, CDNs and earlier
generations: pipeline.layout builds them, and they do not change."""

from __future__ import annotations

from pipeline import layout
from pipeline.w3c import format_w3c, parse_w3c


def test_the_served_names() -> None:
    assert [layout.root_index_name(n) for n in (1, 2, 10)] == [
        "sitemap_index.xml", "sitemap_index-2.xml", "sitemap_index-10.xml"]
    assert (layout.LIVE_MANIFEST_KEY, layout.ROBOTS_KEY, layout.FEED_KEY, layout.SHARDS_FOLDER) \
        == ("manifest.json", "robots-sitemaps.txt", "feed.atom", "sitemaps")
    assert layout.generation_key("20240501T000000Z-abc123", layout.GENERATION_MANIFEST) == \
        "generations/20240501T000000Z-abc123/manifest.json"
    assert layout.generation_key("g") == "generations/g/"


def test_the_state_names() -> None:
    assert layout.default_state("s3://b/site/") == "s3://b/site/_state"
    assert layout.default_state("/srv/out") == "/srv/out/_state"
    assert [layout.state_file_key("g", n) for n in layout.STATE_FILES] == [
        "generations/g/snapshot.parquet", "generations/g/rejects.parquet",
        "generations/g/changes.parquet"]
    assert layout.generation_key("g", layout.REPORT_KEY) == "generations/g/report.html"


def test_the_work_names() -> None:
    assert layout.part_key(layout.DIFFED_FOLDER, 7) == "diffed/part-00007.parquet"
    assert layout.part_key(layout.PLANNED_FOLDER, 0) == "planned/part-00000.parquet"


def test_one_w3c_format_both_ways() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    t = datetime(2024, 5, 1, 14, 30, 5, tzinfo=timezone(timedelta(hours=2)))
    assert format_w3c(t) == "2024-05-01T12:30:05Z"
    assert format_w3c(datetime(2024, 5, 1, 12, 30, 5)) == "2024-05-01T12:30:05Z"  # naive: UTC
    assert parse_w3c("2024-05-01T12:30:05Z") == datetime(2024, 5, 1, 12, 30, 5, tzinfo=UTC)
