"""Images, videos, news and hreflang alternates: rendered, limited, validated."""

from __future__ import annotations

import gzip
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import Limits
from pipeline.extensions import NAMESPACES
from pipeline.run import RunOptions, run
from tests.output_check import read_output

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)

IMAGE = pa.struct([("loc", pa.string()), ("title", pa.string()), ("caption", pa.string())])
VIDEO = pa.struct([("thumbnail_loc", pa.string()), ("title", pa.string()),
                   ("description", pa.string()), ("content_loc", pa.string()),
                   ("player_loc", pa.string()), ("duration", pa.int32()),
                   ("publication_date", pa.timestamp("s", tz="UTC")),
                   ("family_friendly", pa.bool_())])
NEWS = pa.struct([("publication_name", pa.string()), ("language", pa.string()),
                  ("publication_date", pa.timestamp("s", tz="UTC")), ("title", pa.string())])
ALT = pa.struct([("hreflang", pa.string()), ("href", pa.string())])
SCHEMA = pa.schema([("url", pa.string()), ("images", pa.list_(IMAGE)),
                    ("videos", pa.list_(VIDEO)), ("news", NEWS), ("alternates", pa.list_(ALT))])


def row(url: str, images=None, videos=None, news=None, alternates=None) -> dict:  # type: ignore[no-untyped-def]
    return {"url": url, "images": images, "videos": videos, "news": news,
            "alternates": alternates}


def publish(tmp: Path, rows: list[dict], **kw: object) -> tuple[dict, object]:
    inv = tmp / "inv.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), inv)
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(tmp / "out"),
                             run_time=NOW, **kw))  # type: ignore[arg-type]
    limits = kw.get("limits", Limits())
    return summary, read_output(str(tmp / "out"), max_urls=limits.max_urls,  # type: ignore[union-attr]
                                max_bytes=limits.max_bytes)  # type: ignore[union-attr]


def test_every_extension_validates_and_declares_only_its_namespaces(tmp_path: Path) -> None:
    alt = [{"hreflang": "en", "href": f"{SITE}intl/en"}, {"hreflang": "de", "href": f"{SITE}intl/de"},
           {"hreflang": "x-default", "href": f"{SITE}intl/en"}]
    rows = [
        row(f"{SITE}plain/1"),
        row(f"{SITE}gallery/1", images=[{"loc": f"{SITE}img/{i}.jpg", "title": "T & <b>",
                                         "caption": None} for i in range(1005)]),
        row(f"{SITE}gallery/2", images=[{"loc": f"{SITE}img/x.jpg", "title": None,
                                         "caption": "Cap 'q'"}]),
        row(f"{SITE}watch/1", videos=[
            {"thumbnail_loc": f"{SITE}t.jpg", "title": "V", "description": "D & d",
             "content_loc": f"{SITE}v.mp4", "player_loc": None, "duration": 600,
             "publication_date": NOW - timedelta(days=9), "family_friendly": True},
            {"thumbnail_loc": None, "title": "no thumb", "description": "x",
             "content_loc": f"{SITE}v2.mp4", "player_loc": None, "duration": None,
             "publication_date": None, "family_friendly": None},
            {"thumbnail_loc": f"{SITE}t3.jpg", "title": "player only", "description": "p",
             "content_loc": None, "player_loc": f"{SITE}player/3", "duration": None,
             "publication_date": None, "family_friendly": None},
            {"thumbnail_loc": f"{SITE}t4.jpg", "title": "neither", "description": "n",
             "content_loc": None, "player_loc": None, "duration": None,
             "publication_date": None, "family_friendly": None}]),
        row(f"{SITE}articles/fresh", news={"publication_name": "The Example", "language": "en",
                                           "publication_date": NOW - timedelta(hours=3),
                                           "title": "Fresh & hot"}),
        row(f"{SITE}articles/old", news={"publication_name": "The Example", "language": "en",
                                         "publication_date": NOW - timedelta(days=5),
                                         "title": "Old"}),
        row(f"{SITE}intl/en", alternates=alt),
        row(f"{SITE}intl/de", alternates=alt),
        row(f"{SITE}intl/fr", alternates=alt),  # does not list itself: its links are dropped
    ]
    summary, out = publish(tmp_path, rows)
    c = summary["counts"]
    assert c["dropped_fields"]["images_dropped"] == 5
    assert c["dropped_fields"]["videos_dropped"] == 2  # no thumbnail; no content nor player
    watch = next(k for k in out.files if "watch" in k)
    xml = gzip.decompress((tmp_path / "out" / watch).read_bytes()).decode()
    titles = re.findall(r"<video:title>([^<]*)</video:title>", xml)
    assert titles == ["V", "player only"], titles
    assert c["dropped_fields"]["alternates_without_self"] == 1
    # en and de name each other; fr's set does not list fr, so it is not written and
    # counts only as alternates_without_self
    assert c["dropped_fields"]["alternates_not_reciprocal"] == 0
    assert c["news_articles"] == 1
    by_section = {k.split("/")[1].rsplit("-", 2)[0]: v for k, v in out.namespaces.items()}
    assert by_section == {
        "plain": set(), "gallery": {NAMESPACES["image"]}, "watch": {NAMESPACES["video"]},
        "google-news": {NAMESPACES["news"]}, "articles": set(), "intl": {NAMESPACES["xhtml"]}}
    news_file = next(k for k in out.files if "google-news" in k)
    assert out.files[news_file] == [f"{SITE}articles/fresh"]
    assert sorted(out.locs) == sorted(r["url"] for r in rows)


def test_news_sitemaps_hold_at_most_1000(tmp_path: Path) -> None:
    rows = [row(f"{SITE}n/{i:05d}", news={"publication_name": "P", "language": "fr",
                                          "publication_date": NOW - timedelta(minutes=i),
                                          "title": f"t{i}"}) for i in range(2500)]
    _, out = publish(tmp_path, rows)
    sizes = sorted(len(v) for k, v in out.files.items() if "google-news" in k)
    assert sizes == [500, 1000, 1000]


def test_byte_limit_holds_with_many_alternates(tmp_path: Path) -> None:
    langs = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40)]  # aa, ab, ...
    rows = []
    for g in range(30):
        hrefs = [f"{SITE}t/{g:02d}-{lang}" for lang in langs]
        alt = [{"hreflang": lang, "href": h} for lang, h in zip(langs, hrefs, strict=True)]
        rows += [row(h, alternates=alt) for h in hrefs]
    max_bytes = 200_000
    _, out = publish(tmp_path, rows, limits=Limits(max_bytes=max_bytes))
    assert len(out.files) > 1
    assert all(size <= max_bytes for size in out.raw_sizes.values())
    assert len(out.locs) == 1200


@pytest.mark.parametrize("keep", [False, True], ids=["google-2022-default", "keep-deprecated"])
def test_deprecated_tags_are_left_out_and_counted_unless_kept(tmp_path: Path, keep: bool) -> None:
    """Google stopped using image:caption, title, geo_location, license and the video tags
    category, gallery_loc, price, tvshow, player_loc@allow_embed/@autoplay in 2022: left
    out and counted by default; --keep-deprecated-tags writes the image ones again."""
    import gzip

    from pipeline import storage

    image = pa.struct([("loc", pa.string()), ("caption", pa.string()), ("title", pa.string()),
                       ("geo_location", pa.string()), ("license", pa.string())])
    video = pa.struct([("thumbnail_loc", pa.string()), ("title", pa.string()),
                       ("description", pa.string()), ("content_loc", pa.string()),
                       ("category", pa.string()), ("gallery_loc", pa.string())])
    schema = pa.schema([("url", pa.string()), ("images", pa.list_(image)),
                        ("videos", pa.list_(video))])
    rows = [
        {"url": f"{SITE}g/1", "images": [
            {"loc": f"{SITE}1.jpg", "caption": "Cap", "title": "Tit", "geo_location": "Paris",
             "license": f"{SITE}lic"},
            {"loc": f"{SITE}2.jpg", "caption": None, "title": "Only title", "geo_location": None,
             "license": None}], "videos": None},
        {"url": f"{SITE}v/1", "images": None, "videos": [
            {"thumbnail_loc": f"{SITE}t.jpg", "title": "V", "description": "D",
             "content_loc": f"{SITE}v.mp4", "category": "Cooking", "gallery_loc": None}]},
    ]
    inv = tmp_path / "inv.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), inv)
    out = tmp_path / "out"
    summary = run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), run_time=NOW,
                             keep_deprecated_tags=keep))
    # 5 image fields set (4 + 1) and 1 video category; the video tags are never written
    assert summary["counts"]["dropped_fields"]["deprecated_tags"] == (1 if keep else 6)
    published = read_output(str(out))  # every file still validates against Google's XSDs
    xml = b"".join(gzip.decompress(storage.open_storage(str(out)).read_bytes(k))
                   for k in published.files).decode()
    for tag in ("image:caption", "image:title", "image:geo_location", "image:license"):
        assert (f"<{tag}>" in xml) == keep, tag
    assert "<image:loc>" in xml and "video:category" not in xml and "Cooking" not in xml


def test_non_reciprocal_alternates_are_counted(tmp_path: Path) -> None:
    def alt(*langs: str) -> list[dict[str, str]]:
        return [{"hreflang": lang, "href": f"{SITE}intl/{lang}"} for lang in langs]

    rows = [
        row(f"{SITE}intl/en", alternates=alt("en", "de", "fr")),  # fr does not name en
        row(f"{SITE}intl/de", alternates=alt("de", "en")),        # reciprocal with en
        row(f"{SITE}intl/fr", alternates=alt("fr")),              # names nobody
        row(f"{SITE}intl/es", alternates=alt("es", "it")),        # it is not in the inventory
        row(f"{SITE}intl/pt", alternates=alt("pt", "de")),        # de does not name pt
    ]
    summary, out = publish(tmp_path, rows)
    assert summary["counts"]["dropped_fields"]["alternates_not_reciprocal"] == 2  # en, pt
    assert sorted(out.locs) == sorted(r["url"] for r in rows)
