"""Benchmark: one DAG run through the distributed local stack, with 1 and with 2 Celery workers.

For each worker count, starts ``infra/local/cluster.py``'s cluster (PostgreSQL, Redis,
SeaweedFS, the Airflow api-server, scheduler, dag-processor, triggerer and N Celery workers
with one task slot each), uploads a demo inventory of ``--urls`` rows to its S3, unpauses
the site's DAG (which makes the run of the last nightly tick), waits for the run and records,
from the REST API: the run's wall time (start to end), each task instance's duration and
worker, and the `io` of its XCom return value (rows and files read, bytes read and written:
pipeline.taskio; None for a task that returns no such dict) with the value's other numbers
(`counts`: render's urls and bytes, load's rows, ...), the render tasks' busy time per
worker, and the published counts and bytes (from the run's asset summary, the manifest).
Then stops the cluster. The JSON also has the inventory's rows (`inventory_rows`, from its
Parquet footer); `bench/project.py` projects one run's task times to a larger inventory.

    .venv/bin/python bench/celery.py --urls 10000000 --workers 1 2 --json r.json

A benchmark, never a timed test: nothing here asserts a speed. The machine's 2 cores are
shared by every part of the cluster: with 2 workers the render tasks run side by side on
those same 2 cores, so the figure shows the division of work, not a second machine's cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SITE = "https://www.example.com/"
BUCKET = "bench"
DAG_ID = "sitemaps_bench"


def _load_cluster() -> Any:
    spec = importlib.util.spec_from_file_location("sitemaps_infra_local_cluster",
                                                  ROOT / "infra/local/cluster.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def sites_toml(batch_bytes: int | None, diff_partitions: int | None = None,
               plan_slice_rows: int | None = None) -> str:
    batch = f"render_batch_bytes = {batch_bytes}\n" if batch_bytes else ""
    if diff_partitions:
        batch += f"diff_partitions = {diff_partitions}\n"
    if plan_slice_rows:
        batch += f"plan_slice_rows = {plan_slice_rows}\n"
    return f"""
[sites.bench]
site_url = "{SITE}"
public_url = "{SITE}"
inventory = "s3://{BUCKET}/inventory/inventory.parquet"
out = "s3://{BUCKET}/out/"
aws_conn_id = "sitemaps_s3"
{batch}"""


def _seconds(ti: dict[str, Any]) -> float | None:
    if not ti.get("start_date") or not ti.get("end_date"):
        return None
    start = datetime.fromisoformat(ti["start_date"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(ti["end_date"].replace("Z", "+00:00"))
    return (end - start).total_seconds()


def one_run(mod: Any, root: Path, inventory: Path, workers: int, batch_bytes: int | None,
            timeout: float, diff_partitions: int | None = None,
            plan_slice_rows: int | None = None) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    sites = root / "sites.toml"
    sites.write_text(sites_toml(batch_bytes, diff_partitions, plan_slice_rows))
    cluster = mod.Cluster(root / "cluster", sites_file=sites, workers=workers, concurrency=1,
                          extra_env={"PYTHONPATH": str(ROOT)})
    t = time.monotonic()
    cluster.start(timeout=600)
    startup = time.monotonic() - t
    try:
        cluster.s3.create_bucket(BUCKET)
        cluster.s3.client().upload_file(str(inventory), BUCKET, "inventory/inventory.parquet")
        token = mod.stack.unpause_dag(cluster.api, DAG_ID, timeout=300)
        run_id = mod.stack.first_run_id(cluster.api, DAG_ID, token, timeout=300)
        deadline = time.monotonic() + timeout
        while True:
            token = cluster.token()  # tokens expire; a long run outlives one
            dag_run = cluster.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}",
                                   token=token)
            if dag_run["state"] in ("success", "failed"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{DAG_ID} {run_id} still {dag_run['state']}")
            time.sleep(5)
        tis = cluster.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances"
                                  "?limit=1000", token=token)["task_instances"]
        tasks = sorted(({"task": ti["task_id"], "map_index": ti["map_index"],
                         "state": ti["state"], "worker": ti["hostname"],
                         "try": ti["try_number"], "seconds": _seconds(ti),
                         "start": ti["start_date"]} for ti in tis),
                       key=lambda r: (r["start"] or "", r["map_index"]))
        for row in tasks:  # what each task read and wrote, for bench/project.py's scaling
            result = (_task_result(cluster, token, run_id, row) if row["state"] == "success"
                      else {})
            io = result.get("io")
            row["io"] = io if isinstance(io, dict) else None
            # its counts (render: urls, bytes of <url> lines; load: input and valid rows)
            row["counts"] = {k: v for k, v in result.items()
                             if isinstance(v, int | float) and not isinstance(v, bool)}
        summary: dict[str, Any] = {}
        try:  # the publish task's asset event carries the run's summary
            events = cluster.call("GET", "/api/v2/assets/events?limit=10&order_by=-timestamp",
                                  token=token).get("asset_events", [])
            summary = (events[0].get("extra") or {}) if events else {}
        except Exception as exc:  # a figure missing from the report, not a failed benchmark
            print(f"# no asset event summary: {exc}", file=sys.stderr)
    finally:
        cluster.stop(timeout=30)
    renders = [t for t in tasks if t["task"] == "render"]
    per_worker: dict[str, float] = {}
    for r in renders:
        per_worker[r["worker"]] = per_worker.get(r["worker"], 0.0) + (r["seconds"] or 0.0)
    return {
        "workers": workers, "state": dag_run["state"], "startup_seconds": round(startup, 1),
        "run_seconds": _seconds(dag_run), "tasks": tasks,
        "render_tasks": len(renders), "render_seconds_by_worker": per_worker,
        "render_span_seconds": _span(renders), "summary": summary,
        # the site's task-count options (None: the DAG's default), for bench/project.py
        "options": {"render_batch_bytes": batch_bytes, "diff_partitions": diff_partitions,
                    "plan_slice_rows": plan_slice_rows},
    }


def _task_result(cluster: Any, token: str, run_id: str, t: dict[str, Any]) -> dict[str, Any]:
    """The task instance's XCom return value when it is a dict (a step's result, whose `io`
    is pipeline.taskio.TaskIO as a dict), else {} (the lists of partitions and slices,
    finish's None)."""
    path = (f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{t['task']}"
            f"/xcomEntries/return_value?map_index={t['map_index']}")
    try:
        value = cluster.call("GET", path, token=token)["value"]
    except Exception:  # no return value (HTTP 404): nothing to record
        return {}
    if isinstance(value, str):  # the raw stored value: JSON text
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _span(tis: list[dict[str, Any]]) -> float | None:
    """Wall time from the first task's start to the last one's end (mapped render, diff)."""
    done = [t for t in tis if t["seconds"] is not None]
    if not done:
        return None
    starts = [datetime.fromisoformat(t["start"].replace("Z", "+00:00")).timestamp() for t in done]
    ends = [s + float(t["seconds"]) for s, t in zip(starts, done, strict=True)]
    return round(max(ends) - min(starts), 1)


def markdown(results: list[dict[str, Any]]) -> str:
    stages = ("begin", "load", "diff_partitions", "diff", "diff_counts", "plan_slices", "plan",
              "plan_counts", "publish", "gc", "notify", "finish")
    head = ["workers", "run", *stages, "render span", "render tasks (s per worker)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in results:
        by_task = {t["task"]: t["seconds"] for t in r["tasks"]
                   if t["task"] not in ("render", "diff", "plan")}
        # diff and plan are mapped (hash partitions, slices): their span, first start to last end
        for mapped in ("diff", "plan"):
            by_task[mapped] = _span([t for t in r["tasks"] if t["task"] == mapped])
        spread = ", ".join(f"{w}: {s:.0f}" for w, s in sorted(r["render_seconds_by_worker"].items()))
        cells = [str(r["workers"]), f"{r['run_seconds']:.0f} s",
                 *(f"{by_task[s]:.0f} s" if by_task.get(s) is not None else "-" for s in stages),
                 f"{r['render_span_seconds']} s", f"{r['render_tasks']} ({spread})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--urls", type=int, default=10_000_000, help="demo inventory rows")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                   help="worker counts to run, one cluster each (default: 1 2)")
    p.add_argument("--render-batch-bytes", type=int, default=None,
                   help="the site's render_batch_bytes (default: the DAG's, 256 MiB)")
    p.add_argument("--diff-partitions", type=int, default=None,
                   help="the site's diff_partitions (default: automatic, 1 below 50M rows)")
    p.add_argument("--plan-slice-rows", type=int, default=None,
                   help="the site's plan_slice_rows: URLs per mapped plan task (default 4M)")
    p.add_argument("--out-dir", type=Path, default=None,
                   help="where the clusters keep their data (default: a temp dir, removed)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait for a run")
    p.add_argument("--json", type=Path, help="write all results as JSON to this file")
    args = p.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    import pyarrow.parquet as pq

    from pipeline.demo import make_inventory

    mod = _load_cluster()
    with tempfile.TemporaryDirectory(prefix="sitemaps-celery-bench-") as tmp:
        base = args.out_dir or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        inventory = make_inventory(base / "inventory.parquet", args.urls, site=SITE)
        print(f"# inventory: {args.urls:,} rows in {time.monotonic() - t:.0f} s", file=sys.stderr)
        inventory_rows = pq.ParquetFile(inventory).metadata.num_rows  # as written, not as asked
        results = []
        for n in args.workers:
            print(f"# {n} worker(s) ...", file=sys.stderr)
            r = one_run(mod, base / f"workers-{n}", inventory, n, args.render_batch_bytes,
                        args.timeout, args.diff_partitions, args.plan_slice_rows)
            r["urls"] = args.urls
            r["inventory_rows"] = inventory_rows
            print(f"# {n} worker(s): {r['state']} in {r['run_seconds']:.0f} s", file=sys.stderr)
            results.append(r)
    print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0 if all(r["state"] == "success" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
