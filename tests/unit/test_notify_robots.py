"""robots.txt merge: other lines byte for byte, stale lines of this output replaced, idempotent."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.notify import OWNED_NAMES, merge_robots, merged_robots

PUB = "https://www.example.com/sitemaps/"
NEW = [PUB + "sitemap_index.xml", PUB + "sitemap_index-2.xml"]

EXISTING = (
    b"# robots.txt for www.example.com\r\n"
    b"User-agent: *\r\n"
    b"Disallow: /cart/   # no carts\r\n"
    b"\r\n"
    b"sitemap: https://www.example.com/sitemaps/old_index.xml\r\n"
    b"Sitemap: https://shop.example.org/sitemap.xml\r\n"
    b"User-agent: BadBot\r\n"
    b"Disallow: /\r\n"
)


def test_stale_lines_replaced_in_place_others_kept_byte_for_byte() -> None:
    got = merged_robots(EXISTING, NEW, PUB)
    assert got == (
        b"# robots.txt for www.example.com\r\n"
        b"User-agent: *\r\n"
        b"Disallow: /cart/   # no carts\r\n"
        b"\r\n"
        b"Sitemap: https://www.example.com/sitemaps/sitemap_index.xml\r\n"
        b"Sitemap: https://www.example.com/sitemaps/sitemap_index-2.xml\r\n"
        b"Sitemap: https://shop.example.org/sitemap.xml\r\n"
        b"User-agent: BadBot\r\n"
        b"Disallow: /\r\n")
    assert merged_robots(got, NEW, PUB) == got


def test_current_lines_are_kept_as_written_and_duplicates_dropped() -> None:
    text = (b"User-agent: *\nSITEMAP:https://www.example.com/sitemaps/sitemap_index.xml # ours\n"
            b"Sitemap: https://www.example.com/sitemaps/sitemap_index.xml\nAllow: /\n")
    got = merged_robots(text, NEW, PUB)
    assert got == (b"User-agent: *\nSITEMAP:https://www.example.com/sitemaps/sitemap_index.xml "
                   b"# ours\nSitemap: https://www.example.com/sitemaps/sitemap_index-2.xml\n"
                   b"Allow: /\n")


def test_appended_at_the_end_with_a_line_break_when_none_is_ours() -> None:
    text = b"\xef\xbb\xbfUser-agent: *\nDisallow: /tmp"  # BOM, no final newline
    got = merged_robots(text, NEW, PUB)
    assert got == (b"\xef\xbb\xbfUser-agent: *\nDisallow: /tmp\n"
                   + b"".join(b"Sitemap: " + u.encode() + b"\n" for u in NEW))


def test_fewer_indexes_drop_the_stale_one() -> None:
    text = merged_robots(b"User-agent: *\n", NEW, PUB)
    assert merged_robots(text, NEW[:1], PUB) == (
        b"User-agent: *\nSitemap: https://www.example.com/sitemaps/sitemap_index.xml\n")


def test_owned_names_protect_other_sitemaps_under_the_same_root() -> None:
    root = "https://www.example.com/"
    text = (b"Sitemap: https://www.example.com/news-sitemap.xml\n"
            b"Sitemap: https://www.example.com/sitemap_index-3.xml\n")
    got = merged_robots(text, [root + "sitemap_index.xml", root + "feed.atom"], root, OWNED_NAMES)
    assert got == (b"Sitemap: https://www.example.com/news-sitemap.xml\n"
                   b"Sitemap: https://www.example.com/sitemap_index.xml\n"
                   b"Sitemap: https://www.example.com/feed.atom\n")
    # Without the names, every line under the prefix is this output's.
    assert b"news-sitemap" not in merged_robots(text, [root + "sitemap_index.xml"], root)


def test_prefix_matches_whole_folders_only() -> None:
    text = b"Sitemap: https://www.example.com/sitemaps-legacy/index.xml\n"
    assert merged_robots(text, NEW, PUB.rstrip("/")).startswith(text)


def test_merge_robots_file(tmp_path: Path) -> None:
    robots = tmp_path / "www" / "robots.txt"
    robots.parent.mkdir()
    robots.write_bytes(EXISTING)
    os.chmod(robots, 0o640)
    assert merge_robots(str(robots), NEW, PUB) is True
    assert robots.read_bytes() == merged_robots(EXISTING, NEW, PUB)
    assert stat.S_IMODE(robots.stat().st_mode) == 0o640
    before = robots.stat().st_mtime_ns, robots.stat().st_ino
    assert merge_robots(str(robots), NEW, PUB) is False
    assert (robots.stat().st_mtime_ns, robots.stat().st_ino) == before  # not written
    assert sorted(p.name for p in robots.parent.iterdir()) == ["robots.txt"]  # no leftovers


def test_missing_robots_is_created_with_only_the_lines(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    assert merge_robots(str(robots), NEW, PUB) is True
    assert robots.read_bytes() == b"".join(b"Sitemap: " + u.encode() + b"\n" for u in NEW)
    assert stat.S_IMODE(robots.stat().st_mode) == 0o644
    assert merge_robots(str(robots), NEW, PUB) is False


def test_robots_uri_must_name_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="names a folder"):
        merge_robots(str(tmp_path) + "/", NEW, PUB)
