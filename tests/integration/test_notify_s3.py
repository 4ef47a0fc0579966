"""Notify on a real S3 server (SeaweedFS): robots.txt as an object, feed and report of an S3 output."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import feedparser
import pytest

from pipeline.notify import FEED_KEY, merge_robots, write_feed
from pipeline.notify.report import REPORT_KEY, write_report
from pipeline.run import RunOptions, run
from tests.output_check import write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
PUB = "https://www.example.com/sm/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def test_robots_object_merged_keeping_its_metadata(s3_bucket: Any) -> None:
    c = s3_bucket.client
    text = b"User-agent: *\r\nDisallow: /x\r\nSitemap: https://www.example.com/sm/old.xml\r\n"
    c.put_object(Bucket=s3_bucket.name, Key="site/robots.txt", Body=text,
                 ContentType="text/plain", CacheControl="max-age=60")
    uri = s3_bucket.url("site/robots.txt")
    assert merge_robots(uri, [PUB + "sitemap_index.xml"], PUB) is True
    obj = c.get_object(Bucket=s3_bucket.name, Key="site/robots.txt")
    assert obj["Body"].read() == (b"User-agent: *\r\nDisallow: /x\r\n"
                                  b"Sitemap: https://www.example.com/sm/sitemap_index.xml\r\n")
    assert obj["CacheControl"] == "max-age=60"
    assert obj["ContentType"].startswith("text/plain")
    etag = obj["ETag"]
    assert merge_robots(uri, [PUB + "sitemap_index.xml"], PUB) is False
    assert c.head_object(Bucket=s3_bucket.name, Key="site/robots.txt")["ETag"] == etag

    created = s3_bucket.url("new/robots.txt")
    assert merge_robots(created, [PUB + "sitemap_index.xml"], PUB) is True
    body = c.get_object(Bucket=s3_bucket.name, Key="new/robots.txt")["Body"].read()
    assert body == b"Sitemap: https://www.example.com/sm/sitemap_index.xml\n"


def test_feed_and_report_of_an_s3_output(s3_bucket: Any, tmp_path: Path) -> None:
    out = s3_bucket.url("out")
    rows = [f"{SITE}a/{i}" for i in range(12)]
    for n, urls in enumerate([rows, [*rows, f"{SITE}b/new"]]):
        inv = write_inventory(tmp_path / f"inv{n}.parquet", {"url": urls})
        run(RunOptions(inventory=str(inv), site_url=SITE, out=out, public_url=PUB,
                       run_time=T0 + timedelta(days=n)))
    result = write_feed(out, days=1)
    assert result["entries"] == 1
    c = s3_bucket.client
    obj = c.get_object(Bucket=s3_bucket.name, Key=f"out/{FEED_KEY}")
    feed = feedparser.parse(obj["Body"].read())
    assert not feed.bozo and [e.link for e in feed.entries] == [f"{SITE}b/new"]
    assert feed.feed.id == PUB + FEED_KEY
    assert obj["CacheControl"] == "public, max-age=300"

    gen = json.loads(c.get_object(Bucket=s3_bucket.name, Key="out/manifest.json")["Body"].read())
    key = f"out.state/generations/{gen['generation']}/{REPORT_KEY}"
    # Internal: under the state prefix, nothing under the served output.
    assert write_report(out) == s3_bucket.url(key)
    assert not [o for o in c.list_objects_v2(Bucket=s3_bucket.name, Prefix="out/")["Contents"]
                if o["Key"].endswith(".html")]
    head = c.head_object(Bucket=s3_bucket.name, Key=key)
    assert head["ContentType"] == "text/html; charset=utf-8"
