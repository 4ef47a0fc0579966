"""Nothing lost, nothing wrong under faults (issue 14), on the real S3 server (SeaweedFS):
GC against a concurrent publish, grace from retirement, missing live files, a broken
manifest or snapshot, a commit whose reply was lost, a run that lost its race, a server
that ignores conditional writes, root files that only move forward, the lease, and
leftovers (multipart uploads, temporary files, work folders)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import urllib3
from botocore.exceptions import ConnectionClosedError

from pipeline import lease, publish, steps, storage
from pipeline.cli import main
from pipeline.errors import LiveStateCorrupt, PublishConflict
from pipeline.gc import collect, collect_work_folders, decide, gc, make_work_folder
from pipeline.layout import default_state
from pipeline.run import run
from pipeline.status import repair, status
from tests.integration.test_publish_s3 import SITE, T0, inventory, opts
from tests.output_check import read_output, state_file, write_inventory

pytestmark = pytest.mark.integration


def _manifest(out: str) -> dict[str, Any]:
    return json.loads(storage.open_storage(out).read_bytes("manifest.json"))


def _shard_keys(out: str) -> set[str]:
    return {s["key"] for s in _manifest(out)["sitemaps"]}


# -- 1, 2: GC ----------------------------------------------------------------------------------

def test_gc_spares_a_shard_a_run_brought_back_after_gc_listed_it(s3_bucket: Any,
                                                                  tmp_path: Path) -> None:
    out = s3_bucket.url("gcrace")
    # With their own lastmods, the same rows render to the same bytes, so the same keys.
    blog = [f"{SITE}blog/{i:03d}" for i in range(30)]
    product = [f"{SITE}product/{i:03d}" for i in range(40)]
    when = datetime(2026, 11, 1, tzinfo=UTC)
    inv_a = str(write_inventory(tmp_path / "a.parquet",
                                {"url": blog + product, "lastmod": [when] * 70}))
    inv_b = str(write_inventory(tmp_path / "b.parquet", {"url": product, "lastmod": [when] * 40}))
    run(opts(inv_a, out, gc_grace_hours=None))
    keys_a = _shard_keys(out)
    run(opts(inv_b, out, run_time=T0 + timedelta(hours=1), gc_grace_hours=None,
             allow_shrink=True))
    # GC lists and decides: generation A's own shards are unreferenced and "old".
    decision = decide(out, default_state(out), keep=1, grace_hours=0, keep_days=0)
    assert keys_a - _shard_keys(out) <= set(decision.doomed) and decision.doomed
    # Meanwhile a run rolls the inventory back: the same content, the same digest keys.
    run(opts(inv_a, out, run_time=T0 + timedelta(hours=2), gc_grace_hours=None))
    assert _shard_keys(out) == keys_a
    collect(decision)
    report = status(out)
    assert report.missing_files == [] and report.ok, report
    read_output(out, max_urls=50)


def test_gc_grace_counts_from_retirement_not_upload(s3_bucket: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = s3_bucket.url("retire")
    real_now = datetime.now(UTC)
    run(opts(inventory(tmp_path, 100, "a.parquet"), out, gc_grace_hours=None))
    keys_a = _shard_keys(out)
    # Generation A's files were uploaded now; A stays live for 10 days, then B replaces it.
    monkeypatch.setattr(publish, "utcnow", lambda: real_now + timedelta(days=10))
    run(opts(inventory(tmp_path, 100, "b.parquet", 50), out, run_time=T0 + timedelta(hours=1),
             gc_grace_hours=None))
    only_a = keys_a - _shard_keys(out)
    assert only_a
    state = default_state(out)
    # An hour after the swap: a crawler holding A's index still finds every file.
    soon = gc(out, state, keep=1, grace_hours=48, keep_days=0,
              now=real_now + timedelta(days=10, hours=1))
    assert not only_a & set(soon.deleted), soon.deleted
    assert all(storage.open_storage(out).exists(k) for k in only_a)
    # Once the grace period has run from the retirement, they go.
    later = gc(out, state, keep=1, grace_hours=48, keep_days=0,
               now=real_now + timedelta(days=12, hours=1))
    assert only_a <= set(later.deleted)


# -- 3: missing live files ---------------------------------------------------------------------

def test_status_finds_missing_and_corrupt_files_and_a_run_uploads_them_again(
        s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = s3_bucket.url("missing")
    inv = inventory(tmp_path, 120)
    run(opts(inv, out))
    m = _manifest(out)
    gone, bad = m["sitemaps"][0], m["sitemaps"][1]
    s3_bucket.client.delete_object(Bucket=s3_bucket.name, Key=f"missing/{gone['key']}")
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=f"missing/{bad['key']}",
                                Body=b"x" * bad["gzip_bytes"])
    report = status(out)
    assert report.missing_files == [gone["key"]] and not report.ok
    assert main(["status", "--out", out]) == 1
    deep = status(out, deep=True)
    assert deep.corrupt_files == [bad["key"]]
    assert main(["status", "--out", out, "--deep"]) == 1
    # A run of the same inventory reuses every shard but the missing one, which it uploads.
    again = run(opts(inv, out, run_time=T0 + timedelta(hours=1)))
    assert again["counts"]["shards_written"] == 1
    assert status(out).ok
    # A file damaged in place (same size) takes a deep check to see, and --force to rewrite.
    assert status(out, deep=True).corrupt_files == [bad["key"]]
    run(opts(inv, out, run_time=T0 + timedelta(hours=2), force=True))
    assert status(out, deep=True).ok
    read_output(out, max_urls=50)


# -- 4, 5: a broken manifest or snapshot -------------------------------------------------------

@pytest.mark.parametrize("body", [b"", b'{"generation": "2026'])
def test_an_empty_or_broken_manifest_is_refused_and_repaired(
        s3_bucket: Any, tmp_path: Path, body: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    out = s3_bucket.url("broken")
    inv = inventory(tmp_path, 100)
    run(opts(inv, out))
    second = run(opts(inventory(tmp_path, 105, "b.parquet"), out,
                      run_time=T0 + timedelta(hours=1)))
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="broken/manifest.json", Body=body)
    with pytest.raises(LiveStateCorrupt, match="sitemaps repair --out"):
        run(opts(inv, out, run_time=T0 + timedelta(hours=2)))
    code = main(["-q", "run", "--inventory", inv, "--site-url", SITE, "--out", out])
    assert code == 2 and "sitemaps repair" in capsys.readouterr().err
    assert main(["-q", "status", "--out", out]) == 2
    assert main(["-q", "repair", "--out", out]) == 0
    assert status(out).live == second["generation"] and status(out).ok
    # History survives: the shrink guard still sees 105 live URLs.
    with pytest.raises(Exception, match="fewer"):
        run(opts(inventory(tmp_path, 50, "c.parquet"), out, run_time=T0 + timedelta(hours=3)))


def test_local_writes_fsync_the_file_before_and_the_folder_after_the_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync " + os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(a: Any, b: Any) -> None:
        events.append("replace")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    storage.open_storage(str(tmp_path)).write_bytes("manifest.json", b"{}")
    assert len(events) == 3, events
    assert re.fullmatch(rf"fsync {tmp_path}/\.tmp-.*", events[0]) and events[1] == "replace"
    assert events[2] == f"fsync {tmp_path}"


@pytest.mark.parametrize("damage", ["truncated", "rows_missing"])
def test_a_damaged_snapshot_fails_with_exit_2_and_repair_restores(
        s3_bucket: Any, tmp_path: Path, damage: str) -> None:
    out = s3_bucket.url("snap")
    inv = inventory(tmp_path, 100)
    first = run(opts(inv, out))
    run(opts(inventory(tmp_path, 103, "b.parquet"), out, run_time=T0 + timedelta(hours=1)))
    key = state_file(out, _manifest(out), "snapshot").removeprefix(f"s3://{s3_bucket.name}/")
    raw = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
    if damage == "truncated":
        body = raw[: len(raw) // 2]
    else:  # valid Parquet, rows missing: would silently give wrong lastmods
        local = tmp_path / "short.parquet"
        pq.write_table(pq.read_table(pa.BufferReader(raw)).slice(0, 40), local)
        body = local.read_bytes()
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=key, Body=body)
    with pytest.raises(LiveStateCorrupt, match="sitemaps repair") as exc:
        run(opts(inv, out, run_time=T0 + timedelta(hours=2)))
    assert exc.value.exit_code == 2
    if damage == "rows_missing":
        assert "rows 40 instead of 103" in str(exc.value)
    assert repair(out).live == first["generation"]
    assert run(opts(inv, out, run_time=T0 + timedelta(hours=3)))["counts"]["published"] == 100


# -- 6: a commit (or a lease) whose reply was lost ---------------------------------------------

@pytest.fixture
def lose_reply() -> Iterator[Any]:
    """`arm(name)`: the next conditional PUT of a key ending in `name` reaches the server,
    then its reply is "lost" (a retryable connection error), so botocore sends it again."""
    state: dict[str, Any] = {"name": None, "fired": 0}
    http = urllib3.PoolManager()

    def hook(request: Any, **_: Any) -> None:
        name = state["name"]
        headers = dict(request.headers)
        conditional = "If-Match" in headers or "If-None-Match" in headers
        if name and request.method == "PUT" and conditional and \
                request.url.split("?")[0].endswith("/" + name):
            state["name"] = None
            body = request.body.read() if hasattr(request.body, "read") else request.body
            if hasattr(request.body, "seek"):
                request.body.seek(0)
            resp = http.request("PUT", request.url, body=body, headers=headers)
            assert resp.status == 200, resp.data  # the write applied
            state["fired"] += 1
            raise ConnectionClosedError(endpoint_url=request.url)

    def arm(name: str) -> None:
        state["name"] = name

    arm.state = state  # type: ignore[attr-defined]
    storage.CLIENT_HOOKS.append(("before-send.s3.PutObject", hook))
    storage.s3._client.cache_clear()
    yield arm
    storage.CLIENT_HOOKS.remove(("before-send.s3.PutObject", hook))
    storage.s3._client.cache_clear()


@pytest.mark.parametrize("first", [True, False])
def test_a_commit_whose_reply_was_lost_is_a_commit(s3_bucket: Any, tmp_path: Path,
                                                   lose_reply: Any, first: bool) -> None:
    out = s3_bucket.url("lost")
    if not first:
        run(opts(inventory(tmp_path, 100, "a.parquet"), out))
    lose_reply("manifest.json")
    summary = run(opts(inventory(tmp_path, 100, "b.parquet", 20), out,
                       run_time=T0 + timedelta(hours=1)))
    assert lose_reply.state["fired"] == 1
    assert summary["published"] and status(out).live == summary["generation"]


def test_a_lease_whose_reply_was_lost_is_held(s3_bucket: Any, lose_reply: Any) -> None:
    out = s3_bucket.url("lostlease")
    lose_reply(lease.LEASE_KEY)
    lease.acquire(out, "run-a", 600)
    assert lose_reply.state["fired"] == 1
    with pytest.raises(PublishConflict, match="run-a holds the lease"):
        lease.acquire(out, "run-b", 600)


# -- 7: a run that lost its race ---------------------------------------------------------------

def test_a_loser_that_reused_a_shard_the_winner_dropped_exits_3(
        s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = s3_bucket.url("loser")
    base = inventory(tmp_path, 90, "base.parquet")
    run(opts(base, out))
    # The winner drops the product section; the loser keeps it (reusing its shards) and
    # adds blog posts.
    urls = [f"{SITE}{'product' if i % 3 else 'blog'}/{i:05d}?a=1&b='x'" for i in range(90)]
    blog = [u for u in urls if "/blog/" in u]
    winner_inv = str(write_inventory(tmp_path / "w.parquet", {"url": blog}))
    loser_inv = str(write_inventory(tmp_path / "l.parquet", {
        "url": urls + [f"{SITE}blog/new-{i}" for i in range(5)]}))
    ctxs = [steps.begin(opts(inv, out, run_time=T0 + timedelta(hours=h), allow_shrink=True))
            for h, inv in ((1, winner_inv), (2, loser_inv))]
    uris = []
    try:
        for ctx in ctxs:
            steps.load_step(ctx)
            steps.diff_step(ctx)
            steps.plan_step(ctx)
            uris.append(steps.render_step(ctx, None).uri)
        steps.publish_step(ctxs[0], [uris[0]])
        assert steps.live_keys(ctxs[1]) - _shard_keys(out)  # shards the loser reuses are gone
        with pytest.raises(PublishConflict, match="another generation was published") as exc:
            steps.publish_step(ctxs[1], [uris[1]])
        assert exc.value.exit_code == 3
    finally:
        for ctx in ctxs:
            steps.finish(ctx)


def test_no_bare_runtime_error_in_the_library() -> None:
    root = Path(__file__).resolve().parents[2] / "pipeline"
    found = [f"{p.name}:{n}" for p in root.glob("*.py")
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"raise RuntimeError\b", line)]
    assert found == []


# -- 8: a server that ignores conditional writes -----------------------------------------------

@pytest.fixture
def ignore_conditions() -> Iterator[None]:
    """The S3 server, as one that drops If-Match / If-None-Match (as some S3 clones do)."""
    def strip(params: dict[str, Any], **_: Any) -> None:
        params.pop("IfMatch", None)
        params.pop("IfNoneMatch", None)

    storage.CLIENT_HOOKS.append(("before-parameter-build.s3.PutObject", strip))
    storage.s3._client.cache_clear()
    yield
    storage.CLIENT_HOOKS.remove(("before-parameter-build.s3.PutObject", strip))
    storage.s3._client.cache_clear()


def test_a_server_that_ignores_conditional_writes_is_refused(
        s3_bucket: Any, tmp_path: Path, ignore_conditions: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = s3_bucket.url("nocond")
    inv = inventory(tmp_path, 60)
    code = main(["-q", "run", "--inventory", inv, "--site-url", SITE, "--out", out])
    assert code == 2 and "ignored a conditional write" in capsys.readouterr().err
    assert status(out).live is None
    assert main(["-q", "run", "--inventory", inv, "--site-url", SITE, "--out", out,
                 "--no-conditional-write-check"]) == 0


# -- 9: root files only move forward; the lease ------------------------------------------------

def test_a_stalled_run_does_not_roll_the_root_back(s3_bucket: Any, tmp_path: Path) -> None:
    out = s3_bucket.url("forward")
    run(opts(inventory(tmp_path, 100, "a.parquet"), out))
    old = _manifest(out)
    run(opts(inventory(tmp_path, 140, "b.parquet"), out, run_time=T0 + timedelta(hours=1)))
    store = storage.open_storage(out)
    root, robots = store.read_bytes("sitemap_index.xml"), store.read_bytes("robots-sitemaps.txt")
    # The stalled run resumes at its step 5 with its own, older manifest.
    assert publish.repair_root(store, old) == 0
    assert store.read_bytes("sitemap_index.xml") == root
    assert store.read_bytes("robots-sitemaps.txt") == robots
    assert status(out).ok


def test_a_lease_release_never_removes_a_lease_another_run_took(s3_bucket: Any) -> None:
    out = s3_bucket.url("lease")
    lease.acquire(out, "run-a", 600)
    store = storage.open_storage(out)
    state = {"armed": False, "done": False}

    def steal(request: Any, **_: Any) -> None:
        # Between run A's read of the lease and its write: A's lease expired, B takes it.
        if state["armed"]:
            state["armed"], state["done"] = False, True
            held = json.loads(store.read_bytes(lease.LEASE_KEY))
            store.write_bytes(lease.LEASE_KEY, json.dumps(
                {**held, "expires": datetime.now(UTC).isoformat()}).encode())
            lease.acquire(out, "run-b", 600)

    storage.CLIENT_HOOKS.append(("before-send.s3", steal))
    storage.s3._client.cache_clear()
    try:
        original = lease._read

        def read_then_arm(s: Any) -> Any:
            result = original(s)
            state["armed"] = not state["done"]
            return result

        lease._read = read_then_arm  # type: ignore[assignment]
        try:
            lease.release(out, "run-a")
        finally:
            lease._read = original  # type: ignore[assignment]
    finally:
        storage.CLIENT_HOOKS.remove(("before-send.s3", steal))
        storage.s3._client.cache_clear()
    assert state["done"]
    assert json.loads(store.read_bytes(lease.LEASE_KEY))["owner"] == "run-b"
    with pytest.raises(PublishConflict, match="run-b holds the lease"):
        lease.acquire(out, "run-c", 600)


def test_a_lease_is_renewed_by_its_owner_only(s3_bucket: Any) -> None:
    out = s3_bucket.url("renew")
    lease.acquire(out, "run-a", 600)
    store = storage.open_storage(out)
    before = json.loads(store.read_bytes(lease.LEASE_KEY))
    lease.renew(out, "run-a")
    after = json.loads(store.read_bytes(lease.LEASE_KEY))
    assert after["owner"] == "run-a" and after["expires"] >= before["expires"]
    store.write_bytes(lease.LEASE_KEY, json.dumps(
        {**after, "expires": datetime.now(UTC).isoformat()}).encode())
    lease.acquire(out, "run-b", 600)
    with pytest.raises(PublishConflict, match="held by run-b"):
        lease.renew(out, "run-a")


def test_a_renewal_racing_one_of_the_same_run_is_no_conflict(s3_bucket: Any) -> None:
    """Steps of one run renew at the same moment (mapped tasks; the state beside render): the
    write that loses the race still leaves the lease with its owner; another owner's lease,
    taken between the read and the write, is a conflict."""
    out = s3_bucket.url("renew-race")
    lease.acquire(out, "run-a", 600)
    store = storage.open_storage(out)
    original = lease._read

    def read_then(between: Any) -> Any:
        calls = {"n": 0}

        def read(out_store: Any) -> Any:
            found = original(out_store)
            calls["n"] += 1
            if calls["n"] == 1:  # after this renewal's read, before its write
                between()
            return found
        return read

    lease._read = read_then(lambda: lease.renew(out, "run-a"))  # type: ignore[assignment]
    try:
        lease.renew(out, "run-a")
    finally:
        lease._read = original  # type: ignore[assignment]
    assert json.loads(store.read_bytes(lease.LEASE_KEY))["owner"] == "run-a"

    def taken() -> None:
        held = json.loads(store.read_bytes(lease.LEASE_KEY))
        store.write_bytes(lease.LEASE_KEY, json.dumps(
            {**held, "expires": datetime.now(UTC).isoformat()}).encode())
        lease.acquire(out, "run-b", 600)

    lease._read = read_then(taken)  # type: ignore[assignment]
    try:
        with pytest.raises(PublishConflict, match="took the lease .* while this run renewed"):
            lease.renew(out, "run-a")
    finally:
        lease._read = original  # type: ignore[assignment]


# -- 14, 15: leftovers -------------------------------------------------------------------------

def test_gc_aborts_more_than_one_page_of_incomplete_uploads(s3_bucket: Any) -> None:
    out = s3_bucket.url("mp")
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="mp/manifest.json",
                                Body=b'{"generation": "g", "history": ["g"], "sitemaps": [], '
                                     b'"indexes": [], "counts": {}}')
    for i in range(7):
        s3_bucket.client.create_multipart_upload(Bucket=s3_bucket.name,
                                                 Key=f"mp/sitemaps/x{i}.xml.gz")
    store = storage.open_storage(out)
    assert isinstance(store, storage.S3Storage)
    assert store.abort_incomplete_uploads(datetime.now(UTC) + timedelta(minutes=1),
                                          page_size=3) == 7
    assert not s3_bucket.client.list_multipart_uploads(Bucket=s3_bucket.name).get("Uploads")


def test_gc_collects_temporary_files_and_dead_work_folders(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    run(opts(inventory(tmp_path, 60), str(out)))
    leftover = out / "sitemaps" / ".tmp-killed"
    leftover.write_bytes(b"half a shard")
    fresh = out / ".tmp-running"
    fresh.write_bytes(b"a write in progress")
    old = (datetime.now(UTC) - timedelta(hours=49)).timestamp()
    os.utime(leftover, (old, old))
    dry = gc(str(out), default_state(str(out)), dry_run=True)
    assert dry.deleted_temporaries == ["sitemaps/.tmp-killed"] and leftover.exists()
    gc(str(out), default_state(str(out)))
    assert not leftover.exists() and fresh.exists()
    # Work folders: a dead run's (its lock is free) goes once old; a live run's stays.
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    live, dead = make_work_folder(), make_work_folder()
    from pipeline.gc import release_work_folder

    release_work_folder(dead)
    for folder in (live, dead):
        os.utime(folder, (old, old))
    assert collect_work_folders(datetime.now(UTC) - timedelta(hours=48)) == 1
    assert Path(live).exists() and not Path(dead).exists()
    release_work_folder(live)


# -- 16: served files name nothing private -----------------------------------------------------

def test_the_served_manifest_names_no_private_state(s3_bucket: Any, tmp_path: Path) -> None:
    out = s3_bucket.url("private")
    inv = inventory(tmp_path, 80)
    run(opts(inv, out))
    run(opts(inventory(tmp_path, 85, "b.parquet"), out, run_time=T0 + timedelta(hours=1)))
    store = storage.open_storage(out)
    served = [k for k in (o.key for o in store.list(""))
              if k.endswith((".json", ".xml", ".txt", ".atom", ".html"))]
    assert "manifest.json" in served
    for key in served:
        body = store.read_bytes(key)
        assert b"private.state" not in body and b"s3://" not in body, key
    # The run still finds its snapshot (in the default state): the second run diffed
    # against it.
    assert _manifest(out)["counts"]["unchanged"] == 80


def test_a_broken_older_generation_manifest_is_reported_and_stops_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 (16): a kept generation's own manifest truncated. status says so (exit 1);
    later runs, gc, feed and report go on without it; gc deletes no shard while it is kept
    (which files it needs is unknown)."""
    out = str(tmp_path / "out")
    a = run(opts(inventory(tmp_path, 100, "a.parquet"), out))["generation"]
    a_shards = _shard_keys(out)
    run(opts(inventory(tmp_path, 100, "b.parquet", 50), out, run_time=T0 + timedelta(hours=1)))
    store = storage.open_storage(out)
    key = f"generations/{a}/manifest.json"
    store.write_bytes(key, store.read_bytes(key)[:40])
    assert main(["-q", "status", "--out", out, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["broken_generations"] == [a] and not report["ok"]
    assert a not in [g["generation"] for g in report["generations"]]
    inv = inventory(tmp_path, 100, "c.parquet", 80)
    assert main(["-q", "run", "--inventory", inv, "--site-url", SITE, "--out", out,
                 "--gc-grace-hours", "0"]) == 0
    assert a_shards <= _shard_keys_stored(store)  # a is kept: none of its shards went
    assert main(["-q", "gc", "--out", out, "--grace-hours", "0"]) == 0
    assert a_shards <= _shard_keys_stored(store)
    assert main(["-q", "feed", "--out", out]) == 0
    assert main(["-q", "report", "--out", out]) == 0
    capsys.readouterr()
    assert main(["-q", "report", "--out", out, "--generation", a]) == 2
    assert f"cannot report on generation {a}" in capsys.readouterr().err
    # Once it is no longer kept, gc collects as usual.
    gc(out, default_state(out), keep=1, grace_hours=0, keep_days=0)
    assert not store.exists(key) and status(out).ok


def _shard_keys_stored(store: storage.Storage) -> set[str]:
    return set(store.keys("sitemaps/"))
