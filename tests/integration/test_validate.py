"""`sitemaps validate`: a published output passes; each kind of damage is reported."""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from pipeline.config import Limits
from pipeline.run import RunOptions, run
from pipeline.validate import validate
from tests.output_check import write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)


def publish(tmp: Path, out: str | None = None, **kw: Any) -> str:
    urls = [f"{SITE}{'blog' if i % 3 else 'product'}/{i:04d}?a=1&b='x'" for i in range(60)]
    inv = write_inventory(tmp / "inv.parquet", {"url": urls})
    out = out or str(tmp / "out")
    run(RunOptions(inventory=str(inv), site_url=SITE, out=out, run_time=NOW,
                   limits=Limits(max_urls=10), **kw))
    return out


def manifest(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "manifest.json").read_text()))


def rewrite_shard(out: Path, key: str, body: bytes, fix_manifest: bool) -> None:
    """Replaces a shard's content; with `fix_manifest`, its sizes and sha256 follow."""
    gz = gzip.compress(body)
    (out / key).write_bytes(gz)
    if fix_manifest:
        m = manifest(out)
        for s in m["sitemaps"]:
            if s["key"] == key:
                s.update(sha256=hashlib.sha256(gz).hexdigest(), gzip_bytes=len(gz), bytes=len(body))
        (out / "manifest.json").write_text(json.dumps(m))


def test_a_published_output_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = publish(tmp_path)
    result = validate(out)
    assert result.ok, result.problems
    assert (result.sitemaps, result.urls, result.indexes) == (6, 60, 1)
    assert main(["validate", "--out", out]) == 0
    assert "valid:" in capsys.readouterr().out


def test_plain_text_sitemaps_are_valid(tmp_path: Path) -> None:
    out = publish(tmp_path, format="txt")
    result = validate(out)
    assert result.ok and result.urls == 60, result.problems


def test_extensions_validate_against_all_xsd(tmp_path: Path) -> None:
    img = pa.struct([("loc", pa.string()), ("title", pa.string())])
    rows = [{"url": f"{SITE}p/{i}", "images": [{"loc": f"{SITE}i/{i}.jpg", "title": "t"}]}
            for i in range(5)]
    inv = tmp_path / "inv.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(
        [("url", pa.string()), ("images", pa.list_(img))])), inv)
    run(RunOptions(inventory=str(inv), site_url=SITE, out=str(tmp_path / "out"), run_time=NOW))
    result = validate(str(tmp_path / "out"))
    assert result.ok and result.urls == 5, result.problems


@pytest.mark.parametrize("damage, expected", [
    ("flip_byte", "sha256"),
    ("delete_shard", "listed in the manifest but missing"),
    ("bad_element", "not valid against sitemap.xsd"),
    ("too_many_urls", "URLs (1..50,000)"),
    ("root_index_lags", "differs from the generation's copy"),
    ("unlisted_sitemap", "the indexes and the manifest disagree"),
    ("off_site_url", "is not on the site"),
])
def test_damage_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str,
                            expected: str) -> None:
    out = Path(publish(tmp_path))
    m = manifest(out)
    key = m["sitemaps"][0]["key"]
    body = gzip.decompress((out / key).read_bytes())
    if damage == "flip_byte":
        raw = bytearray((out / key).read_bytes())
        raw[-5] ^= 0xFF
        (out / key).write_bytes(bytes(raw))
    elif damage == "delete_shard":
        (out / key).unlink()
    elif damage == "bad_element":
        rewrite_shard(out, key, body.replace(b"</loc>", b"</loc><priority>high</priority>", 1),
                      fix_manifest=True)
    elif damage == "too_many_urls":
        head, _, tail = body.partition(b"<url>")
        line = b"<url>" + tail.split(b"</url>")[0] + b"</url>"
        rewrite_shard(out, key, head + line * 50_001 + b"</urlset>\n", fix_manifest=True)
    elif damage == "root_index_lags":
        index = out / m["indexes"][0]["key"]
        index.write_bytes(index.read_bytes().replace(b"<sitemap>", b"<sitemap> ", 1))
    elif damage == "unlisted_sitemap":
        m["sitemaps"].append({**m["sitemaps"][0], "url": m["sitemaps"][0]["url"] + "x"})
        (out / "manifest.json").write_text(json.dumps(m))
    elif damage == "off_site_url":
        rewrite_shard(out, key, body.replace(SITE.encode(), b"https://other.example/", 1),
                      fix_manifest=True)
    result = validate(str(out))
    assert not result.ok
    assert any(expected in p for p in result.problems), result.problems
    capsys.readouterr()
    assert main(["validate", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert expected in captured.out
    errors = [line for line in captured.err.splitlines() if "error" in line.lower()]
    assert errors == [f"error: {out} is not valid: {len(result.problems)} problem(s)"]


def test_a_manifest_of_another_shape_is_a_problem(tmp_path: Path) -> None:
    out = Path(publish(tmp_path))
    m = manifest(out)
    del m["sitemaps"][0]["key"]
    (out / "manifest.json").write_text(json.dumps(m))
    (problem,) = validate(str(out)).problems
    assert problem.startswith("manifest.json is not a pipeline manifest: KeyError")


def test_no_generation_and_first_problems_only(tmp_path: Path) -> None:
    result = validate(str(tmp_path / "nothing"))
    assert result.problems == [f"no generation at {tmp_path / 'nothing'} (no manifest.json)"]
    out = Path(publish(tmp_path))
    for s in manifest(out)["sitemaps"]:
        (out / s["key"]).unlink()
    result = validate(str(out), max_problems=3)
    assert len(result.problems) == 3 and result.truncated


def test_an_output_on_s3_is_valid(s3_bucket: Any, tmp_path: Path) -> None:
    out = publish(tmp_path, out=s3_bucket.url("site/"))
    result = validate(out)
    assert result.ok and result.urls == 60, result.problems
    key = f"site/{json.loads(s3_bucket.client.get_object(Bucket=s3_bucket.name, Key='site/manifest.json')['Body'].read())['sitemaps'][0]['key']}"  # noqa: E501
    body = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=key, Body=body,
                                ContentType="application/gzip", ContentEncoding="gzip")
    result = validate(out)
    assert any("Content-Encoding" in p for p in result.problems), result.problems


@pytest.mark.parametrize("public_url", ["javascript:alert(1)//x/", "sitemaps/",
                                        "https://www.example.com/s/\nDisallow: /\n#"])
def test_an_unparsed_public_url_is_invalid_and_never_reaches_robots_txt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        public_url: str) -> None:
    """Issue 40, item 8: an output published before --public-url was parsed (the parser is
    switched off for the run) is not valid, and `sitemaps robots` refuses to copy it."""
    from pipeline import settings

    with monkeypatch.context() as m:
        m.setattr(settings, "public_url_problem", lambda value: None)
        out = publish(tmp_path, public_url=public_url)
    result = validate(out)
    assert not result.ok
    assert any("manifest.json: its public_url must" in p for p in result.problems), result.problems
    if "\n" not in public_url:  # a newline is inside the <loc>, which stays absolute
        assert any("not an absolute http(s) URL" in p for p in result.problems), result.problems
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nAllow: /\n")
    capsys.readouterr()
    assert main(["robots", "--out", out, "--robots", str(robots)]) == 2
    assert "has a public_url that must" in capsys.readouterr().err
    assert robots.read_text() == "User-agent: *\nAllow: /\n"
