"""The README's promises about `sitemaps` on a local output, each with its documented exit
code (in process: `pipeline.cli.main`): the shrink guard and its threshold (4), too many
rejects (5), a held lease and a lost race (3), `status` on a root index that disagrees (1),
`--force`, `--section-depth`, `sitemaps diff`, `sitemaps gc` (which generations it keeps),
change detection without `content_hash`, an index's `<lastmod>`, rejects keeping their
original fields, and every limit at N-1, N and N+1."""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lxml import etree

from pipeline import lease, storage
from pipeline import run as run_module
from pipeline.cli import main
from pipeline.config import Limits
from pipeline.run import RunOptions, run
from tests.output_check import NS, read_output, state_file, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def urls(n: int, start: int = 0, section: str = "p") -> list[str]:
    return [f"{SITE}{section}/{i:05d}" for i in range(start, start + n)]


def inv(tmp: Path, name: str, columns: dict[str, list[Any]],
        schema: pa.Schema | None = None) -> str:
    return str(write_inventory(tmp / name, columns, schema))


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["-q", *args])
    out, err = capsys.readouterr()
    return code, out, err


def live(out: Path) -> str:
    return str(json.loads((out / "manifest.json").read_text())["generation"])


def one_error(err: str, text: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], err


def test_shrink_guard_exits_4_and_its_threshold(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    full, half = inv(tmp_path, "full.parquet", {"url": urls(100)}), inv(
        tmp_path, "half.parquet", {"url": urls(50)})
    base = ["run", "--site-url", SITE, "--out", str(out), "--no-report"]
    assert cli(capsys, *base, "--inventory", full)[0] == 0
    gen = live(out)
    for extra in ([], ["--shrink-threshold", "0.45"]):  # 50% fewer: over 10% and 45%
        code, _, err = cli(capsys, *base, "--inventory", half, *extra)
        assert code == 4
        one_error(err, "fewer")
        assert live(out) == gen
    code, _, err = cli(capsys, *base, "--inventory", half, "--shrink-threshold", "0.55")
    assert code == 0, err
    assert live(out) != gen and read_output(str(out)).manifest["counts"]["published"] == 50


def test_too_many_rejects_exit_5_and_write_nothing(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Refused, the run publishes nothing but keeps its rejects below the state, names that
    file in full, and logs the top reasons with three rows each; `sitemaps diff` refuses
    the same way (its rejects in a local temporary folder) and takes the same flag."""
    out = tmp_path / "out"
    ftp = [f"ftp://www.example.com/{i}" for i in range(8)]
    rows = urls(89) + ftp + ["", "", ""]  # 11% rejected: 8 not_http, 3 empty
    inventory = inv(tmp_path, "i.parquet", {"url": rows})
    args = ["run", "--site-url", SITE, "--out", str(out), "--no-report", "--inventory", inventory]
    code, _, err = cli(capsys, *args)
    assert code == 5
    one_error(err, "rejected")
    assert not (out / "manifest.json").exists()
    kept = list((tmp_path / "out.state" / "refused").glob("*/rejects.parquet"))
    assert len(kept) == 1 and f"the rejected rows are in {kept[0]};" in err, err
    table = pq.read_table(kept[0]).to_pylist()
    assert sorted(r["url"] for r in table if r["reason"] == "not_http") == sorted(ftp)
    assert sum(r["reason"] == "empty" for r in table) == 3
    shown = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert shown[0].startswith("load: rejected as not_http: 8 row(s), e.g. ") and all(
        repr(u) in shown[0] for u in ftp[:3]) and repr(ftp[3]) not in shown[0], shown
    assert shown[1].startswith("load: rejected as empty: 3 row(s)"), shown
    caplog.clear()

    dry = ["diff", "--site-url", SITE, "--inventory", inventory, "--out", str(out)]
    code, _, err = cli(capsys, *dry)
    assert code == 5
    one_error(err, "rejected")
    found = re.search(r"the rejected rows are in (\S+);", err)
    assert found and Path(found[1]).is_absolute() and not Path(found[1]).is_relative_to(out)
    assert len(pq.read_table(found[1])) == 11
    assert list((tmp_path / "out.state" / "refused").glob("*/rejects.parquet")) == kept  # nothing new
    code, printed, err = cli(capsys, *dry, "--max-reject-share", "0.12")
    assert code == 0 and "would publish 89 URLs" in printed, err

    assert cli(capsys, *args, "--max-reject-share", "0.12")[0] == 0
    assert read_output(str(out)).manifest["counts"]["published"] == 89
    assert kept[0].exists()  # the run's gc: still in its grace period
    assert cli(capsys, "gc", "--out", str(out), "--grace-hours", "0")[0] == 0
    assert not kept[0].exists()


def test_a_held_lease_exits_3_before_any_work(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = ["run", "--site-url", SITE, "--out", str(out), "--no-report",
            "--inventory", inv(tmp_path, "i.parquet", {"url": urls(20)})]
    assert cli(capsys, *args, "--lease-seconds", "60")[0] == 0
    gen = live(out)
    lease.acquire(str(out), "another-run", 600)
    code, _, err = cli(capsys, *args, "--lease-seconds", "60", "--force")
    assert code == 3
    one_error(err, "holds the lease")
    assert live(out) == gen
    lease.release(str(out), "another-run")
    assert cli(capsys, *args, "--lease-seconds", "60", "--force")[0] == 0


@pytest.mark.parametrize("when", ["after render", "just before the commit"])
def test_a_lost_race_on_a_local_output_exits_3(tmp_path: Path, when: str,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run commits while this one renders (found when publish starts), or between
    publish's last look and its conditional write (found by the compare-and-rename): this
    one exits 3 and the winner stays live, with nothing of the loser referenced."""
    out = tmp_path / "out"
    first = inv(tmp_path, "a.parquet", {"url": urls(30)})
    other = inv(tmp_path, "b.parquet", {"url": urls(30, 5)})
    run(RunOptions(inventory=first, site_url=SITE, out=str(out), run_time=T0))
    winner: dict[str, Any] = {}

    def win() -> None:
        winner["running"] = True
        winner.update(run(RunOptions(inventory=other, site_url=SITE, out=str(out),
                                     run_time=T0 + timedelta(hours=1))))

    if when == "after render":
        render = run_module.steps.render_step

        def render_then_lose(*a: Any, **kw: Any) -> Any:
            result = render(*a, **kw)
            if not winner:
                win()
            return result

        monkeypatch.setattr(run_module.steps, "render_step", render_then_lose)
    else:
        put_if = storage.LocalStorage.put_if

        def lose_at_commit(self: Any, key: str, *a: Any, **kw: Any) -> None:
            if key == "manifest.json" and not winner:
                win()
            put_if(self, key, *a, **kw)

        monkeypatch.setattr(storage.LocalStorage, "put_if", lose_at_commit)
    code, _, err = cli(capsys, "run", "--site-url", SITE, "--out", str(out), "--no-report",
                       "--inventory", inv(tmp_path, "c.parquet", {"url": urls(30, 9)}))
    assert code == 3
    one_error(err, "another generation was published since this run started")
    assert winner["published"] and live(out) == winner["generation"]
    result = read_output(str(out))
    assert sorted(result.locs) == urls(30, 5)


def test_status_exits_1_when_the_root_index_disagrees(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    run(RunOptions(inventory=inv(tmp_path, "i.parquet", {"url": urls(20)}), site_url=SITE,
                   out=str(out), run_time=T0))
    assert cli(capsys, "status", "--out", str(out))[0] == 0
    root = out / "sitemap_index.xml"
    root.write_bytes(root.read_bytes().replace(b"</sitemapindex>", b"<!-- x --></sitemapindex>"))
    code, stdout, _ = cli(capsys, "status", "--out", str(out))
    assert code == 1, stdout


def test_force_rewrites_every_shard(tmp_path: Path) -> None:
    out = tmp_path / "out"
    o = RunOptions(inventory=inv(tmp_path, "i.parquet", {"url": urls(50)}), site_url=SITE,
                   out=str(out), limits=Limits(max_urls=10), run_time=T0)
    run(o)
    mtimes = {p: p.stat().st_mtime_ns for p in (out / "sitemaps").iterdir()}
    again = run(RunOptions(**{**o.__dict__, "run_time": T0 + timedelta(hours=1)}))
    assert again["counts"]["shards_written"] == 0
    forced = run(RunOptions(**{**o.__dict__, "run_time": T0 + timedelta(hours=2),
                               "force": True}))
    assert forced["counts"]["shards_written"] == 5 == forced["counts"]["sitemaps"]
    assert all(p.stat().st_mtime_ns > m for p, m in mtimes.items())  # each file written again


def test_section_depth_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rows = [f"{SITE}shop/shoes/{i}" for i in range(3)] + [f"{SITE}shop/hats/{i}" for i in
                                                         range(2)] + [f"{SITE}about"]
    code, _, err = cli(capsys, "run", "--site-url", SITE, "--out", str(out), "--no-report",
                       "--section-depth", "2",
                       "--inventory", inv(tmp_path, "i.parquet", {"url": rows}))
    assert code == 0, err
    files = read_output(str(out)).files
    by_section = {re.sub(r"-\d{5}-.*", "", Path(k).name): sorted(v) for k, v in files.items()}
    assert by_section == {"shop-shoes": sorted(rows[:3]), "shop-hats": sorted(rows[3:5]),
                          "root": [rows[5]]}


def test_diff_prints_what_a_run_would_do_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    run(RunOptions(inventory=inv(tmp_path, "a.parquet", {"url": urls(20),
                                                        "priority": [0.5] * 20}),
                   site_url=SITE, out=str(out), run_time=T0))
    before = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*"))
    changed = inv(tmp_path, "b.parquet", {"url": urls(17, 3) + urls(4, 100),
                                          "priority": [0.9, 0.9] + [0.5] * 19})
    code, stdout, err = cli(capsys, "diff", "--inventory", changed, "--out", str(out),
                            "--json")
    assert code == 0, err
    counts = json.loads(stdout)["counts"]
    assert {k: counts[k] for k in ("added", "changed", "unchanged", "removed")} == {
        "added": 4, "changed": 2, "unchanged": 15, "removed": 3}
    assert sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*")) == before


def test_gc_keeps_the_newest_generations_and_deletes_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    gens = []
    weeks_ago = datetime.now(UTC) - timedelta(days=20)  # older than the 7 days GC keeps
    for i in range(4):  # each generation changes its own shard
        summary = run(RunOptions(
            inventory=inv(tmp_path, f"g{i}.parquet", {"url": urls(10, 0, f"s{i}") + urls(10)}),
            site_url=SITE, out=str(out), run_time=weeks_ago + timedelta(hours=i),
            allow_shrink=True,
            gc_grace_hours=None, max_reject_share=0.5))
        gens.append((summary["generation"], {s["key"] for s in read_output(
            str(out)).manifest["sitemaps"]}))
    args = ["gc", "--out", str(out), "--keep-generations", "2", "--grace-hours", "0"]
    code, dry, err = cli(capsys, *args, "--dry-run")
    assert code == 0, err
    listed = sorted((p.relative_to(out).as_posix()) for p in out.rglob("*") if p.is_file())
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    left = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    deleted = set(listed) - left
    kept = gens[2][1] | gens[3][1]
    gone = (gens[0][1] | gens[1][1]) - kept
    assert gone and all(k in left for k in kept) and all(k not in left for k in gone)
    assert {k for k in deleted if k.startswith("sitemaps/")} == gone
    assert all(k in dry for k in gone)  # the dry run listed exactly these, and kept them
    folders = {k.split("/")[1] for k in left if k.startswith("generations/")}
    assert folders == {gens[2][0], gens[3][0]}
    state = {p.parent.name for p in (tmp_path / "out.state" / "generations").glob("*/*")}
    assert state == {gens[2][0], gens[3][0]}  # old state goes with its generation
    read_output(str(out))


def test_change_detection_without_content_hash_and_index_lastmod(tmp_path: Path) -> None:
    """No content_hash: a change of changefreq, priority or an extension is a change (lastmod
    moves to the run's time), anything else keeps its lastmod; each index <lastmod> is the
    newest lastmod in its sitemap."""
    image = pa.list_(pa.struct([("loc", pa.string())]))
    schema = pa.schema([("url", pa.string()), ("changefreq", pa.string()),
                        ("priority", pa.float64()), ("images", image)])
    rows = urls(30)
    base = {"url": rows, "changefreq": ["daily"] * 30, "priority": [0.5] * 30,
            "images": [[]] * 30}
    out = tmp_path / "out"
    o = RunOptions(inventory=inv(tmp_path, "a.parquet", base, schema), site_url=SITE,
                   out=str(out), limits=Limits(max_urls=10), run_time=T0)
    run(o)
    edited = {k: list(v) for k, v in base.items()}
    edited["changefreq"][3] = "weekly"  # the first two files change, the third does not
    edited["priority"][5] = 0.8
    edited["images"][14] = [{"loc": f"{SITE}img/1.png"}]
    t1 = T0 + timedelta(days=1)
    summary = run(RunOptions(**{**o.__dict__, "run_time": t1,
                                "inventory": inv(tmp_path, "b.parquet", edited, schema)}))
    assert summary["counts"]["changed"] == 3 and summary["counts"]["unchanged"] == 27
    result = read_output(str(out), max_urls=10)
    stamp = {u: lm for u, lm in result.lastmods.items()}
    assert {u for u, lm in stamp.items() if lm == "2026-12-02T03:00:00Z"} == {
        rows[3], rows[5], rows[14]}
    assert {lm for u, lm in stamp.items() if u not in (rows[3], rows[5], rows[14])} == {
        "2026-12-01T03:00:00Z"}
    index = etree.fromstring((out / "sitemap_index.xml").read_bytes())
    listed = {e.findtext("sm:loc", namespaces=NS).rsplit("/", 1)[1]:
              e.findtext("sm:lastmod", namespaces=NS) for e in index.iterfind("sm:sitemap", NS)}
    assert len(listed) == 3 and sorted(listed.values()) == [
        "2026-12-01T03:00:00Z", "2026-12-02T03:00:00Z", "2026-12-02T03:00:00Z"]
    for key, locs in result.files.items():
        assert listed[Path(key).name] == max(stamp[u] for u in locs), key


def test_rejects_keep_their_original_fields(tmp_path: Path) -> None:
    out = tmp_path / "out"
    raw = ["  HTTPS://other.example.org/x  ", "ftp://www.example.com/y"]
    run(RunOptions(inventory=inv(tmp_path, "i.parquet", {
        "url": urls(20) + raw, "priority": [0.5] * 20 + [0.3, 0.7],
        "changefreq": ["daily"] * 20 + ["Weekly", "bogus"]}), site_url=SITE, out=str(out),
        run_time=T0, max_reject_share=0.5))
    manifest = read_output(str(out)).manifest
    rejects = pq.read_table(state_file(str(out), manifest, "rejects")).to_pylist()
    got = sorted((r["url"], r["reason"], r["priority"], r["changefreq"]) for r in rejects)
    # The URL exactly as it came in; changefreq as parsed (lowercased, an invalid one null),
    # as docs/operations.md says.
    assert got == [(raw[0], "off_site", 0.3, "weekly"), (raw[1], "not_http", 0.7, None)]


def _one_file(out: Path) -> int:
    (gz,) = (out / "sitemaps").iterdir()
    return len(gzip.decompress(gz.read_bytes()))


@pytest.mark.parametrize("limit", ["urls", "bytes", "sitemaps_per_index"])
def test_every_limit_at_n_minus_1_n_and_n_plus_1(tmp_path: Path, limit: str) -> None:
    """A limit equal to what one file (or one index) holds keeps it whole; one less splits
    it; one more changes nothing."""
    rows = urls(12)
    source = inv(tmp_path, "i.parquet", {"url": rows})

    def files(limits: Limits, name: str) -> tuple[int, int]:
        out = tmp_path / name
        run(RunOptions(inventory=source, site_url=SITE, out=str(out), limits=limits,
                       run_time=T0))
        result = read_output(str(out), max_urls=limits.max_urls, max_bytes=limits.max_bytes,
                             max_per_index=limits.max_sitemaps_per_index)
        assert sorted(result.locs) == rows
        return len(result.files), len(result.manifest["indexes"])

    if limit == "urls":
        assert [files(Limits(max_urls=n), f"u{n}")[0] for n in (11, 12, 13)] == [2, 1, 1]
    elif limit == "bytes":
        # N: the size of the one file of a run without limit. Each run below checks (in
        # read_output) that no file exceeds its limit. The plan keeps a margin (the header
        # and the longest line) under the limit, so at N the URLs are still cut in two files.
        files(Limits(), "whole")
        size = _one_file(tmp_path / "whole")
        got = [files(Limits(max_bytes=n), f"b{n}")[0] for n in (size - 1, size, size + 1)]
        assert got == [2, 2, 2]
    else:  # 12 sitemaps of one URL each
        got = [files(Limits(max_urls=1, max_sitemaps_per_index=n), f"i{n}")
               for n in (11, 12, 13)]
        assert got == [(12, 2), (12, 1), (12, 1)]


def test_a_first_run_cuts_long_lines_before_the_byte_limit(tmp_path: Path) -> None:
    """A byte limit of the overhead plus two and a half lines of 1,500-byte URLs: the plan
    must keep the longest line's margin (a first run reads it from the planned part), so
    no file holds three lines; without it a file would pass the limit by half a line."""
    from pipeline.sitemap_xml import max_urlset_overhead

    rows = [f"{SITE}p/{i:02d}-" + "x" * 1_460 for i in range(10)]
    source = inv(tmp_path, "long.parquet", {"url": rows})
    line = len(f"<url><loc>{rows[0]}</loc></url>\n")
    limits = Limits(max_bytes=max_urlset_overhead() + line * 5 // 2)
    out = tmp_path / "out"
    run(RunOptions(inventory=source, site_url=SITE, out=str(out), limits=limits, run_time=T0))
    result = read_output(str(out), max_urls=limits.max_urls, max_bytes=limits.max_bytes)
    assert sorted(result.locs) == rows
    sizes = [len(gzip.decompress(p.read_bytes())) for p in (out / "sitemaps").glob("*.gz")]
    assert len(sizes) >= 4 and max(sizes) <= limits.max_bytes, sizes


def test_feed_holds_the_newest_10000_changes_and_feed_days_0_writes_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = inv(tmp_path, "i.parquet", {"url": urls(10_005)})
    args = ["run", "--site-url", SITE, "--no-report", "--inventory", source]
    out = tmp_path / "out"
    assert cli(capsys, *args, "--out", str(out))[0] == 0
    feed = (out / "feed.atom").read_text()
    assert feed.count("<entry>") == 10_000
    robots = (out / "robots-sitemaps.txt").read_text().splitlines()
    assert robots == [f"Sitemap: {SITE}sitemap_index.xml", f"Sitemap: {SITE}feed.atom"]
    none = tmp_path / "none"
    assert cli(capsys, *args, "--out", str(none), "--feed-days", "0")[0] == 0
    assert not (none / "feed.atom").exists()
    assert (none / "robots-sitemaps.txt").read_text().splitlines() == [
        f"Sitemap: {SITE}sitemap_index.xml"]
