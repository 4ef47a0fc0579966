"""The names of the output and state trees are a contract with crawlers, CDNs and earlier
generations: pipeline.layout builds them, and they do not change."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import layout
from pipeline.errors import ConfigError
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
    """The default state is the output's sibling, outside what is served."""
    assert layout.default_state("s3://b/site/") == "s3://b/site.state"
    assert layout.default_state("s3://b/a/site") == "s3://b/a/site.state"
    assert layout.default_state("/srv/out") == "/srv/out.state"
    assert layout.default_state("/srv/out/") == "/srv/out.state"
    assert layout.default_state("file:///srv/out") == "/srv/out.state"
    assert layout.legacy_state("s3://b/site/") == "s3://b/site/_state"
    assert layout.legacy_state("/srv/out") == "/srv/out/_state"
    assert [layout.state_file_key("g", n) for n in layout.STATE_FILES] == [
        "generations/g/snapshot.parquet", "generations/g/rejects.parquet",
        "generations/g/changes.parquet"]
    assert layout.generation_key("g", layout.REPORT_KEY) == "generations/g/report.html"


def test_a_relative_output_has_its_state_beside_it(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert layout.default_state("out") == str(tmp_path / "out.state")
    assert layout.default_state(".") == str(tmp_path) + ".state"


@pytest.mark.parametrize("out", ["s3://b", "s3://b/", "s3://b//"])
def test_the_root_of_a_bucket_has_no_default_state(out: str) -> None:
    with pytest.raises(ConfigError, match="^--out is the root of bucket b: give --state, a "
                                          "private prefix or bucket$"):
        layout.default_state(out)


def test_the_filesystem_root_has_no_default_state() -> None:
    with pytest.raises(ConfigError, match="^--out is the filesystem root /: give --state"):
        layout.default_state("/")


def test_the_work_names() -> None:
    assert layout.part_key(layout.DIFFED_FOLDER, 7) == "diffed/part-00007.parquet"
    assert layout.part_key(layout.PLANNED_FOLDER, 0) == "planned/part-00000.parquet"


def test_one_w3c_format_both_ways() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    t = datetime(2024, 5, 1, 14, 30, 5, tzinfo=timezone(timedelta(hours=2)))
    assert format_w3c(t) == "2024-05-01T12:30:05Z"
    assert format_w3c(datetime(2024, 5, 1, 12, 30, 5)) == "2024-05-01T12:30:05Z"  # naive: UTC
    assert parse_w3c("2024-05-01T12:30:05Z") == datetime(2024, 5, 1, 12, 30, 5, tzinfo=UTC)
