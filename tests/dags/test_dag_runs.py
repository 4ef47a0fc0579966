"""`airflow dags test` of a site's DAG against the real S3 server (SeaweedFS).

The DAG run publishes exactly what the CLI path (`pipeline.run.run`) publishes for the same
inventory and run time; a terminal error fails the run on its first try, publishing nothing.
S3 is reached through the Airflow connection only: the Airflow processes get no AWS_* variable.
"""

from __future__ import annotations

import io
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import Limits
from pipeline.demo import make_inventory
from pipeline.errors import ShrinkRefused
from pipeline.run import RunOptions, run
from pipeline.status import status
from tests.dags.airflow_env import (
    CONN_ID,
    AirflowEnv,
    connection_env,
    new_home,
    requires_airflow,
    tail,
)
from tests.output_check import read_output
from tests.s3_fixtures import S3Bucket

pytestmark = [*requires_airflow, pytest.mark.integration]

SITE = "https://www.example.com/"
PUBLIC = "https://www.example.com/sitemaps/"
RUN_TIME = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
URLS = 3_000
MAX_URLS = 500
#: The demo inventory's 3,000 URLs come out as about 21 shards, 270 kB of <url> lines:
#: this makes about 4 render batches, so render maps over several tasks.
RENDER_BATCH_BYTES = 80_000
#: The DAG of the parity test diffs in this many hash partitions (mapped diff tasks).
DIFF_PARTITIONS = 3
#: ... and plans in slices of this many URLs: the largest section (about 670 URLs) is
#: cut in two, the smaller ones share slices, so plan maps over several tasks and a
#: later slice's new shards are renumbered when the slices are combined.
PLAN_SLICE_ROWS = 400


def site_block(name: str, bucket: S3Bucket, inventory_key: str, out: str,
               extra: str = "") -> str:
    return f"""
[sites.{name}]
site_url = "{SITE}"
public_url = "{PUBLIC}"
inventory = "{bucket.url(inventory_key)}"
out = "{bucket.url(out)}"
aws_conn_id = "{CONN_ID}"
render_batch_bytes = {RENDER_BATCH_BYTES}
{extra}
[sites.{name}.limits]
max_urls_per_sitemap = {MAX_URLS}
"""


def airflow_for(tmp_path: Path, airflow_db: Path, bucket: S3Bucket, sites: str) -> AirflowEnv:
    conn = connection_env(bucket.endpoint_url, bucket.access_key, bucket.secret_key)
    return new_home(tmp_path, airflow_db, sites,
                    {f"AIRFLOW_CONN_{CONN_ID.upper()}": conn})


def dags_test(env: AirflowEnv, dag_id: str, *conf: str) -> tuple[int, str, float]:
    # No `dags reserialize` first: `dags test` (DAG.test) syncs the DAG's bundle to the
    # metadata DB itself before it creates the run.
    t = time.monotonic()
    proc = env.run("dags", "test", dag_id, RUN_TIME.isoformat(), *conf, timeout=400,
                   check=False)
    return proc.returncode, proc.stdout, time.monotonic() - t


def keys(bucket: S3Bucket, prefix: str) -> list[str]:
    pages = bucket.client.get_paginator("list_objects_v2").paginate(Bucket=bucket.name,
                                                                    Prefix=prefix)
    return sorted(o["Key"] for p in pages for o in p.get("Contents", []))


def test_dag_run_publishes_what_the_cli_publishes(
        tmp_path: Path, airflow_db: Path, s3_bucket: S3Bucket) -> None:
    inventory = make_inventory(tmp_path / "inventory.parquet", URLS, site=SITE)
    s3_bucket.client.upload_file(str(inventory), s3_bucket.name, "inventory/inv.parquet")
    # The DAG diffs in 3 hash partitions (3 mapped diff tasks), the CLI in 1: partitioning
    # must not change what is published. Both plan in the same small slices: the DAG maps
    # plan over them, the CLI plans them one after the other.
    env = airflow_for(tmp_path, airflow_db, s3_bucket,
                      site_block("parity", s3_bucket, "inventory/inv.parquet", "dag/",
                                 f"diff_partitions = {DIFF_PARTITIONS}\n"
                                 f"plan_slice_rows = {PLAN_SLICE_ROWS}"))

    rc, out, seconds = dags_test(env, "sitemaps_parity")
    print(f"airflow dags test: {seconds:.1f} s")
    assert rc == 0, tail(out)
    assert env.run_states("sitemaps_parity") == ["success"]
    states = env.task_states("sitemaps_parity")
    renders = [k for k in states if k[0] == "render"]
    assert len(renders) >= 3, states  # mapped over several batches
    diffs = sorted(k for k in states if k[0] == "diff")
    assert diffs == [("diff", i) for i in range(DIFF_PARTITIONS)], states
    assert states[("diff_counts", -1)] == ("success", 1)
    plans = sorted(k for k in states if k[0] == "plan")
    assert len(plans) >= 3 and plans == [("plan", i) for i in range(len(plans))], states
    assert states[("plan_slices", -1)] == states[("plan_counts", -1)] == ("success", 1)
    assert all(s == ("success", 1) for s in states.values()), states

    # The CLI path, same inventory and run time, another prefix, same public URL, one
    # diff partition (the default at this size), the same plan slices one after the other.
    summary = run(RunOptions(inventory=s3_bucket.url("inventory/inv.parquet"), site_url=SITE,
                             out=s3_bucket.url("cli/"), public_url=PUBLIC,
                             limits=Limits(max_urls=MAX_URLS), run_time=RUN_TIME,
                             plan_slice_rows=PLAN_SLICE_ROWS))
    dag_out = read_output(s3_bucket.url("dag/"), max_urls=MAX_URLS)
    cli_out = read_output(s3_bucket.url("cli/"), max_urls=MAX_URLS)
    dm, cm = dag_out.manifest, cli_out.manifest

    def files(m: dict) -> list[tuple]:
        return sorted((s["key"], s["url"], s["urls"], s["sha256"], s["lastmod"])
                      for s in m["sitemaps"])

    assert files(dm) == files(cm)
    assert len(dm["sitemaps"]) == summary["counts"]["sitemaps"] >= URLS // MAX_URLS
    assert dm["counts"] == cm["counts"]
    assert dag_out.lastmods == cli_out.lastmods
    assert [i["key"] for i in dm["indexes"]] == [i["key"] for i in cm["indexes"]]
    for index in dm["indexes"]:  # the root index files, byte for byte
        dag_index = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=f"dag/{index['key']}")
        cli_index = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=f"cli/{index['key']}")
        assert dag_index["Body"].read() == cli_index["Body"].read()
    assert dm["created"] == cm["created"] == "2026-12-01T03:00:00Z"

    # The generation's changes (one file in the state, from the DAG's 3 partitions): the
    # same rows as the CLI's.
    def changes(m: dict, out: str) -> list[tuple]:  # the state is the default <out>.state
        key = f"{out}.state/generations/{m['generation']}/changes.parquet"
        body = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
        return sorted((r["url"], r["change"], r["lastmod"])
                      for r in pq.read_table(io.BytesIO(body)).to_pylist())

    assert changes(dm, "dag") == changes(cm, "cli") and len(changes(dm, "dag")) == dm["counts"]["added"]

    # The work files are gone; the manifest asset event carries the run's summary.
    assert keys(s3_bucket, "dag.state/runs/") == []
    (extra,) = [json.loads(e) for (e,) in env.query(
        "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.uri = ?",
        s3_bucket.url("dag/manifest.json"))]
    assert extra["generation"] == dm["generation"] and extra["published"] is True
    assert extra["counts"]["published"] == dm["counts"]["published"]

    # The same inventory again: the generation stays live, and announce emits no event
    # (the asset's consumers run only for a new generation).
    rc, out, _ = dags_test(env, "sitemaps_parity")
    assert rc == 0, tail(out)
    states = env.task_states("sitemaps_parity")
    assert states[("announce", -1)][0] == "skipped"
    # Nothing to render: render mapped over zero batches (skipped, never tried), and
    # publish, gc and finish still run and succeed.
    assert {k: v for k, v in states.items() if k[0] == "render"} == {
        ("render", -1): ("skipped", 0)}, states
    for task_id in ("publish", "notify", "gc", "finish"):
        assert states[(task_id, -1)] == ("success", 1), states
    # The inventory's rows and the options are the live generation's (pipeline.unchanged):
    # begin says so, load reads nothing and the work tasks are mapped over nothing.
    assert states[("load", -1)] == ("success", 1), states
    for task_id in ("normalize", "dedupe", "diff", "diff_counts", "plan_slices", "plan",
                    "plan_counts"):
        assert states[(task_id, -1)][0] == "skipped", (task_id, states)
    assert env.query("SELECT count(*) FROM asset_event") == [(1,)]
    assert read_output(s3_bucket.url("dag/"), max_urls=MAX_URLS).manifest["generation"] == \
        dm["generation"]

    # Five rows of one section get a new lastmod: the DAG's mapped tasks leave the other
    # sections out of the diff and the plan and keep their live shards (pipeline.unchanged),
    # as the CLI does, and both publish the same files again.
    table = pq.read_table(inventory)
    urls, lastmods = table.column("url").to_pylist(), table.column("lastmod").to_pylist()
    section = f"{SITE}{urls[0].removeprefix(SITE).split('/')[0]}/"
    touched = [i for i, u in enumerate(urls) if u.startswith(section)][:5]
    for i in touched:
        lastmods[i] = RUN_TIME - timedelta(hours=1)
    changed = tmp_path / "inventory-changed.parquet"
    pq.write_table(table.set_column(
        table.schema.get_field_index("lastmod"), "lastmod",
        pa.array(lastmods, table.schema.field("lastmod").type)), changed)
    s3_bucket.client.upload_file(str(changed), s3_bucket.name, "inventory/inv.parquet")
    rc, out, _ = dags_test(env, "sitemaps_parity")
    assert rc == 0, tail(out)
    assert "load: 19 of 20 section(s) unchanged since the live generation" in out, tail(out)
    again = run(RunOptions(inventory=s3_bucket.url("inventory/inv.parquet"), site_url=SITE,
                           out=s3_bucket.url("cli/"), public_url=PUBLIC,
                           limits=Limits(max_urls=MAX_URLS), run_time=RUN_TIME,
                           plan_slice_rows=PLAN_SLICE_ROWS))
    dm2 = read_output(s3_bucket.url("dag/"), max_urls=MAX_URLS).manifest
    cm2 = read_output(s3_bucket.url("cli/"), max_urls=MAX_URLS).manifest
    assert dm2["generation"] != dm["generation"] and again["published"]
    assert files(dm2) == files(cm2) and dm2["counts"] == cm2["counts"]
    assert dm2["counts"]["changed"] == len(touched) == 5
    assert 0 < dm2["counts"]["shards_written"] < dm2["counts"]["shards_reused"]

    # A manual run with the param `rollback_to` (issue 16): after a newer generation, the
    # DAG makes the one before it live again (`sitemaps rollback`) and skips every other task.
    bigger = make_inventory(tmp_path / "inventory2.parquet", URLS + 200, site=SITE)
    s3_bucket.client.upload_file(str(bigger), s3_bucket.name, "inventory/inv2.parquet")
    newer = run(RunOptions(inventory=s3_bucket.url("inventory/inv2.parquet"), site_url=SITE,
                           out=s3_bucket.url("dag/"), public_url=PUBLIC,
                           limits=Limits(max_urls=MAX_URLS),
                           run_time=RUN_TIME + timedelta(hours=1),
                           plan_slice_rows=PLAN_SLICE_ROWS))
    assert newer["published"]
    rc, out, _ = dags_test(env, "sitemaps_parity", "--conf", '{"rollback_to": "previous"}')
    assert rc == 0, tail(out)
    states = env.task_states("sitemaps_parity")
    assert states[("rollback", -1)] == ("success", 1), states
    assert {s for (t, _), (s, _) in states.items() if t != "rollback"} == {"skipped"}, states
    live = read_output(s3_bucket.url("dag/"), max_urls=MAX_URLS).manifest
    assert live["generation"] == dm2["generation"]
    assert live["rollback"]["from"] == newer["generation"]
    assert env.query("SELECT count(*) FROM asset_event") == [(2,)]


def test_terminal_error_fails_at_once_and_publishes_nothing(
        tmp_path: Path, airflow_db: Path, s3_bucket: S3Bucket) -> None:
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"url": pa.array([1, 2, 3], pa.int64())}), bad)
    s3_bucket.client.upload_file(str(bad), s3_bucket.name, "inventory/bad.parquet")
    env = airflow_for(tmp_path, airflow_db, s3_bucket,
                      site_block("broken", s3_bucket, "inventory/bad.parquet", "out/"))

    rc, out, seconds = dags_test(env, "sitemaps_broken")
    print(f"airflow dags test: {seconds:.1f} s")
    assert rc != 0
    assert env.run_states("sitemaps_broken") == ["failed"]
    states = env.task_states("sitemaps_broken")
    assert states[("begin", -1)] == ("success", 1)
    # the schema is checked from the files' footers, before any group is normalised
    assert states[("load_groups", -1)] == ("failed", 1), states  # first try, no retry
    assert "up_for_retry" not in out
    for task_id in ("normalize", "dedupe_parts", "dedupe", "load", "diff_partitions", "diff",
                    "diff_counts", "plan_slices", "plan", "plan_counts", "publish", "finish"):
        assert states[(task_id, -1)][0] == "upstream_failed", states
    # The reason, as the task log's last error line.
    reason = "the inventory's `url` column is BIGINT; it must be a string"
    assert f"AirflowFailException: {reason}" in out
    # Nothing published (the run's work folder, kept for a retry, is below the state).
    assert keys(s3_bucket, "out/") == []


def test_too_many_rejects_fail_at_once_and_keep_the_rejects_below_the_state(
        tmp_path: Path, airflow_db: Path, s3_bucket: S3Bucket) -> None:
    """The reject guard in a DAG: load fails on its first try, the rejects it refused are
    kept below the site's state (refused/<id>/rejects.parquet, named in the task's error),
    and nothing is published."""
    urls = [f"{SITE}p/{i}" for i in range(90)] + [f"ftp://x.example.com/{i}" for i in range(10)]
    bad = tmp_path / "rejects.parquet"
    pq.write_table(pa.table({"url": urls}), bad)
    s3_bucket.client.upload_file(str(bad), s3_bucket.name, "inventory/rejects.parquet")
    env = airflow_for(tmp_path, airflow_db, s3_bucket,
                      site_block("refused", s3_bucket, "inventory/rejects.parquet", "out/"))

    rc, out, _ = dags_test(env, "sitemaps_refused")
    assert rc != 0
    states = env.task_states("sitemaps_refused")
    assert states[("load", -1)] == ("failed", 1), states  # first try, no retry
    assert "up_for_retry" not in out
    assert keys(s3_bucket, "out/") == []
    (kept,) = [k for k in keys(s3_bucket, "out.state/") if not k.startswith("out.state/runs/")]
    assert kept.startswith("out.state/refused/") and kept.endswith("/rejects.parquet"), kept
    assert f"the rejected rows are in {s3_bucket.url(kept)};" in out, tail(out)
    assert "load: rejected as not_http: 10 row(s), e.g. " in out, tail(out)
    body = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=kept)["Body"].read()
    assert pq.read_table(io.BytesIO(body)).column("reason").to_pylist() == ["not_http"] * 10


def test_dry_run_plans_and_publishes_nothing(
        tmp_path: Path, airflow_db: Path, s3_bucket: S3Bucket) -> None:
    inventory = make_inventory(tmp_path / "inventory.parquet", 1_000, site=SITE)
    s3_bucket.client.upload_file(str(inventory), s3_bucket.name, "inventory/inv.parquet")
    env = airflow_for(tmp_path, airflow_db, s3_bucket,
                      site_block("dry", s3_bucket, "inventory/inv.parquet", "out/"))

    rc, out, seconds = dags_test(env, "sitemaps_dry", "--conf", '{"dry_run": true}')
    print(f"airflow dags test: {seconds:.1f} s")
    assert rc == 0, tail(out)
    states = env.task_states("sitemaps_dry")
    for task_id in ("begin", "load_groups", "load", "diff_partitions", "diff_counts",
                    "plan_slices", "plan_counts", "finish"):
        assert states[(task_id, -1)] == ("success", 1), states
    assert states[("normalize", 0)] == ("success", 1), states  # one group of files
    assert states[("dedupe", 0)] == ("success", 1), states  # one part of the duplicates
    assert states[("diff", 0)] == ("success", 1), states  # one partition: one mapped diff
    assert states[("plan", 0)] == ("success", 1), states  # one slice: one mapped plan
    for task_id in ("render", "publish", "announce", "gc"):
        assert states[(task_id, -1)][0] == "skipped", states
    assert "dry run: would publish" in out and "nothing rendered or published" in out
    assert keys(s3_bucket, "out/") == []  # no sitemap, no manifest, and the work files removed
    assert env.query("SELECT count(*) FROM asset_event") == [(0,)]


def test_params_force_and_allow_shrink(
        tmp_path: Path, airflow_db: Path, s3_bucket: S3Bucket) -> None:
    """The manual-run params reach the run: `force` rewrites every shard file, so it repairs
    a shard damaged in place that an ordinary run reuses; `allow_shrink` publishes a
    generation that the shrink guard refuses without it (exit 4 in the CLI)."""
    inventory = make_inventory(tmp_path / "inventory.parquet", URLS, site=SITE)
    s3_bucket.client.upload_file(str(inventory), s3_bucket.name, "inventory/inv.parquet")
    env = airflow_for(tmp_path, airflow_db, s3_bucket,
                      site_block("params", s3_bucket, "inventory/inv.parquet", "out/"))
    out = s3_bucket.url("out/")

    def cli_run(inventory_key: str) -> dict:  # the CLI with the site's settings
        return run(RunOptions(inventory=s3_bucket.url(inventory_key), site_url=SITE, out=out,
                              public_url=PUBLIC, limits=Limits(max_urls=MAX_URLS),
                              run_time=RUN_TIME - timedelta(days=1)))

    # The live generation, published the day before; then one of its shards is damaged in
    # place, its size unchanged: only `status --deep` (the sha256) sees it, and a run
    # reuses it, since its key says its content is unchanged.
    first = cli_run("inventory/inv.parquet")
    assert first["published"]
    first_manifest = read_output(out, max_urls=MAX_URLS).manifest
    damaged = first_manifest["sitemaps"][len(first_manifest["sitemaps"]) // 2]
    key = f"out/{damaged['key']}"
    body = bytearray(s3_bucket.client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0xFF
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=key, Body=bytes(body))
    assert status(out, deep=True).corrupt_files == [damaged["key"]]
    shard_keys = [s["key"] for s in first_manifest["sitemaps"]]
    before = {k: s3_bucket.client.head_object(Bucket=s3_bucket.name, Key=f"out/{k}")[
        "LastModified"] for k in shard_keys}

    time.sleep(1.1)  # S3's LastModified has whole seconds
    rc, log, _ = dags_test(env, "sitemaps_params", "--conf", '{"force": true}')
    assert rc == 0, tail(log)
    states = env.task_states("sitemaps_params")
    renders = {k: v for k, v in states.items() if k[0] == "render"}
    assert len(renders) >= 3 and set(renders.values()) == {("success", 1)}, states
    # Every shard file written again (the damaged one with its right bytes); nothing else
    # changed, so the generation stays live: a forced run is a full rewrite, not a new
    # generation.
    for k in shard_keys:
        head = s3_bucket.client.head_object(Bucket=s3_bucket.name, Key=f"out/{k}")
        assert head["LastModified"] > before[k], k
    check = status(out, deep=True)
    assert check.ok and check.corrupt_files == [], check
    assert check.live == first["generation"]

    # A smaller inventory (its first 60% of rows): 40% fewer URLs is refused by the shrink
    # guard, the live generation stays ...
    smaller = make_inventory(tmp_path / "smaller.parquet", URLS * 6 // 10, site=SITE)
    s3_bucket.client.upload_file(str(smaller), s3_bucket.name, "inventory/inv.parquet")
    with pytest.raises(ShrinkRefused):
        cli_run("inventory/inv.parquet")
    assert status(out).live == first["generation"]
    # ... and published by a DAG run with the param `allow_shrink`.
    rc, log, _ = dags_test(env, "sitemaps_params", "--conf", '{"allow_shrink": true}')
    assert rc == 0, tail(log)
    assert env.task_states("sitemaps_params")[("publish", -1)] == ("success", 1)
    live = read_output(out, max_urls=MAX_URLS).manifest
    assert live["previous"] == first["generation"] != live["generation"]
    assert live["counts"]["input_rows"] == URLS * 6 // 10
    assert live["counts"]["published"] < first["counts"]["published"] * 0.9


def test_dag_run_reads_a_delta_table_on_s3(
        tmp_path: Path, airflow_db: Path, s3_bucket: S3Bucket) -> None:
    """A Delta table on S3 as a site's inventory: the DAG publishes what the CLI publishes
    from it, and a run of the same table version after the DAG's is unchanged."""
    from deltalake import write_deltalake

    from pipeline.tables import _delta_storage_options

    table = pq.read_table(make_inventory(tmp_path / "inventory.parquet", URLS, site=SITE))
    location = s3_bucket.url("tables/urls")
    write_deltalake(location, table, storage_options={
        **_delta_storage_options(location), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"})
    block = site_block("delta", s3_bucket, "unused", "out/").replace(
        f'inventory = "{s3_bucket.url("unused")}"', f'inventory = "delta+{location}"')
    env = airflow_for(tmp_path, airflow_db, s3_bucket, block)

    rc, out, _ = dags_test(env, "sitemaps_delta")
    assert rc == 0, tail(out)
    published = read_output(s3_bucket.url("out/"), max_urls=MAX_URLS)
    cli = run(RunOptions(inventory=f"delta+{location}", site_url=SITE, out=s3_bucket.url("cli/"),
                         public_url=PUBLIC, limits=Limits(max_urls=MAX_URLS), run_time=RUN_TIME))
    assert sorted(published.locs) == sorted(read_output(s3_bucket.url("cli/"),
                                                        max_urls=MAX_URLS).locs)
    assert published.manifest["counts"]["published"] == cli["counts"]["published"] > 0
    assert run(RunOptions(inventory=f"delta+{location}", site_url=SITE, out=s3_bucket.url("out/"),
                          public_url=PUBLIC, limits=Limits(max_urls=MAX_URLS),
                          run_time=RUN_TIME + timedelta(days=1)))["unchanged"]
