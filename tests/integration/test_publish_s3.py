"""Publishing on a real S3 server (SeaweedFS): end to end, object metadata, incremental
runs, fault injection at every request, killed processes, races, shrink guard, GC,
and bad storage settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline import steps, storage
from pipeline.config import Limits
from pipeline.errors import PublishConflict, ShrinkRefused, StorageError, TransientError
from pipeline.gc import gc
from pipeline.layout import STATE_SUFFIX, default_state
from pipeline.run import RunOptions, run
from pipeline.status import status
from tests.output_check import read_output, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
T0 = datetime(2026, 12, 1, 3, tzinfo=UTC)


def inventory(tmp: Path, n: int, name: str = "inv.parquet", start: int = 0) -> str:
    urls = [f"{SITE}{'product' if i % 3 else 'blog'}/{i:05d}?a=1&b='x'" for i in
            range(start, start + n)]
    return str(write_inventory(tmp / name, {"url": urls}))


def opts(inv: str, out: str, **kw: Any) -> RunOptions:
    kw.setdefault("limits", Limits(max_urls=50))
    kw.setdefault("run_time", T0)
    return RunOptions(inventory=inv, site_url=SITE, out=out, **kw)


class InjectedFault(Exception):
    pass


@pytest.fixture
def fail_request() -> Iterator[Any]:
    """Arms a fault: `arm(n)` makes the n-th S3 request from now on raise; records requests
    (and whether the fault fired) in `arm.state`."""
    state: dict[str, Any] = {"seen": 0, "fail_at": None, "log": [], "fired": False}

    def hook(request: Any, **_: Any) -> None:
        state["seen"] += 1
        state["log"].append((request.method, request.url.split("?")[0]))
        if state["fail_at"] is not None and state["seen"] == state["fail_at"]:
            state["fired"] = True
            raise InjectedFault(f"injected failure of S3 request {state['seen']}")

    def arm(n: int | None) -> None:
        state["seen"], state["fail_at"], state["log"], state["fired"] = 0, n, [], False

    storage.CLIENT_HOOKS.append(("before-send.s3", hook))
    arm.state = state  # type: ignore[attr-defined]
    yield arm
    storage.CLIENT_HOOKS.remove(("before-send.s3", hook))


def request_kind(method: str, url: str) -> str:
    """A request with its variable parts (digests, generation ids) blanked: one publish step."""
    import re

    path = url.split("/", 4)[-1]  # below the bucket
    path = re.sub(r"faults-\d+|count", "OUT", path)
    path = re.sub(r"sitemaps/[^/]+\.xml\.gz", "sitemaps/SHARD", path)
    path = re.sub(r"\d{8}T\d{6}Z-[0-9a-f]{6}", "GEN", path)
    path = re.sub(r"sitemaps-work-[^/]+", "WORK", path)
    path = re.sub(r"_conditional_write_probe-[0-9a-f]+", "_conditional_write_probe-KEY", path)
    return f"{method} {path}"


def test_end_to_end_on_s3(s3_bucket: Any, tmp_path: Path) -> None:
    # The inventory itself is on S3 too, as a Hive-partitioned folder.
    local = Path(inventory(tmp_path, 180))
    s3_bucket.client.upload_file(str(local), s3_bucket.name, "inventory/day=1/part-0.parquet")
    out = s3_bucket.url("sitemaps")
    summary = run(opts(s3_bucket.url("inventory/"), out))
    assert summary["counts"]["published"] == 180
    result = read_output(out, max_urls=50)
    assert len(result.files) == 5  # blog 60 -> 2, product 120 -> 3
    head = s3_bucket.client.head_object
    shard = head(Bucket=s3_bucket.name, Key=f"sitemaps/{next(iter(result.files))}")
    assert shard["ContentType"] == "application/gzip" and "ContentEncoding" not in shard
    assert "immutable" in shard["CacheControl"]
    index = head(Bucket=s3_bucket.name, Key="sitemaps/sitemap_index.xml")
    assert index["ContentType"] == "application/xml" and "max-age=300" in index["CacheControl"]
    for key in ("manifest.json", "robots-sitemaps.txt"):  # short-lived, like the root index
        assert head(Bucket=s3_bucket.name, Key=f"sitemaps/{key}")["CacheControl"] == \
            storage.CACHE_SHORT, key
    report = status(out)
    assert report.root_index_matches and report.published == 180

    # A second run of the same inventory writes nothing: every object keeps its time.
    before = {o.key: o.modified for o in storage.open_storage(out).list("")}
    again = run(opts(s3_bucket.url("inventory/"), out, run_time=T0 + timedelta(days=1)))
    assert again["published"] is False and again["counts"]["shards_written"] == 0
    after = {o.key: o.modified for o in storage.open_storage(out).list("")}
    assert after == before


def test_sliced_plan_with_work_files_on_s3(s3_bucket: Any, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # Several planned parts on S3: render opens each, the snapshot is read from all. A first
    # run's slices read load's files of their sections' buckets (on S3) through the diff's
    # query; with this many slices, a later run that plans every row splits the diffed rows
    # by slice (plan-input/).
    from pipeline.plan import slices as plan

    split: list[list[list[str]]] = []
    real = plan._split_by_slice
    monkeypatch.setattr(plan, "_split_by_slice",
                        lambda con, work, slices: split.append(real(con, work, slices))
                        or split[-1])
    picked: list[tuple[int, list[str]]] = []
    real_pick = plan.files_of_sections
    monkeypatch.setattr(plan, "files_of_sections",
                        lambda con, uris, sections, view: picked.append(
                            (len(uris), real_pick(con, uris, sections, view))) or picked[-1][1])
    inv = inventory(tmp_path, 420)
    out = s3_bucket.url("sliced")
    kw = {"work": s3_bucket.url("work"), "plan_slice_rows": 60}
    summary = run(opts(inv, out, **kw))
    assert summary["counts"]["published"] == 420
    assert not split and len(picked) >= plan.SPLIT_INPUT_SLICES
    assert all(uri.startswith("s3://") and "/bucket=" in uri for _, files in picked
               for uri in files)
    assert any(0 < len(files) < every for every, files in picked)
    result = read_output(out, max_urls=50)
    assert len(result.locs) == 420
    again = run(opts(inv, out, run_time=T0 + timedelta(days=1), rebuild=True, **kw))
    assert again["counts"]["unchanged"] == 420 and again["counts"]["shards_written"] == 0
    # The rebuild keeps every shard: its slices are sized by the rows it may write (none),
    # so they are few and need no split.
    assert not split
    forced = run(opts(inv, out, run_time=T0 + timedelta(days=2), force=True, **kw))
    assert forced["counts"]["unchanged"] == 420
    assert len(split) == 1  # --force plans every row again, from its own split
    assert len(split[0]) >= plan.SPLIT_INPUT_SLICES
    assert all(uri.startswith("s3://") for files in split[0] for uri in files)
    assert sorted(read_output(out, max_urls=50).locs) == sorted(result.locs)


def test_diff_partitions_with_work_files_on_s3(s3_bucket: Any, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # A rerun diffed in 3 partitions, its work files on S3: load writes its rows cut by
    # partition and the load step the snapshot's (SNAPSHOT_SPLIT_PARTITIONS lowered to 3),
    # each partition reads its own files from S3; it publishes what one partition does.
    from pipeline import diff

    monkeypatch.setattr(diff, "SNAPSHOT_SPLIT_PARTITIONS", 3)
    cuts: list[list[list[str]]] = []  # each cut's files, by partition
    real = diff.split_snapshot

    def split_snapshot(uri: str, partitions: int, work: str, **kw: Any
                       ) -> tuple[list[list[str]], list[int]]:
        files, rows = real(uri, partitions, work, **kw)
        cuts.append(files)
        return files, rows

    monkeypatch.setattr(diff, "split_snapshot", split_snapshot)
    first, second = inventory(tmp_path, 300), inventory(tmp_path, 300, "second.parquet", 40)
    summaries = {}
    for name, out, kw in (("s3", s3_bucket.url("parts"), {"work": s3_bucket.url("work")}),
                          ("local", str(tmp_path / "one"), {})):
        run(opts(first, out, **kw))
        summaries[name] = run(opts(second, out, run_time=T0 + timedelta(days=1),
                                   diff_partitions=3 if name == "s3" else 1, **kw))
    counts = {k: summaries["s3"]["counts"][k] for k in ("added", "removed", "unchanged")}
    assert counts == {k: summaries["local"]["counts"][k] for k in counts} == {
        "added": 40, "removed": 40, "unchanged": 260}
    assert len(cuts) == 1 and len(cuts[0]) == 3
    assert all(f and all(u.startswith("s3://") and f"/diff_partition={p}/" in u for u in f)
               for p, f in enumerate(cuts[0]))
    assert sorted(read_output(s3_bucket.url("parts"), max_urls=50).locs) == sorted(
        read_output(str(tmp_path / "one"), max_urls=50).locs)


def _live(out: str) -> tuple[str, dict[str, Any]]:
    """The live generation, after checking it is whole: every file it lists is there."""
    import json

    store = storage.open_storage(out)
    m = json.loads(store.read_bytes("manifest.json"))
    for s in m["sitemaps"]:
        assert store.exists(s["key"]), f"live manifest lists missing {s['key']}"
    for i in m["indexes"]:
        assert store.exists(i["generation_key"]), i
    assert store.exists(f"generations/{m['generation']}/manifest.json")
    return str(m["generation"]), m


def _copy_prefix(bucket: Any, src: str, dst: str) -> None:
    """A server-side copy of every object under `src/` to `dst/`, and of its default state
    beside it (`src.state/` to `dst.state/`): an output and its state."""
    for a, b in ((src, dst), (src + STATE_SUFFIX, dst + STATE_SUFFIX)):
        pages = bucket.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket.name, Prefix=f"{a}/")
        for page in pages:
            for obj in page.get("Contents", []):
                bucket.client.copy_object(
                    Bucket=bucket.name, Key=f"{b}/{obj['Key'][len(a) + 1:]}",
                    CopySource={"Bucket": bucket.name, "Key": obj["Key"]})


def test_fault_at_every_request_of_a_publish(s3_bucket: Any, tmp_path: Path,
                                             fail_request: Any) -> None:
    """The same transition (inv1 live, then inv2) from the same starting objects each
    round, with the n-th request failing, for every n of that run: the fault fires on a
    request of the kind recorded at n, the run fails, and the generation live afterwards is
    the previous one for every fault up to the commit, the new one after it, whole either
    way; the next run converges (checked on one fault of each kind)."""
    inv1, inv2 = inventory(tmp_path, 120, "a.parquet"), inventory(tmp_path, 140, "b.parquet", 30)
    when = T0 + timedelta(hours=1)
    fail_request(None)
    run(opts(inv1, s3_bucket.url("base")))
    base_gen, _ = _live(s3_bucket.url("base"))
    _copy_prefix(s3_bucket, "base", "count")
    fail_request(None)
    run(opts(inv2, s3_bucket.url("count"), run_time=when))
    log = [request_kind(m, u) for m, u in fail_request.state["log"]]
    commits = [i for i, k in enumerate(log, start=1) if k == "PUT OUT/manifest.json"]
    assert len(commits) == 1, log
    commit = commits[0]
    first_of_kind: dict[str, int] = {}
    for i, kind in enumerate(log, start=1):
        first_of_kind.setdefault(kind, i)
    assert len(first_of_kind) > 8 and commit < len(log), log
    print(f"{len(log)} requests, {len(first_of_kind)} kinds, commit at {commit}")
    for n in range(1, len(log) + 1):
        target = f"faults-{n}"
        _copy_prefix(s3_bucket, "base", target)
        fail_request(n)
        with pytest.raises(Exception) as exc:  # noqa: PT011 - whatever wraps the fault
            run(opts(inv2, s3_bucket.url(target), run_time=when))
        assert fail_request.state["fired"], f"request {n} was never made"
        seen = [request_kind(m, u) for m, u in fail_request.state["log"]]
        assert seen[n - 1].replace(target, "OUT") == log[n - 1], (n, seen[n - 1], log[n - 1])
        cause: BaseException | None = exc.value
        while cause is not None and not isinstance(cause, InjectedFault):
            cause = cause.__cause__ or cause.__context__
        assert cause is not None, f"request {n}: the run failed of {exc.value!r}, not the fault"
        fail_request(None)
        live, manifest = _live(s3_bucket.url(target))
        if n <= commit:
            assert live == base_gen, f"a fault at request {n} ({log[n - 1]}) changed the live set"
        else:
            assert live != base_gen and manifest["counts"]["published"] == 140, n
        if n in first_of_kind.values() or n == commit + 1:
            summary = run(opts(inv2, s3_bucket.url(target), run_time=when + timedelta(hours=1)))
            result = read_output(s3_bucket.url(target), max_urls=50)
            assert len(result.locs) == 140 and summary["counts"]["published"] == 140
            assert status(s3_bucket.url(target)).root_index_matches


def test_killed_process_leaves_previous_generation(s3_bucket: Any, tmp_path: Path) -> None:
    """`sitemaps run` SIGKILLed just before chosen S3 requests of one transition (from the
    same starting objects each time): a shard upload, the generation's manifest, the commit
    (never sent: the previous generation stays live), the request after it (the new one is
    live) and the last; whole either way, and the next run converges."""
    inv1, inv2 = inventory(tmp_path, 300, "a.parquet"), inventory(tmp_path, 320, "b.parquet", 50)
    run(opts(inv1, s3_bucket.url("base"), limits=Limits(max_urls=10)))
    base_gen, _ = _live(s3_bucket.url("base"))
    # A killed run cannot remove its temp folder: give the runs one the test owns.
    (tmp_path / "tmp").mkdir()
    root = Path(__file__).resolve().parents[2]

    def killed_at(n: int, target: str) -> list[str]:
        _copy_prefix(s3_bucket, "base", target)
        log = tmp_path / f"requests-{target}.log"
        env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "SITEMAPS_TEST_KILL_AT": str(n),
               "SITEMAPS_TEST_REQUEST_LOG": str(log)}
        proc = subprocess.run(
            [sys.executable, "-m", "tests.integration.kill_at", "-q", "run", "--inventory", inv2,
             "--site-url", SITE, "--out", s3_bucket.url(target), "--max-urls-per-sitemap", "10"],
            cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == (-signal.SIGKILL if n else 0), proc.stderr
        return [request_kind(*line.split(" ", 1)).replace(target, "OUT")
                for line in log.read_text().splitlines()]

    log = killed_at(0, "whole")
    (commit,) = [i for i, k in enumerate(log, start=1) if k == "PUT OUT/manifest.json"]
    uploads = [i for i, k in enumerate(log, start=1) if k == "PUT OUT/sitemaps/SHARD"]
    (gen_manifest,) = [i for i, k in enumerate(log, start=1)
                       if k == "PUT OUT/generations/GEN/manifest.json"]
    assert len(uploads) > 10 and uploads[-1] < gen_manifest < commit < len(log), log
    for n in (uploads[0], gen_manifest, commit, commit + 1, len(log)):
        target = f"killed-{n}"
        seen = killed_at(n, target)
        assert len(seen) == n and seen[n - 1] == log[n - 1], (n, seen[-1:], log[n - 1])
        live, _ = _live(s3_bucket.url(target))
        assert (live == base_gen) == (n <= commit), (n, log[n - 1], live)
        summary = run(RunOptions(inventory=inv2, site_url=SITE, out=s3_bucket.url(target),
                                 limits=Limits(max_urls=10)))
        assert summary["counts"]["published"] == 320
        assert len(read_output(s3_bucket.url(target), max_urls=10).locs) == 320
        assert status(s3_bucket.url(target)).root_index_matches


def test_two_runs_racing_exactly_one_commits(s3_bucket: Any, tmp_path: Path) -> None:
    out = s3_bucket.url("race")
    inv_a, inv_b = inventory(tmp_path, 100, "a.parquet"), inventory(tmp_path, 100, "b.parquet", 7)
    run(opts(inv_a, out))
    ctxs = [steps.begin(opts(inv, out, run_time=T0 + timedelta(hours=h)))
            for h, inv in ((1, inv_b), (2, inv_a.replace("a.parquet", "b.parquet")))]
    try:
        uris = []
        for ctx in ctxs:
            steps.load_step(ctx)
            steps.diff_step(ctx)
            steps.plan_step(ctx)
            uris.append(steps.render_step(ctx, None).uri)
        winner = steps.publish_step(ctxs[0], [uris[0]])
        with pytest.raises(PublishConflict, match="another generation was published"):
            steps.publish_step(ctxs[1], [uris[1]])
    finally:
        for ctx in ctxs:
            steps.finish(ctx)
    assert status(out).live == winner.generation
    read_output(out, max_urls=50)


def test_two_processes_racing(s3_bucket: Any, tmp_path: Path) -> None:
    """Two `sitemaps run` processes interleaved at a chosen point: over a live generation,
    A holds just before its commit (a hook on its S3 client) while B runs and commits;
    then A's conditional write fails: A exits 3 with the documented line, B's generation is live and whole."""
    out = s3_bucket.url("race2")
    run(RunOptions(inventory=inventory(tmp_path, 2000, "p2.parquet", 2), site_url=SITE, out=out))
    root = Path(__file__).resolve().parents[2]
    hold = tmp_path / "hold"
    hold.touch()

    def cmd(i: int) -> list[str]:
        return [sys.executable, "-m", "tests.integration.kill_at", "-q", "run", "--json",
                "--no-report", "--inventory", inventory(tmp_path, 2000, f"p{i}.parquet", i),
                "--site-url", SITE, "--out", out]

    a = subprocess.Popen(cmd(0), cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, "SITEMAPS_TEST_HOLD_FILE": str(hold),
                                         "SITEMAPS_TEST_HOLD_URL_SUFFIX": "/race2/manifest.json"})
    try:
        deadline = time.monotonic() + 120
        while not Path(f"{hold}.held").exists():
            assert a.poll() is None, a.communicate()
            assert time.monotonic() < deadline, "A never reached its commit"
            time.sleep(0.1)
        b = subprocess.run(cmd(1), cwd=root, capture_output=True, text=True, timeout=120)
        assert b.returncode == 0, b.stderr
    finally:
        hold.unlink()
    stdout, stderr = a.communicate(timeout=120)
    assert a.returncode == 3, stderr
    assert stderr.splitlines() == [
        line for line in stderr.splitlines() if line.startswith("error: another generation was "
                                                                "published since this run started")]
    assert len(stderr.splitlines()) == 1 and stdout == ""
    assert status(out).live == json.loads(b.stdout)["generation"]
    assert read_output(out).locs and len(read_output(out).locs) == 2000


def test_shrink_guard(s3_bucket: Any, tmp_path: Path) -> None:
    out = s3_bucket.url("shrink")
    run(opts(inventory(tmp_path, 200, "full.parquet"), out))
    live = status(out).live
    empty = str(write_inventory(tmp_path / "empty.parquet", {"url": pa_empty()}))
    with pytest.raises(ShrinkRefused, match="no URL at all"):
        run(opts(empty, out, run_time=T0 + timedelta(hours=1)))
    with pytest.raises(ShrinkRefused, match="fewer"):
        run(opts(inventory(tmp_path, 150, "cut.parquet"), out, run_time=T0 + timedelta(hours=2)))
    assert status(out).live == live
    result = run(opts(inventory(tmp_path, 150, "cut.parquet"), out, allow_shrink=True,
                      run_time=T0 + timedelta(hours=3)))
    assert result["published"] and status(out).published == 150
    # Within the threshold: published without the flag.
    run(opts(inventory(tmp_path, 140, "cut2.parquet"), out, run_time=T0 + timedelta(hours=4)))
    assert status(out).published == 140


def pa_empty() -> Any:
    import pyarrow as pa

    return pa.array([], pa.string())


def test_gc_keeps_what_kept_generations_reference(s3_bucket: Any, tmp_path: Path) -> None:
    out = s3_bucket.url("gc")
    gens = []
    for i in range(5):  # five generations, each changing some shards
        gens.append(run(opts(inventory(tmp_path, 100, f"g{i}.parquet", i * 10), out,
                             allow_shrink=True, run_time=T0 + timedelta(hours=i),
                             gc_grace_hours=None))["generation"])
    store = storage.open_storage(out)
    shard_keys = {o.key for o in store.list("sitemaps/")}
    state = default_state(out)
    kept = gc(out, state, keep=2, grace_hours=48, dry_run=False, keep_days=0)
    assert kept.deleted == []  # everything is younger than the grace period
    dry = gc(out, state, keep=2, grace_hours=0, dry_run=True, keep_days=0)
    assert dry.deleted and {o.key for o in store.list("sitemaps/")} == shard_keys
    done = gc(out, state, keep=2, grace_hours=0, keep_days=0)
    assert sorted(done.deleted) == sorted(dry.deleted)
    read_output(out, max_urls=50)  # the live generation is whole
    import json

    assert sorted(done.kept_generations) == gens[3:]  # the newest two: which, not how many
    for gen in done.kept_generations:
        m = json.loads(store.read_bytes(f"generations/{gen}/manifest.json"))
        assert all(store.exists(s["key"]) for s in m["sitemaps"])
    assert {o.key.split("/")[1] for o in store.list("generations/")} == set(gens[3:])
    referenced = set()
    for gen in gens[3:]:
        m = json.loads(store.read_bytes(f"generations/{gen}/manifest.json"))
        referenced |= {s["key"] for s in m["sitemaps"]}
    assert {o.key for o in store.list("sitemaps/")} == referenced  # the others are gone


class _Raw:
    """The body of an answer made up in the test (botocore reads it with `stream()`)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


def test_transient_errors_are_retried_then_exit_75_and_no_secret_is_logged(
        s3_bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    """503 SlowDown answered (by a hook, instead of sending) to the first tries of the
    commit and of a shard upload: botocore's retries get through and the run publishes.
    Answered to every try: exit 75 with one line, the previous generation still live. The
    secret key appears in no log line, output or written file."""
    import logging

    from botocore.awsrequest import AWSResponse

    from pipeline.cli import main

    caplog.set_level(logging.DEBUG)
    out = s3_bucket.url("transient")
    run(opts(inventory(tmp_path, 60, "a.parquet"), out))
    gen = status(out).live
    tries: dict[str, int] = {}
    fail_tries = {"n": 2}
    body = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"

    def slow_down(request: Any, **_: Any) -> AWSResponse | None:
        path = request.url.split("?")[0]
        kind = ("commit" if request.method == "PUT" and path.endswith("/transient/manifest.json")
                else "shard" if request.method == "PUT" and "/sitemaps/" in path else None)
        if kind is None:
            return None
        tries[kind] = tries.get(kind, 0) + 1
        if tries[kind] <= fail_tries["n"]:
            return AWSResponse(request.url, 503, {}, _Raw(body))
        return None

    storage.CLIENT_HOOKS.append(("before-send.s3", slow_down))
    try:
        summary = run(opts(inventory(tmp_path, 60, "b.parquet", 5), out,
                           run_time=T0 + timedelta(hours=1)))
        assert summary["published"] and status(out).live == summary["generation"] != gen
        assert tries == {"commit": 3, "shard": tries["shard"]} and tries["shard"] >= 3, tries
        read_output(out, max_urls=50)
        gen = summary["generation"]

        tries.clear()
        fail_tries["n"] = 10**6
        monkeypatch.setenv("SITEMAPS_S3_ATTEMPTS", "2")
        code = main(["-q", "run", "--inventory", inventory(tmp_path, 60, "c.parquet", 9),
                     "--site-url", SITE, "--out", out, "--max-urls-per-sitemap", "50"])
        err = capsys.readouterr().err
        assert code == 75, err
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and \
            "SlowDown" in err and "retry later" in err, err
        assert status(out).live == gen
    finally:
        storage.CLIENT_HOOKS.remove(("before-send.s3", slow_down))
    secret = s3_bucket.secret_key
    assert secret not in repr(storage.s3_settings()) and secret not in str(storage.s3_settings())
    assert caplog.records and secret not in caplog.text and secret not in err
    assert secret not in json.dumps(summary)
    for obj in storage.open_storage(out).list(""):
        assert secret.encode() not in storage.open_storage(out).read_bytes(obj.key), obj.key


def test_gc_aborts_abandoned_multipart_uploads(s3_bucket: Any) -> None:
    out = s3_bucket.url("mp")
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="mp/manifest.json",
                                Body=b'{"generation": "g", "history": ["g"], "sitemaps": [], '
                                     b'"indexes": []}')
    s3_bucket.client.create_multipart_upload(Bucket=s3_bucket.name, Key="mp/sitemaps/x.xml.gz")
    result = gc(out, default_state(out), grace_hours=0,
                now=datetime.now(UTC) + timedelta(minutes=1))
    assert result.aborted_uploads == 1
    assert not s3_bucket.client.list_multipart_uploads(Bucket=s3_bucket.name).get("Uploads")


def test_bad_storage_gives_clear_errors(s3_bucket: Any, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    inv = inventory(tmp_path, 10)
    with pytest.raises(StorageError, match="does not exist"):
        run(opts(inv, "s3://no-such-bucket-here/x"))
    out = s3_bucket.url("creds")
    run(opts(inv, out))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(StorageError, match="refused"):
        run(opts(inv, out))
    monkeypatch.undo()
    for k, v in {"AWS_ENDPOINT_URL": s3_bucket.endpoint_url,
                 "AWS_ACCESS_KEY_ID": s3_bucket.access_key,
                 "AWS_SECRET_ACCESS_KEY": s3_bucket.secret_key}.items():
        monkeypatch.setenv(k, v)
    assert status(out).root_index_matches
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("SITEMAPS_S3_ATTEMPTS", "2")
    monkeypatch.setenv("SITEMAPS_S3_CONNECT_TIMEOUT", "1")
    with pytest.raises(TransientError, match="cannot reach"):
        run(opts(inv, out))


def test_gc_keeps_a_week_of_generations_for_the_feed(s3_bucket: Any, tmp_path: Path) -> None:
    out = s3_bucket.url("gcweek")
    for i in range(4):
        run(opts(inventory(tmp_path, 100, f"w{i}.parquet", i * 10), out, allow_shrink=True,
                 run_time=T0 + timedelta(days=3 * i), gc_grace_hours=None))
    gens = [json.loads(storage.open_storage(out).read_bytes(
        "manifest.json"))["history"]][0]
    result = gc(out, default_state(out), keep=1, grace_hours=0, dry_run=True,
                now=T0 + timedelta(days=9, hours=1))
    # keep=1 keeps the live one (day 9); keep_days=7 adds days 6 and 3, not day 0.
    assert sorted(result.kept_generations) == sorted(gens)[1:] and len(gens) == 4
