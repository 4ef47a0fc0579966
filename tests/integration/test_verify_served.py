"""`sitemaps verify` against nginx on loopback serving a published output (Debian's nginx,
`make http-server` installs it): served as published it passes; the usual ways a server or a
CDN gets it wrong are each found, one line per problem.

One nginx, one server block per way of serving: as published; gzip switched on for
`application/gzip` too (every `.xml.gz` gzipped again); a stale root index (a cache that kept
the previous generation's); a shard cut short (a truncated copy), with a robots.txt that
names no root index and disallows the sitemaps' folder."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.config import Limits
from pipeline.run import RunOptions, run
from pipeline.verify import verify
from pipeline.w3c import parse_w3c
from tests.output_check import write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
WAYS = ("published", "gzipped_again", "stale_index", "broken")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server(port: int, root: Path, robots: Path, extra: str = "") -> str:
    return f"""
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location = /robots.txt {{ alias {robots}; }}
        {extra}
    }}"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    if not Path(NGINX).exists():
        pytest.fail("nginx is not installed: `make http-server` installs it (Debian's nginx)")
    tmp = tmp_path_factory.mktemp("served")
    out = tmp / "out"
    urls = [f"{SITE}{'ab'[i % 2]}/page-{i:04d}" for i in range(120)]
    for day, count in enumerate((100, 120)):
        inv = write_inventory(tmp / f"inv-{day}.parquet", {"url": urls[:count]})
        run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out), limits=Limits(max_urls=25),
                       run_time=T0 + timedelta(days=day)))
        if day == 0:  # the first generation's root index: what a stale cache still serves
            (tmp / "old").mkdir()
            shutil.copy(out / "sitemap_index.xml", tmp / "old" / "sitemap_index.xml")
    manifest = json.loads((out / "manifest.json").read_text())
    robots = tmp / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private/\n\n"
                      + (out / "robots-sitemaps.txt").read_text())
    bad_robots = tmp / "bad-robots.txt"
    bad_robots.write_text("User-agent: *\nDisallow: /sitemaps/\n")
    broken = tmp / "broken"
    shutil.copytree(out, broken)
    cut = broken / manifest["sitemaps"][0]["key"]
    cut.write_bytes(cut.read_bytes()[:-10])
    ports = {way: _free_port() for way in WAYS}
    conf = tmp / "nginx.conf"
    for folder in ("logs", "temp"):
        (tmp / folder).mkdir()
    conf.write_text(f"""
daemon off;
master_process off;
pid {tmp}/nginx.pid;
error_log {tmp}/logs/error.log warn;
events {{ worker_connections 64; }}
http {{
    types {{ text/xml xml; application/gzip gz; text/plain txt; }}
    default_type application/octet-stream;
    access_log off;
    client_body_temp_path {tmp}/temp/body;
    proxy_temp_path {tmp}/temp/proxy;
    fastcgi_temp_path {tmp}/temp/fastcgi;
    uwsgi_temp_path {tmp}/temp/uwsgi;
    scgi_temp_path {tmp}/temp/scgi;
    {_server(ports["published"], out, robots, "gzip on; gzip_types text/xml;")}
    {_server(ports["gzipped_again"], out, robots,
             "gzip on; gzip_min_length 1; gzip_types application/gzip text/xml;")}
    {_server(ports["stale_index"], out, robots,
             f"location = /sitemap_index.xml {{ root {tmp / 'old'}; }}")}
    {_server(ports["broken"], broken, bad_robots)}
}}
""")
    proc = subprocess.Popen([NGINX, "-p", str(tmp), "-c", str(conf)],
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", ports["broken"]), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not start: {proc.stderr.read()!r}"
                                       if proc.stderr else "nginx did not start") from None
                time.sleep(0.1)
        yield {"out": str(out), "manifest": manifest,
               "sites": {way: f"http://127.0.0.1:{port}/" for way, port in ports.items()}}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _committed(manifest: dict[str, object]) -> datetime:
    return parse_w3c(str(manifest.get("committed") or manifest["created"]))


def test_the_output_served_as_published_passes(served: dict, capsys: pytest.CaptureFixture
                                               ) -> None:
    site = served["sites"]["published"]
    assert main(["verify", "--out", served["out"], "--site-url", site, "--all"]) == 0
    said = capsys.readouterr().out
    shards = len(served["manifest"]["sitemaps"])
    assert shards >= 5 and f"{1 + 1 + shards} file(s) fetched, as published" in said
    # a sample: the first and last shards and some between
    result = verify(served["out"], site, shards=3)
    assert result.ok and result.checked == 1 + 1 + 3 and not result.notes


def test_a_sitemap_gzipped_again_is_a_problem_per_file(served: dict) -> None:
    result = verify(served["out"], served["sites"]["gzipped_again"], shards=None)
    gzipped = [p for p in result.problems if "Content-Encoding: gzip" in p]
    assert len(gzipped) == len(served["manifest"]["sitemaps"]), result.problems
    assert len(result.problems) == len(gzipped)  # the index, gzipped for transfer, is fine


def test_a_stale_root_index_is_a_note_within_the_tolerance_then_a_problem(
        served: dict, capsys: pytest.CaptureFixture) -> None:
    site, went_live = served["sites"]["stale_index"], _committed(served["manifest"])
    early = verify(served["out"], site, now=went_live + timedelta(minutes=2))
    assert early.ok and len(early.notes) == 1 and "stale copy" in early.notes[0]
    late = verify(served["out"], site, now=went_live + timedelta(minutes=60))
    assert [p for p in late.problems if "sitemap_index.xml" in p and "stale copy" in p]
    assert main(["verify", "--out", served["out"], "--site-url", site,
                 "--stale-minutes", "0", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_a_cut_shard_and_a_robots_txt_that_hides_the_sitemaps_are_found(served: dict) -> None:
    result = verify(served["out"], served["sites"]["broken"], shards=None)
    problems = "\n".join(result.problems)
    assert f"names no 'Sitemap: {SITE}sitemap_index.xml' line" in problems
    assert "disallows /sitemaps/" in problems
    first = served["manifest"]["sitemaps"][0]["key"]
    assert [p for p in result.problems if first in p and "sha256" in p]
    assert len([p for p in result.problems if "sha256" in p]) == 1


def test_no_server_is_one_line_and_exit_1(served: dict, tmp_path: Path) -> None:
    site = f"http://127.0.0.1:{_free_port()}/"
    result = verify(served["out"], site, shards=1)
    assert not result.ok and all("no answer" in p for p in result.problems)
    assert main(["verify", "--out", served["out"], "--sample", "0"]) == 2  # bad input
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["verify", "--out", str(empty)]) == 1


def test_the_dags_verify_task_fails_naming_the_problems(served: dict) -> None:
    from pipeline import orchestration
    from pipeline.errors import ServedCopyWrong
    from pipeline.sites import SiteConfig

    def site(way: str) -> SiteConfig:
        return SiteConfig(name="www", site_url=SITE, inventory="unused", out=served["out"],
                          verify_url=served["sites"][way])

    assert orchestration.verify(site("published"))["ok"] is True
    with pytest.raises(ServedCopyWrong, match="Content-Encoding: gzip") as exc:
        orchestration.verify(site("gzipped_again"))
    assert exc.value.exit_code == 75  # a transient error: the task retries


def test_an_output_without_its_generations_copy_of_the_index_says_so(
        served: dict, tmp_path: Path) -> None:
    copy = tmp_path / "out"
    shutil.copytree(served["out"], copy)
    (index,) = served["manifest"]["indexes"]
    (copy / index["generation_key"]).unlink()
    result = verify(str(copy), served["sites"]["published"], shards=1)
    assert [p for p in result.problems if "is missing: run sitemaps validate" in p]


def test_fetching_every_sitemap_says_how_far_it_got(
        served: dict, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from pipeline import verify as verify_module

    monkeypatch.setattr(verify_module, "PROGRESS_SECONDS", 0.0)
    with caplog.at_level(logging.INFO, logger="pipeline.verify"):
        verify(served["out"], served["sites"]["published"], shards=None)
    shards = len(served["manifest"]["sitemaps"])
    lines = [r.getMessage() for r in caplog.records if "sitemaps fetched" in r.getMessage()]
    assert lines[-1] == f"verify: {shards} of {shards} sitemaps fetched, 0 problem(s) so far"
