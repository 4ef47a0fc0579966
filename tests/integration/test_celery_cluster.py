"""The DAGs on the CeleryExecutor: the distributed local stack (infra/local/cluster.py).

PostgreSQL, Redis, the Airflow api-server, scheduler, dag-processor, triggerer and two Celery
workers with distinct hostnames, against the test session's SeaweedFS. Unpausing a site's DAG
makes its scheduled run (the last 03:00 tick); mapped render must run on both workers and
publish what the CLI publishes for the same inventory and run time. Then a worker is killed
(SIGKILL of its process group) while it renders: the scheduler sees the heartbeat stop, the
try fails, the retry runs on the other worker and the run publishes a whole generation.

A render of this size takes about a second, too short to kill reliably from outside: the
workers load ``render_hold/sitecustomize.py``, which holds the killed site's renders in the
middle of their first shard while a ``hold`` file exists, so the kill always lands mid-render.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import Limits
from pipeline.demo import make_inventory
from pipeline.run import RunOptions, run
from tests.dags.airflow_env import ROOT, requires_airflow
from tests.output_check import read_output

pytestmark = [*requires_airflow, pytest.mark.integration]

SITE = "https://www.example.com/"
PUBLIC = "https://www.example.com/sitemaps/"
BUCKET = "celery-cluster"
URLS = 20_000
MAX_URLS = 500
#: 40 shards of about 45 kB of <url> lines: about 8 render batches, spread over two workers.
RENDER_BATCH_BYTES = 250_000
RUN_TIMEOUT = 420
HOLD_MODULE_DIR = Path(__file__).resolve().parent / "render_hold"


def _load_cluster() -> Any:
    name = "sitemaps_infra_local_cluster"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "infra/local/cluster.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def site_block(name: str, out: str) -> str:
    return f"""
[sites.{name}]
site_url = "{SITE}"
public_url = "{PUBLIC}"
inventory = "s3://{BUCKET}/inventory/inv.parquet"
out = "s3://{BUCKET}/{out}"
aws_conn_id = "sitemaps_s3"
render_batch_bytes = {RENDER_BATCH_BYTES}

[sites.{name}.limits]
max_urls_per_sitemap = {MAX_URLS}
"""


@pytest.fixture(scope="module")
def cluster(seaweedfs: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("cluster")
    seaweedfs.create_bucket(BUCKET)
    inventory = make_inventory(root / "inventory.parquet", URLS, site=SITE)
    seaweedfs.client().upload_file(str(inventory), BUCKET, "inventory/inv.parquet")
    sites = root / "sites.toml"
    sites.write_text(site_block("spread", "spread/") + site_block("killed", "killed/"))
    hold_dir = root / "hold"
    hold_dir.mkdir()
    mod = _load_cluster()
    c = mod.Cluster(root, sites_file=sites, workers=2, concurrency=1, heartbeat_timeout=20,
                    s3=seaweedfs, extra_env={
                        "PYTHONPATH": os.pathsep.join([str(HOLD_MODULE_DIR), str(ROOT)]),
                        "SITEMAPS_TEST_HOLD_DIR": str(hold_dir),
                        "SITEMAPS_TEST_HOLD_OUT": f"s3://{BUCKET}/killed/"})
    c.hold_dir = hold_dir
    t = time.monotonic()
    c.start(timeout=360)
    print(f"cluster up in {time.monotonic() - t:.0f} s")
    try:
        yield c
    finally:
        c.stop(timeout=20)
        assert not any(p.alive() for p in c.parts.values())


def _unpause_and_get_run(c: Any, token: str, dag_id: str) -> str:
    """Unpausing makes the run of the last cron tick; its id."""
    stack = _load_cluster().stack  # the launchers' helpers (REST calls)
    stack.unpause_dag(c.api, dag_id, timeout=180)
    return str(stack.first_run_id(c.api, dag_id, token, timeout=180))


def _wait_run(c: Any, token: str, dag_id: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_TIMEOUT
    while True:
        r = c.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}", token=token)
        if r["state"] in ("success", "failed"):
            return dict(r)
        assert time.monotonic() < deadline, f"{dag_id} {run_id} still {r['state']}"
        time.sleep(3)


def _task_instances(c: Any, token: str, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    return list(c.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100",
                       token=token)["task_instances"])


def _s3_env(seaweedfs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in seaweedfs.env().items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")


def test_mapped_render_runs_on_both_workers_and_publishes_what_the_cli_does(
        cluster: Any, seaweedfs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token = cluster.token()
    run_id = _unpause_and_get_run(cluster, token, "sitemaps_spread")
    t = time.monotonic()
    dag_run = _wait_run(cluster, token, "sitemaps_spread", run_id)
    print(f"celery run: {time.monotonic() - t:.0f} s")
    tis = _task_instances(cluster, token, "sitemaps_spread", run_id)
    assert dag_run["state"] == "success", tis
    renders = [ti for ti in tis if ti["task_id"] == "render"]
    assert len(renders) >= 4, renders
    assert all(ti["state"] == "success" for ti in tis if ti["task_id"] != "render"
               or ti["map_index"] >= 0), tis
    hosts = {ti["hostname"] for ti in renders}
    assert hosts == {"worker-1", "worker-2"}, [(ti["map_index"], ti["hostname"]) for ti in renders]

    _s3_env(seaweedfs, monkeypatch)
    _assert_same_as_cli(dag_run, "spread/", "cli/")


def test_a_worker_killed_mid_render_is_retried_on_the_other_one(
        cluster: Any, seaweedfs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token = cluster.token()
    hold = cluster.hold_dir / "hold"
    hold.touch()  # renders of the killed site stop mid-shard until it is removed
    try:
        run_id = _unpause_and_get_run(cluster, token, "sitemaps_killed")
        deadline = time.monotonic() + RUN_TIMEOUT
        while not (started := sorted(cluster.hold_dir.glob("started-*"))):
            assert time.monotonic() < deadline, "no render of the killed site started"
            time.sleep(0.5)
        held = json.loads(started[0].read_text())
        killed = held["worker"]
        running = [ti for ti in _task_instances(cluster, token, "sitemaps_killed", run_id)
                   if ti["task_id"] == "render" and ti["state"] == "running"
                   and ti["hostname"] == killed]
        assert len(running) == 1, running  # one task slot per worker
        victim = running[0]
        cluster.kill_worker(killed)
        print(f"killed {killed} while it wrote {held['key']} in render[{victim['map_index']}]")
    finally:
        hold.unlink()

    dag_run = _wait_run(cluster, token, "sitemaps_killed", run_id)
    tries = cluster.call(
        "GET", f"/api/v2/dags/sitemaps_killed/dagRuns/{run_id}/taskInstances/render/"
               f"{victim['map_index']}/tries", token=token)["task_instances"]
    summary = [(t["try_number"], t["state"], t["hostname"]) for t in tries]
    print("tries of the killed task:", summary)
    assert dag_run["state"] == "success", summary
    assert tries[0]["hostname"] == killed and tries[0]["state"] != "success", summary
    assert tries[-1]["state"] == "success" and tries[-1]["try_number"] >= 2, summary
    survivor = ({"worker-1", "worker-2"} - {killed}).pop()
    assert tries[-1]["hostname"] == survivor, summary
    # Exactly what the CLI publishes for the same inventory and run time: every file, URL
    # and lastmod, and the counts.
    _s3_env(seaweedfs, monkeypatch)
    _assert_same_as_cli(dag_run, "killed/", "cli-killed/")


def _assert_same_as_cli(dag_run: dict[str, Any], dag_out: str, cli_out: str) -> None:
    """The DAG run's output equals a CLI run's on the same inventory, at its start time (not
    the scheduled run's logical date, a cron tick hours earlier)."""
    run_time = datetime.fromisoformat(dag_run["start_date"].replace("Z", "+00:00"))
    run(RunOptions(inventory=f"s3://{BUCKET}/inventory/inv.parquet", site_url=SITE,
                   out=f"s3://{BUCKET}/{cli_out}", public_url=PUBLIC,
                   limits=Limits(max_urls=MAX_URLS), run_time=run_time))
    dag = read_output(f"s3://{BUCKET}/{dag_out}", max_urls=MAX_URLS)
    cli = read_output(f"s3://{BUCKET}/{cli_out}", max_urls=MAX_URLS)

    def files(m: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((s["key"], s["urls"], s["sha256"], s["lastmod"]) for s in m["sitemaps"])

    # The run time the DAG stamped (begin's, from the run's start) is the CLI's.
    assert dag.manifest["created"] == cli.manifest["created"], run_time
    assert dag.manifest["counts"] == cli.manifest["counts"]
    differ = sorted((u, lm, cli.lastmods.get(u)) for u, lm in dag.lastmods.items()
                    if cli.lastmods.get(u) != lm)
    assert not differ and dag.lastmods == cli.lastmods, (len(differ), differ[:5], run_time)
    assert files(dag.manifest) == files(cli.manifest), _file_differences(dag, cli, dag_out,
                                                                         cli_out)
    assert len(dag.manifest["sitemaps"]) >= URLS // MAX_URLS


def _file_differences(dag: Any, cli: Any, dag_out: str, cli_out: str) -> str:
    """What differs between the files of the two outputs: which entries, and whether their
    URLs or their uncompressed bytes differ (a diagnosis, printed when they do)."""
    import gzip

    from pipeline import storage

    d = {s["key"]: s for s in dag.manifest["sitemaps"]}
    c = {s["key"]: s for s in cli.manifest["sitemaps"]}
    lines = []
    for key in sorted(set(d) ^ set(c) | {k for k in set(d) & set(c) if d[k] != c[k]}):
        lines.append(f"{key}: dag {d.get(key)}, cli {c.get(key)}")
    by_locs = {tuple(v): k for k, v in cli.files.items()}
    for key, locs in dag.files.items():
        other = by_locs.get(tuple(locs))
        if other is None:
            lines.append(f"{key}: no CLI file has its URLs")
            continue
        if other != key or d[key]["sha256"] != c[other]["sha256"]:
            a = gzip.decompress(storage.open_storage(f"s3://{BUCKET}/{dag_out}").read_bytes(key))
            b = gzip.decompress(storage.open_storage(f"s3://{BUCKET}/{cli_out}").read_bytes(other))
            diff = [(x, y) for x, y in zip(a.split(b"\n"), b.split(b"\n"), strict=False)
                    if x != y]
            lines.append(f"{key} vs {other}: same URLs, uncompressed bytes "
                         f"{'equal' if a == b else f'differ: {diff[:3]}'}")
    return "\n".join(lines)
