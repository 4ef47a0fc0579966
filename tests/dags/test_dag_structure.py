"""The DAG file parses, and makes one DAG per site with the expected shape (real Airflow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dags.airflow_env import DAGS_FOLDER, ROOT, new_home, requires_airflow, tail

pytestmark = requires_airflow

TASKS = ["rollback", "begin", "load_groups", "normalize", "dedupe_parts", "dedupe", "load",
         "diff_partitions", "diff", "diff_counts", "plan_slices", "plan_splits", "plan_split",
         "plan", "plan_counts", "render", "state", "publish", "announce", "gc", "notify",
         "finish"]

TWO_SITES = """
[defaults]
aws_conn_id = "sitemaps_s3"

[sites.www]
site_url = "https://www.example.com/"
inventory = "s3://inventory/www/"
out = "s3://sitemaps/www/"
schedule = "30 2 * * *"

[sites.shop]
site_url = "https://shop.example.com/"
public_url = "https://shop.example.com/sitemaps/"
inventory = "s3://inventory/shop/*.parquet"
inventory_asset = "s3://inventory/shop/"
out = "s3://sitemaps/shop/"
aws_conn_id = ""
verify_url = "https://shop.example.com/"

[sites.shop.alerts]
email = ["seo-oncall@example.com"]
slack_webhook_conn_id = "slack_seo"
"""

# Runs in one subprocess with a throwaway AIRFLOW_HOME: for each site config file, describes
# what a DagBag of dags/ holds (one interpreter for all: importing Airflow takes seconds).
DESCRIBE = r"""
import json, os, sys
from airflow.dag_processing.dagbag import DagBag

def describe(dag_folder):
  bag = DagBag(dag_folder=dag_folder)
  out = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {}}
  for dag_id, dag in bag.dags.items():
    tt = dag.timetable
    out["dags"][dag_id] = {
        "schedule": type(tt).__name__,
        "timetable": type(getattr(tt, "timetable", None)).__name__,
        "cron": getattr(getattr(tt, "timetable", None), "expression", None),
        "timezone": str(getattr(getattr(tt, "timetable", None), "timezone", None)),
        "assets": sorted(a.uri for a in getattr(tt, "asset_condition").objects),
        "catchup": dag.catchup, "max_active_runs": dag.max_active_runs,
        "max_active_tasks": dag.max_active_tasks,
        "doc_md": dag.doc_md or "", "params": sorted(dag.params),
        "tags": sorted(dag.tags),
        "tasks": {t.task_id: {
            "retries": t.retries, "retry_delay": t.retry_delay.total_seconds(),
            "backoff": t.retry_exponential_backoff,
            "trigger_rule": getattr(t.trigger_rule, "value", t.trigger_rule),
            "doc_md": t.doc_md or "", "mapped": bool(getattr(t, "is_mapped", False)),
            "outlets": [[a.name, a.uri] for a in t.outlets],
            "on_failure_callback": [repr(c) for c in t.on_failure_callback or []],
            "on_retry_callback": [repr(c) for c in t.on_retry_callback or []],
            "upstream": sorted(t.upstream_task_ids)} for t in dag.tasks},
    }
  return out

result = {}
for name, path in json.loads(sys.argv[2]).items():
    os.environ["SITEMAPS_SITES_FILE"] = path
    result[name] = describe(sys.argv[1])
print("DESCRIBE:" + json.dumps(result))
"""

CONFIGS = {
    "two_sites": TWO_SITES,
    "demo": (ROOT / "infra" / "local" / "sites.toml").read_text(),
    "bad_key": TWO_SITES.replace('schedule = "30 2', 'shedule = "30 2'),
    "bad_cron_range": TWO_SITES.replace("30 2 * * *", "61 * * * *"),
    "bad_cron_words": TWO_SITES.replace("30 2 * * *", "every night"),
}


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory, airflow_db: Path) -> dict[str, dict]:
    """What the DagBag holds for each of CONFIGS."""
    tmp = tmp_path_factory.mktemp("dagbag")
    env = new_home(tmp, airflow_db, "")
    files = {}
    for name, text in CONFIGS.items():
        files[name] = str(tmp / f"{name}.toml")
        Path(files[name]).write_text(text)
    proc = subprocess.run([sys.executable, "-c", DESCRIBE, str(DAGS_FOLDER), json.dumps(files)],
                          # a deployment of 40 task slots (the DAG's max_active_tasks)
                          env={**env.env(), "AIRFLOW__CORE__PARALLELISM": "40"},
                          cwd=env.home, capture_output=True, text=True, timeout=180)
    line = [x for x in proc.stdout.splitlines() if x.startswith("DESCRIBE:")]
    assert proc.returncode == 0 and line, tail(proc.stdout + proc.stderr)
    return dict(json.loads(line[0].removeprefix("DESCRIBE:")))


def test_one_dag_per_site_with_the_expected_shape(bags: dict[str, dict]) -> None:
    bag = bags["two_sites"]
    assert bag["import_errors"] == {}
    assert sorted(bag["dags"]) == ["sitemaps_shop", "sitemaps_www"]

    www, shop = bag["dags"]["sitemaps_www"], bag["dags"]["sitemaps_shop"]
    assert (www["schedule"], www["timetable"]) == ("AssetOrTimeSchedule", "CronTriggerTimetable")
    assert (www["cron"], www["timezone"]) == ("30 2 * * *", "UTC")
    assert shop["cron"] == "0 3 * * *"  # the default
    assert www["assets"] == ["s3://inventory/www"]  # Airflow drops the trailing slash
    assert shop["assets"] == ["s3://inventory/shop"]  # inventory_asset, not the glob
    for d in (www, shop):
        assert d["catchup"] is False and d["max_active_runs"] == 1
        # as many tasks at once as the deployment runs, not Airflow's 16 a DAG
        assert d["max_active_tasks"] == 40
        assert "Sitemaps for" in d["doc_md"] and "When a run fails" in d["doc_md"]
        assert d["params"] == ["allow_shrink", "dry_run", "force", "rollback_to"]
        # verify only for a site with a verify_url (shop): the served copy, after publish
        assert sorted(d["tasks"]) == sorted(TASKS + (["verify"] if d is shop else []))
        for task_id, t in d["tasks"].items():
            assert t["retries"] == 3, task_id
            assert t["retry_delay"] == 30 and t["backoff"] == 2.0, task_id
            assert "*If it fails*" in t["doc_md"] or "Runs only when" in t["doc_md"], task_id
        t = d["tasks"]
        assert t["render"]["mapped"] and not t["publish"]["mapped"]
        # The state (the snapshot) needs only the plan: one task beside render's.
        assert not t["state"]["mapped"]
        # normalize is mapped over groups of inventory files; load adds them up, and runs
        # when normalize is mapped over none (an unchanged run).
        assert t["normalize"]["mapped"] and not t["load_groups"]["mapped"]
        assert not t["load"]["mapped"] and t["load"]["trigger_rule"] == "none_failed"
        # dedupe is mapped over parts of the duplicate search, after every normalize task
        assert t["dedupe"]["mapped"] and not t["dedupe_parts"]["mapped"]
        assert t["dedupe_parts"]["trigger_rule"] == "none_failed"
        # diff is mapped over hash partitions of the URLs; diff_counts adds them up.
        assert t["diff"]["mapped"] and not t["diff_counts"]["mapped"]
        # plan is mapped over the plan's slices; plan_counts gathers and numbers them.
        assert t["plan"]["mapped"] and not t["plan_slices"]["mapped"]
        # plan_split, mapped over units of the diffed rows, writes them by slice first.
        assert t["plan_split"]["mapped"] and not t["plan_splits"]["mapped"]
        assert not t["plan_counts"]["mapped"]
        # publish runs when render was mapped over zero batches (skipped); finish never
        # runs after a failure, so a failed run keeps the work files a retry needs.
        assert t["publish"]["trigger_rule"] == "none_failed"
        assert t["finish"]["trigger_rule"] == "none_failed"
        assert t["gc"]["trigger_rule"] == "all_success"
        # A rollback run stops at the short circuit before begin: nothing else runs.
        assert t["begin"]["upstream"] == ["rollback"] and t["rollback"]["upstream"] == []
        assert t["load_groups"]["upstream"] == ["begin"]
        assert t["normalize"]["upstream"] == ["begin", "load_groups"]
        assert t["dedupe_parts"]["upstream"] == ["begin", "normalize"]
        assert t["dedupe"]["upstream"] == ["begin", "dedupe_parts"]
        assert t["load"]["upstream"] == ["begin", "dedupe"]
        assert t["diff_partitions"]["upstream"] == ["begin", "load"]
        assert t["diff"]["upstream"] == ["begin", "diff_partitions"]
        assert t["diff_counts"]["upstream"] == ["begin", "diff"]
        assert t["plan_slices"]["upstream"] == ["begin", "diff_counts"]
        assert t["plan_splits"]["upstream"] == ["begin", "plan_slices"]
        assert t["plan_split"]["upstream"] == ["begin", "plan_splits"]
        assert t["plan"]["upstream"] == ["begin", "plan_slices", "plan_split"]
        assert t["plan_counts"]["upstream"] == ["begin", "plan"]
        assert t["render"]["upstream"] == ["begin", "plan_counts"]
        assert t["state"]["upstream"] == ["begin", "plan_counts"]
        assert t["publish"]["upstream"] == ["begin", "render", "state"]
        assert t["finish"]["upstream"] == ["begin", "publish"]
        # Only announce emits the manifest asset event (it skips a run that changed nothing).
        assert t["announce"]["upstream"] == ["publish"]
        assert [k for k, v in t.items() if v["outlets"]] == ["announce"]
    # Alerts: every task of a site with them has one failure callback per channel, and no
    # retry callback; a site without them has no callback at all.
    for task_id, t in shop["tasks"].items():
        assert t["on_failure_callback"] == ["EmailAlert('shop')", "SlackAlert('shop')"], task_id
        assert t["on_retry_callback"] == [], task_id
    for task_id, t in www["tasks"].items():
        assert t["on_failure_callback"] == t["on_retry_callback"] == [], task_id
    assert "alerts seo-oncall@example.com, Slack (slack_seo) of: failed, refused, " \
        "served_copy_wrong." in shop["doc_md"]
    assert "No one is alerted" in www["doc_md"]
    assert shop["tasks"]["verify"]["upstream"] == ["publish"]
    assert "sitemaps verify --site-url https://shop.example.com/" in shop["tasks"]["verify"][
        "doc_md"]
    assert www["tasks"]["announce"]["outlets"] == [
        ["sitemaps_www_manifest", "s3://sitemaps/www/manifest.json"]]


def test_the_demo_site_config_parses(bags: dict[str, dict]) -> None:
    bag = bags["demo"]
    assert bag["import_errors"] == {}
    assert list(bag["dags"]) == ["sitemaps_demo"]
    assert bag["dags"]["sitemaps_demo"]["tags"] == ["demo", "sitemaps"]


def test_a_bad_site_config_is_an_import_error_that_says_what_to_fix(
        bags: dict[str, dict]) -> None:
    bag = bags["bad_key"]
    assert bag["dags"] == {}
    (error,) = bag["import_errors"].values()
    assert "[sites.www]: unknown keys ['shedule']" in error


@pytest.mark.parametrize("config, cron", [("bad_cron_range", "61 * * * *"),
                                          ("bad_cron_words", "every night")])
def test_a_bad_cron_is_an_import_error(bags: dict[str, dict], config: str, cron: str) -> None:
    bag = bags[config]
    assert bag["dags"] == {}
    (error,) = bag["import_errors"].values()
    assert f"site 'www': schedule '{cron}' is not a valid cron expression" in error


# Every PipelineError class through the DAG's `step()`, in a subprocess with Airflow.
STEP_ERRORS = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import sitemaps_dag, sitemaps_sites
from airflow.sdk.exceptions import AirflowFailException
from pipeline import errors

def subclasses(cls):
    return [cls] + [s for c in cls.__subclasses__() for s in subclasses(c)]

(site,) = [s for s in sitemaps_sites.load_sites() if s.name == "shop"]
result = {}
for cls in subclasses(errors.TerminalError) + subclasses(errors.TransientError):
    try:
        with sitemaps_dag.step(site):
            raise cls("x")
    except AirflowFailException:
        result[cls.__name__] = "fails, no retry"
    except errors.PipelineError:
        result[cls.__name__] = "raised (retried)"

# A full disk, as the libraries raise it: no retry either; another OSError is retried.
import duckdb, errno

def raise_oserror(code):
    raise OSError(code, os.strerror(code), "/work/x.parquet")

for name, fail in (
        ("DuckDB writing to a full disk", lambda: duckdb.connect().execute(
            "COPY (SELECT 1 AS x) TO '/dev/full' (FORMAT parquet)")),
        ("ENOSPC", lambda: raise_oserror(errno.ENOSPC)),
        ("ENOENT", lambda: raise_oserror(errno.ENOENT))):
    try:
        with sitemaps_dag.step(site):
            fail()
    except AirflowFailException as exc:
        result[name] = "fails, no retry: " + str(exc).split(" (")[0]
    except Exception:
        result[name] = "raised (retried)"
print("STEP:" + json.dumps(result))
"""


def test_every_terminal_error_fails_every_task_without_retries(
        tmp_path: Path, airflow_db: Path) -> None:
    """Each TerminalError class, raised inside `step()`, fails the task at once
    (AirflowFailException: Airflow does not retry it), and so does a full disk as DuckDB or
    the OS reports it; a TransientError (or another OSError) is left to the task's retries.
    And every task's body runs inside `with step(site):`."""
    import ast

    env = new_home(tmp_path, airflow_db, TWO_SITES)
    proc = subprocess.run([sys.executable, "-c", STEP_ERRORS, str(DAGS_FOLDER)],
                          env=env.env(), cwd=env.home, capture_output=True, text=True,
                          timeout=180)
    line = [x for x in proc.stdout.splitlines() if x.startswith("STEP:")]
    assert proc.returncode == 0 and line, tail(proc.stdout + proc.stderr)
    result = json.loads(line[0].removeprefix("STEP:"))
    assert result == {
        **{name: "fails, no retry" for name in (
            "TerminalError", "InventoryError", "ConfigError", "StorageError",
            "PublishConflict", "ShrinkRefused", "TooManyRejects", "LiveStateCorrupt",
            "InternalError", "OutOfSpace", "FileTooLarge")},
        "TransientError": "raised (retried)", "ServedCopyWrong": "raised (retried)",
        "DuckDB writing to a full disk": "fails, no retry: no space left on the disk of /dev/full",
        "ENOSPC": "fails, no retry: no space left on the disk of /work/x.parquet",
        "ENOENT": "raised (retried)"}

    tree = ast.parse((DAGS_FOLDER / "sitemaps_dag.py").read_text())
    def is_task(d: ast.expr) -> bool:  # @task, @task(...), @task.short_circuit(...)
        f = d.func if isinstance(d, ast.Call) else d
        return getattr(f, "id", None) == "task" or (
            isinstance(f, ast.Attribute) and getattr(f.value, "id", None) == "task")

    tasks = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
             and any(is_task(d) for d in f.decorator_list)]
    assert sorted(f.name for f in tasks) == sorted([*TASKS, "verify"]), [f.name for f in tasks]
    for f in tasks:
        calls = [n for n in ast.walk(f) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute)
                 and getattr(n.func.value, "id", None) == "steps"
                 and not n.func.attr[0].isupper()]  # steps.RunOptions(...) only holds values
        guarded = [n for w in ast.walk(f) if isinstance(w, ast.With)
                   and any(getattr(i.context_expr.func, "id", None) == "step"
                           for i in w.items if isinstance(i.context_expr, ast.Call))
                   for n in ast.walk(w)]
        assert all(c in guarded for c in calls), f"{f.name} calls steps outside step(site)"
