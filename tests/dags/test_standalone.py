"""Smoke test: `airflow standalone` on a free port runs a site's DAG end to end, and shows
each run's report as a tab of the DAG run (headless Chromium: log in, open the run and the tab).
On the same stack, a second site's run fails for a real reason (its inventory is not there
yet); once the inventory is written, clearing the failed task through the REST API resumes
that run, which publishes what the CLI publishes for the same inventory and run time.

The same launcher as the local stack (infra/local/stack.py): health endpoint, token for the
generated admin password, the DAG listed by the REST API, unpaused, then triggered the way the
upstream inventory job triggers it in production (an event on the inventory asset), polled to
success; the manifest asset event carries the run's summary. Standalone is stopped by its
process group (SIGTERM, then SIGKILL) whatever happens.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import sys
import time
import types
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.demo import make_inventory
from pipeline.run import RunOptions, run
from tests.dags import report_tab
from tests.dags.airflow_env import ROOT, free_port, requires_airflow
from tests.output_check import read_output
from tests.s3_fixtures import S3Bucket

pytestmark = [*requires_airflow, pytest.mark.integration, pytest.mark.browser]
#: Task slots of the standalone (what `stack.sh up` gives a 2-core machine).
PARALLELISM = 2

DAG_ID = "sitemaps_smoke"
#: The site whose run fails (no inventory yet) and is resumed by clearing the failed task.
RESUME_DAG_ID = "sitemaps_resume"
LATE_INVENTORY = "inventory/late.parquet"
URLS = 2_000
RUN_TIMEOUT = 240


def _load_stack() -> types.ModuleType:
    name = "sitemaps_infra_local_stack"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "infra" / "local" / "stack.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


stack = _load_stack()


def _wait(what: str, timeout: float, probe: Any, interval: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def _task_logs(home: Path, lines: int = 30) -> str:
    logs = sorted((home / "logs").rglob("*.log"), key=lambda p: p.stat().st_mtime)[-3:]
    return "\n".join(f"--- {p}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-lines:])
                     for p in logs)


def _post_asset_event(airflow: Any, token: str, asset_id: int, extra: dict[str, Any],
                      attempts: int = 6) -> None:
    """POST an asset event as the upstream job does. airflow standalone keeps its metadata in
    SQLite, which answers a write during the scheduler's own with "database is locked": the
    API says HTTP 500 "Database error". Retried, unless the event was recorded after all (a
    second event would queue a second run)."""
    for attempt in range(attempts):
        try:
            airflow.call("POST", "/api/v2/assets/events",
                         {"asset_id": asset_id, "extra": extra}, token=token)
            return
        except stack.StackError as exc:
            if "HTTP 500" not in str(exc) or attempt == attempts - 1:
                raise
            print(f"asset event, try {attempt + 1}: {exc}")
            events = airflow.call("GET", f"/api/v2/assets/events?asset_id={asset_id}",
                                  token=token)["asset_events"]
            if any(all((e.get("extra") or {}).get(k) == v for k, v in extra.items())
                   for e in events):
                return  # it was recorded; only the answer failed
            time.sleep(2)


def test_standalone_runs_the_dag_on_an_inventory_asset_event(
        tmp_path: Path, airflow_db: Path, s3_bucket: S3Bucket) -> None:
    timings: dict[str, float] = {}
    inventory = make_inventory(tmp_path / "inventory.parquet", URLS)
    s3_bucket.client.upload_file(str(inventory), s3_bucket.name, "inventory/inv.parquet")
    sites = tmp_path / "sites.toml"
    sites.write_text(f"""
[sites.smoke]
site_url = "https://www.example.com/"
inventory = "{s3_bucket.url('inventory/inv.parquet')}"
out = "{s3_bucket.url('out/')}"
aws_conn_id = "{stack.CONN_ID}"

[sites.resume]
site_url = "https://www.example.com/"
inventory = "{s3_bucket.url(LATE_INVENTORY)}"
out = "{s3_bucket.url('resume/')}"
aws_conn_id = "{stack.CONN_ID}"
""")
    home = tmp_path / "airflow"
    home.mkdir()
    shutil.copyfile(airflow_db, home / "airflow.db")
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env = stack.airflow_env(home, port, sites_file=sites, base=base, s3_conn=(
        stack.connection_uri_env(s3_bucket.endpoint_url, s3_bucket.access_key,
                                 s3_bucket.secret_key)), parallelism=PARALLELISM)
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "PYTHONPATH": str(ROOT)})
    airflow = stack.AirflowStandalone(home, port, env)
    t0 = time.monotonic()
    try:
        airflow.start(timeout=180)
        timings["healthy"] = time.monotonic() - t0
        health = airflow.health()
        assert all(health[c]["status"] == "healthy" for c in stack.HEALTH_COMPONENTS), health
        # Capped to the machine: Airflow's default parallelism (32) made 41 processes here.
        assert airflow.pid is not None
        groups = stack.tree_groups(airflow.pid)
        processes = [pid for pid, (_, group, state) in stack._processes().items()
                     if group in groups and state != "Z"]
        assert len(processes) <= 12 + PARALLELISM, len(processes)

        assert airflow.admin_password(), "standalone wrote no admin password"
        token = airflow.token()

        def dag_listed() -> bool:
            dags = airflow.call("GET", "/api/v2/dags?dag_id_pattern=sitemaps", token=token)
            return DAG_ID in [d["dag_id"] for d in dags["dags"]]

        _wait("the DAG in /api/v2/dags", 120, dag_listed)
        timings["listed"] = time.monotonic() - t0
        # What `stack.sh up --trigger` does: unpause, and exactly one run (unpausing makes
        # the latest cron tick's run; another trigger would queue a second behind it).
        first_run = stack.trigger_demo(airflow, DAG_ID)
        # The other site's run starts now too: its load_groups fails, there is no inventory
        # yet.
        resume_run = stack.trigger_demo(airflow, RESUME_DAG_ID)

        # What the upstream inventory job does when it has written a new inventory.
        assets = airflow.call("GET", "/api/v2/assets?uri_pattern=inventory", token=token)
        (inventory_asset,) = [a for a in assets["assets"]
                              if a["uri"] == s3_bucket.url("inventory/inv.parquet")]
        _post_asset_event(airflow, token, inventory_asset["id"], {"rows": URLS})

        def runs_done() -> list[dict[str, Any]] | None:
            runs = airflow.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns", token=token)["dag_runs"]
            if any(r["state"] == "failed" for r in runs):
                raise AssertionError(f"a run failed: {runs}\n{_task_logs(home)}")
            asset_runs = [r for r in runs if r["run_type"] == "asset_triggered"]
            if asset_runs and all(r["state"] == "success" for r in runs):
                return runs
            return None

        runs = _wait("the asset-triggered run to succeed", RUN_TIMEOUT, runs_done, 3)
        timings["runs done"] = time.monotonic() - t0
        (asset_run,) = [r for r in runs if r["run_type"] == "asset_triggered"]
        assert asset_run["logical_date"] is None
        assert [r["dag_run_id"] for r in runs if r["run_type"] != "asset_triggered"] == [first_run]

        # The manifest asset's events carry the summary; the first run published.
        assets = airflow.call("GET", "/api/v2/assets?uri_pattern=manifest", token=token)
        (manifest_asset,) = [a for a in assets["assets"]
                             if a["uri"] == s3_bucket.url("out/manifest.json")]
        assert manifest_asset["name"] == f"{DAG_ID}_manifest"
        events = airflow.call("GET", f"/api/v2/assets/events?asset_id={manifest_asset['id']}",
                              token=token)["asset_events"]
        # One event: the run that published; the other found its generation live, and a
        # run that changes nothing announces nothing.
        assert len(events) == 1 and events[0]["source_run_id"] in {r["dag_run_id"] for r in runs}
        extras = [e["extra"] for e in events]
        assert all(x["published"] for x in extras)
        manifest = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key="out/manifest.json")
        live = json.loads(manifest["Body"].read())
        # Stamped with when its run started, not the scheduled run's logical date (the
        # last cron tick, hours ago): the age `status` reports starts at the run.
        started = min(datetime.fromisoformat(r["start_date"].replace("Z", "+00:00"))
                      for r in runs).replace(microsecond=0)
        created = datetime.fromisoformat(live["created"].replace("Z", "+00:00"))
        assert started <= created <= datetime.now(UTC), (live["created"], runs)
        for x in extras:
            assert x["generation"] == live["generation"]
            assert x["counts"]["published"] == live["counts"]["published"] > URLS * 0.9
            assert x["root_indexes"] == [i["url"] for i in live["indexes"]]

        # The run report as the DAG run's "Sitemaps report" tab (plugins/sitemaps_report.py,
        # issue 16): a person logs in, opens the run that published and its tab, and sees
        # that generation's report and numbers, read from the private state prefix through
        # the site's connection (nothing of the report is served).
        listed = s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name, Prefix="out")  # + .state
        assert [o["Key"] for o in listed["Contents"] if o["Key"].endswith(".html")] == [
            f"out.state/generations/{live['generation']}/report.html"]
        url = f"http://127.0.0.1:{port}/sitemaps-report/{DAG_ID}/{events[0]['source_run_id']}"
        assert report_tab.fetch(url, "not-a-token")[0] in (401, 403)  # internal
        code, page = report_tab.fetch(url, token)
        assert code == 200 and live["generation"] in page, page[:500]
        _explain_route(f"http://127.0.0.1:{port}/sitemaps-report/{DAG_ID}", token, page,
                       s3_bucket, live)
        text, shot = report_tab.open_report_tab(f"http://127.0.0.1:{port}",
                                                airflow.admin_password(), DAG_ID,
                                                events[0]["source_run_id"], tmp_path)
        timings["report tab"] = time.monotonic() - t0
        print(f"report tab screenshot: {shot}")
        c = live["counts"]
        assert f"generation {live['generation']}, published by this run" in text, text[:800]
        for label, value in (("input rows", c["input_rows"]), ("published URLs", c["published"]),
                             ("rejected rows", c["rejected_rows"])):
            assert re.search(rf"{label}\s+{value:,}\b", text), (label, value, text[:1500])
        assert "Freshness by section" in text and "Trend over the kept generations" in text
        assert "Why is this URL (not) in the sitemaps?" in text  # the search box, shown
        assert shot.stat().st_size > 30_000  # the page with its charts, not a blank one

        _resume_by_clearing_the_failed_task(airflow, token, resume_run, s3_bucket, tmp_path,
                                            home)
        timings["resumed"] = time.monotonic() - t0
    finally:
        t = time.monotonic()
        airflow.stop(timeout=20)
        timings["stop"] = time.monotonic() - t
        print("standalone timings (s):", {k: round(v, 1) for k, v in timings.items()})
    assert airflow.pid is None


def _explain_route(base: str, token: str, report_page: str, s3_bucket: S3Bucket,
                   live: dict[str, Any]) -> None:
    """The report tab's search box and the route it asks (plugins/sitemaps_report.py): why
    a URL is (not) in the live sitemaps, as `sitemaps explain` says, for a user who may read
    the DAG's runs; hostile input escaped, bad input HTTP 400."""
    form = re.search(r"<body[^>]*>\s*(<form [^>]*>)", report_page)
    assert form and 'action="explain"' in form.group(1) and 'method="get"' in form.group(1), \
        report_page[:1000]
    assert 'name="url"' in report_page

    def explain(url: str, fmt: str = "", auth: str = token) -> tuple[int, str]:
        query = urllib.parse.urlencode({"url": url, **({"format": fmt} if fmt else {})})
        return report_tab.fetch(f"{base}/explain?{query}", auth)

    output = read_output(s3_bucket.url("out/"))
    key, locs = next(iter(output.files.items()))
    (sitemap,) = [s for s in live["sitemaps"] if s["key"] == key]
    code, page = explain(locs[0])
    assert code == 200, page[:1000]
    assert "<strong>Published</strong> in generation " + live["generation"] in page, page[:2000]
    assert f'href="{html.escape(sitemap["url"])}"' in page, (sitemap, page[:3000])
    assert any(f'href="{html.escape(i["url"])}"' in page for i in live["indexes"])
    code, body = explain(locs[0], "json")
    assert code == 200, body[:1000]
    answer = json.loads(body)
    assert answer["published"] and answer["listing"]["sitemap_url"] == sitemap["url"], answer

    code, page = explain("https://www.example.com/not-in-the-inventory/1")
    assert code == 200 and "<strong>Not published</strong>" in page \
        and "not in the inventory" in page, page[:2000]
    code, page = explain("https://www.example.com/<script>alert(1)</script>")
    assert code == 200 and "<script>" not in page, page[:2000]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, page[:2000]
    assert "%3Cscript%3Ealert(1)%3C/script%3E" in page  # the URL as load would spell it

    for bad in ("", "   ", "http://[", "https://elsewhere.example.org/<b>", "x" * 9000):
        code, page = explain(bad)
        assert code == 400 and "<b>" not in page, (bad[:40], code, page[:1000])
    assert "the url parameter is empty" in explain("")[1]
    code, body = explain("", "json")
    assert code == 400 and json.loads(body)["detail"].startswith("Give a URL"), body

    assert explain(locs[0], auth="not-a-token")[0] in (401, 403)  # as the report: internal
    prefix = base.rsplit("/", 1)[0]
    code, page = report_tab.fetch(f"{prefix}/sitemaps_nope/explain?url=x", token)
    assert code in (403, 404), (code, page[:500])
    # The other site has published nothing yet (its inventory is written later).
    code, page = report_tab.fetch(f"{prefix}/{RESUME_DAG_ID}/explain?url=https://www.example.com/a",
                                  token)
    assert code == 404 and "No live generation yet" in page, (code, page[:500])


def _run_of(airflow: Any, token: str, dag_id: str, run_id: str) -> dict[str, Any]:
    return dict(airflow.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}", token=token))


def _tries(airflow: Any, token: str, dag_id: str, run_id: str) -> dict[str, tuple[str, int]]:
    """task_id -> (state, try_number) of the run's unmapped task instances (the mapped
    ones: of their first map index)."""
    tis = airflow.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances"
                              "?limit=100", token=token)["task_instances"]
    return {ti["task_id"]: (ti["state"], ti["try_number"])
            for ti in sorted(tis, key=lambda t: -t["map_index"])}


def _resume_by_clearing_the_failed_task(airflow: Any, token: str, run_id: str,
                                        s3_bucket: S3Bucket, tmp_path: Path, home: Path) -> None:
    """The run failed at load_groups, on its first try (an inventory that matches no object
    is an error to fix, not to retry); its work files are kept. Write the inventory, clear
    load_groups and what follows it (as the UI's Clear does, downstream included): the same run goes
    on from begin's context (its run time and generation), and publishes."""
    def finished() -> dict[str, Any] | None:
        r = _run_of(airflow, token, RESUME_DAG_ID, run_id)
        return r if r["state"] in ("success", "failed") else None

    failed = _wait("the resume site's run to fail", RUN_TIMEOUT, finished, 3)
    tries = _tries(airflow, token, RESUME_DAG_ID, run_id)
    assert failed["state"] == "failed", (failed, tries)
    assert tries["begin"] == ("success", 1) and tries["load_groups"] == ("failed", 1), tries
    assert tries["publish"][0] == tries["finish"][0] == "upstream_failed", tries
    def keys(prefix: str) -> list[str]:
        listed = s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name, Prefix=prefix)
        return [o["Key"] for o in listed.get("Contents", [])]

    # Nothing published; begin's work files kept for the resumed run (live_keys.json).
    assert keys("resume/") == []
    assert any(k.endswith("/live_keys.json") for k in keys("resume.state/runs/"))

    inventory = make_inventory(tmp_path / "late.parquet", URLS)
    s3_bucket.client.upload_file(str(inventory), s3_bucket.name, LATE_INVENTORY)
    body = {"dry_run": False, "dag_run_id": run_id, "task_ids": ["load_groups"],
            "include_downstream": True, "only_failed": False}
    for attempt in range(6):  # SQLite may answer "database is locked" (HTTP 500)
        try:
            cleared = airflow.call("POST", f"/api/v2/dags/{RESUME_DAG_ID}/clearTaskInstances",
                                   body, token=token)["task_instances"]
            break
        except stack.StackError as exc:
            if "HTTP 500" not in str(exc) or attempt == 5:
                raise
            if _tries(airflow, token, RESUME_DAG_ID, run_id)["load_groups"][0] != "failed":
                cleared = None  # it was cleared; only the answer failed
                break
            time.sleep(2)
    if cleared is not None:
        assert "begin" not in {ti["task_id"] for ti in cleared}
        assert {"load_groups", "normalize", "load", "diff", "plan", "render", "publish",
                "finish"} <= {
            ti["task_id"] for ti in cleared}

    resumed = _wait("the cleared run to finish", RUN_TIMEOUT, finished, 3)
    tries = _tries(airflow, token, RESUME_DAG_ID, run_id)
    assert resumed["state"] == "success", (resumed, tries, _task_logs(home))
    assert tries["begin"] == ("success", 1), tries  # not run again: its context goes on
    assert tries["load_groups"] == ("success", 2), tries
    assert tries["publish"][0] == tries["finish"][0] == "success", tries

    # Stamped with the run time begin chose when the run first started, not the cleared
    # run's new start; and exactly what the CLI publishes for that inventory and time.
    live = read_output(s3_bucket.url("resume/")).manifest
    first_start = datetime.fromisoformat(failed["start_date"].replace("Z", "+00:00"))
    assert live["created"] == first_start.strftime("%Y-%m-%dT%H:%M:%SZ"), (live["created"],
                                                                              failed)
    assert resumed["start_date"] != failed["start_date"]
    run(RunOptions(inventory=s3_bucket.url(LATE_INVENTORY), site_url="https://www.example.com/",
                   out=s3_bucket.url("cli-resume/"),
                   run_time=datetime.fromisoformat(live["created"].replace("Z", "+00:00"))))
    cli = read_output(s3_bucket.url("cli-resume/")).manifest

    def files(m: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((s["key"], s["urls"], s["sha256"], s["lastmod"]) for s in m["sitemaps"])

    assert files(live) == files(cli) and live["counts"] == cli["counts"]
    # The resumed run's finish removed its work files.
    assert keys("resume.state/runs/") == []
