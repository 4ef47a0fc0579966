"""One sitemap DAG per site of the site file (`pipeline.sites`; see docs/airflow.md).

Each DAG runs the steps of `pipeline.steps` as tasks: rollback (a short circuit: a manual
run with `rollback_to` rolls back and skips the rest), begin, load_groups, normalize (mapped
over groups of inventory files), dedupe_parts, dedupe (mapped over parts of the duplicate
search), load, diff_partitions, diff
(mapped over hash partitions of the URLs), diff_counts, plan_slices, plan_splits,
plan_split (mapped over units of the diffed rows, written by slice), plan (mapped over the
plan's slices), plan_counts, render (mapped over the plan's batches), publish, announce (the
manifest asset event of a new generation), gc, notify, finish. Each task is one call into
`pipeline.orchestration`, the Airflow adapter (S3 from the connection, terminal errors fail
without retries, the run's time, dry runs, the log line of each step). Tasks pass only the
run context (a small dict of URIs and settings), URIs and counts through XCom; every file a
task writes goes under the run's work prefix on shared storage, so any worker can run any
task and a retry finds what it needs.

Parsing this file reads one local TOML file (and Airflow's own configuration) and nothing
else; everything expensive is imported inside the tasks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable, chain, dag, task

from pipeline import orchestration as adapter
from pipeline.orchestration import TASK_DOCS, step
from pipeline.settings import Environment
from pipeline.sites import SiteConfig, load_sites

__all__ = ["build_dag", "step"]

#: Every task: 3 retries, after about 30 s, 60 s, 120 s (a multiplier in Airflow 3.1+;
#: `True` there means 1.0, a constant delay). A TerminalError is never retried.
DEFAULT_ARGS: dict[str, Any] = {
    "owner": "seo-platform",
    "retries": 3,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=10),
}
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)

DAG_DOC = """\
### Sitemaps for {site_url}

Publishes the sitemaps of **{site_url}** from the inventory `{inventory}` to `{out}`
(served at {public_url}). Runs at `{schedule}` (UTC) and whenever the inventory
asset `{asset}` is updated. At most one run at a time; no catch-up.

**Stages** (one task each, thin wrappers of `pipeline.steps`): begin, load_groups
(cuts the inventory's files into groups of about {load_group_rows} rows), normalize (one
mapped task per group), dedupe_parts (how many), dedupe (one mapped task per part of the
duplicate search), load (the counts, the rejects, the reject guard),
diff_partitions (how many), diff (one mapped task per hash partition of the URLs;
partitions: {diff_partitions}), diff_counts (adds the partitions up), plan_slices
(cuts the plan into slices of about {plan_slice_rows} rows), plan_splits (how many),
plan_split (one mapped task per unit of the diffed rows, written by slice, when a slice
would read much more than its rows), plan (one mapped task per slice), plan_counts
(numbers the shards, makes the render batches), render (one mapped task per batch of
shards), publish (the atomic swap of `manifest.json`), announce (the manifest asset's
event, only for a new generation), gc (old generations), notify, finish (removes the run's
work files under `{work}`), and verify when the site sets `verify_url` (the served copy,
fetched as a crawler does).

**Manual runs** (Trigger with config): `rollback_to` (`previous`, or a generation id that
`sitemaps status` lists) makes that kept generation live again, as `sitemaps rollback`
does, and skips every other task; `dry_run` stops after plan_counts and publishes
nothing (the plan_counts task's log line and its XCom `dry_run` tell what would
change); `allow_shrink` publishes even if far fewer URLs than the live generation (more than
{shrink:.0%} fewer is refused otherwise); `force` rewrites every shard file.

**When a run fails**: a task whose error says what to fix (bad inventory, too many
rejects, shrink refused, publish conflict, configuration) fails at once, without
retries: fix the cause and trigger a new run, or clear the failed task. Network
and throttling errors are retried 3 times with backoff. The live sitemaps stay
whole whatever fails; a failed run keeps its work files so that clearing its
failed task resumes it. {alerts}
"""



def _alerts_doc(site: SiteConfig) -> str:
    if site.alerts is None:
        return "No one is alerted (the site has no `alerts`)."
    to = [*site.alerts.email, *([f"Slack ({site.alerts.slack_webhook_conn_id})"]
                                if site.alerts.slack_webhook_conn_id else [])]
    return (f"A task's last failed try alerts {', '.join(to)} of: "
            f"{', '.join(site.alerts.events)}.")


def build_dag(site: SiteConfig) -> Any:
    """The DAG of one site."""
    inventory_asset = Asset(uri=site.inventory_asset_uri)
    manifest_asset = Asset(uri=site.manifest_uri, name=f"{site.dag_id}_manifest")
    timetable = CronTriggerTimetable(site.schedule, timezone="UTC")
    try:
        timetable.validate()
    except Exception as exc:  # noqa: BLE001 - an import error that names the site
        raise ValueError(f"site {site.name!r}: schedule {site.schedule!r} is not a valid "
                         f"cron expression: {exc}") from exc
    doc = DAG_DOC.format(
        site_url=site.site_url, inventory=site.inventory, out=site.out,
        public_url=site.public_url or site.site_url, schedule=site.schedule,
        asset=site.inventory_asset_uri, work=site.work or "<state>/runs", shrink=site.shrink_threshold,
        diff_partitions=site.diff_partitions or "automatic, by DuckDB's memory",
        alerts=_alerts_doc(site),
        load_group_rows=f"{site.load_group_rows:,}" if site.load_group_rows
        else f"{Environment().load_group_rows:,} (the default, `SITEMAPS_LOAD_GROUP_ROWS`)",
        plan_slice_rows=f"{site.plan_slice_rows:,}" if site.plan_slice_rows
        else f"{Environment().plan_slice_rows:,} (the default, `SITEMAPS_PLAN_SLICE_ROWS`)")
    callbacks = adapter.failure_callbacks(site)
    alerts = {"on_failure_callback": callbacks} if callbacks else {}

    @dag(dag_id=site.dag_id, description=f"Sitemaps of {site.site_url}",
         schedule=AssetOrTimeSchedule(timetable=timetable, assets=[inventory_asset]),
         start_date=START_DATE, catchup=False, max_active_runs=1,
         # a site's alerts: the failure callbacks of every task (none without alerts)
         default_args={**DEFAULT_ARGS, **alerts},
         max_active_tasks=adapter.max_active_tasks(),
         tags=["sitemaps", *site.tags], doc_md=doc, params=adapter.params())
    def sitemaps() -> None:
        @task.short_circuit(doc_md=TASK_DOCS["rollback"])
        def rollback() -> bool:
            return adapter.rollback(site)

        @task(doc_md=TASK_DOCS["begin"].format(conn=site.aws_conn_id or "(environment)"))
        def begin() -> dict[str, Any]:
            return adapter.begin(site)

        @task(doc_md=TASK_DOCS["load_groups"])
        def load_groups(ctx: dict[str, Any]) -> list[int]:
            return adapter.load_groups(site, ctx)

        @task(doc_md=TASK_DOCS["normalize"], map_index_template="{{ group_label }}")
        def normalize(ctx: dict[str, Any], group: int) -> dict[str, Any]:
            return adapter.normalize(site, ctx, group)

        # none_failed: an unchanged run maps normalize over no group
        @task(doc_md=TASK_DOCS["dedupe_parts"], trigger_rule="none_failed")
        def dedupe_parts(ctx: dict[str, Any]) -> list[int]:
            return adapter.dedupe_parts(site, ctx)

        @task(doc_md=TASK_DOCS["dedupe"], map_index_template="{{ part_label }}")
        def dedupe(ctx: dict[str, Any], part: int) -> dict[str, Any]:
            return adapter.dedupe(site, ctx, part)

        # none_failed: an unchanged run maps dedupe over no part, and load still reports
        # the live generation's counts
        @task(doc_md=TASK_DOCS["load"], trigger_rule="none_failed")
        def load(ctx: dict[str, Any]) -> dict[str, Any]:
            return adapter.load(site, ctx)

        @task(doc_md=TASK_DOCS["diff_partitions"])
        def diff_partitions(ctx: dict[str, Any]) -> list[int]:
            return adapter.diff_partitions(site, ctx)

        @task(doc_md=TASK_DOCS["diff"], map_index_template="{{ partition_label }}")
        def diff(ctx: dict[str, Any], partition: int) -> dict[str, Any]:
            return adapter.diff(site, ctx, partition)

        @task(doc_md=TASK_DOCS["diff_counts"])
        def diff_counts(ctx: dict[str, Any]) -> dict[str, Any]:
            return adapter.diff_counts(site, ctx)

        @task(doc_md=TASK_DOCS["plan_slices"])
        def plan_slices(ctx: dict[str, Any]) -> list[int]:
            return adapter.plan_slices(site, ctx)

        @task(doc_md=TASK_DOCS["plan_splits"])
        def plan_splits(ctx: dict[str, Any]) -> list[int]:
            return adapter.plan_splits(site, ctx)

        @task(doc_md=TASK_DOCS["plan_split"], map_index_template="{{ split_label }}")
        def plan_split(ctx: dict[str, Any], unit: int) -> dict[str, Any]:
            return adapter.plan_split(site, ctx, unit)

        @task(doc_md=TASK_DOCS["plan"], map_index_template="{{ slice_label }}")
        def plan(ctx: dict[str, Any], slice: int) -> dict[str, Any]:
            return adapter.plan(site, ctx, slice)

        @task(doc_md=TASK_DOCS["plan_counts"])
        def plan_counts(ctx: dict[str, Any]) -> list[int]:
            return adapter.plan_counts(site, ctx)

        @task(doc_md=TASK_DOCS["render"], map_index_template="{{ batch_label }}")
        def render(ctx: dict[str, Any], batch: int) -> dict[str, Any]:
            return adapter.render(site, ctx, batch)

        @task(doc_md=TASK_DOCS["state"])
        def state(ctx: dict[str, Any]) -> dict[str, Any]:
            return adapter.state(site, ctx)

        @task(doc_md=TASK_DOCS["publish"], trigger_rule="none_failed")
        def publish(ctx: dict[str, Any], rendered: list[dict[str, Any]]) -> dict[str, Any]:
            return adapter.publish(site, ctx, rendered)

        @task(doc_md=TASK_DOCS["announce"], outlets=[manifest_asset])
        def announce(summary: dict[str, Any]) -> None:
            adapter.announce(summary, manifest_asset)

        @task(doc_md=TASK_DOCS["gc"])
        def gc(ctx: dict[str, Any]) -> dict[str, Any]:
            return adapter.gc(site, ctx)

        @task(doc_md=TASK_DOCS["notify"])
        def notify(ctx: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
            return adapter.notify(site, ctx, summary)

        @task(doc_md=TASK_DOCS["verify"].format(url=site.verify_url))
        def verify(summary: dict[str, Any]) -> dict[str, Any]:
            return adapter.verify(site)

        @task(doc_md=TASK_DOCS["finish"], trigger_rule="none_failed")
        def finish(ctx: dict[str, Any]) -> None:
            adapter.finish(site, ctx)

        # XComArgs: each stands for a task's return value at run time.
        ctx: Any = begin()
        rollback() >> ctx
        groups = load_groups(ctx)
        normalized = normalize.partial(ctx=ctx).expand(group=groups)
        parts = dedupe_parts(ctx)
        normalized >> parts
        deduped = dedupe.partial(ctx=ctx).expand(part=parts)
        partitions = diff_partitions(ctx)
        diffed = diff.partial(ctx=ctx).expand(partition=partitions)
        chain(deduped, load(ctx), partitions)
        slices = plan_slices(ctx)
        chain(diffed, diff_counts(ctx), slices)
        units = plan_splits(ctx)
        slices >> units
        split = plan_split.partial(ctx=ctx).expand(unit=units)
        planned = plan.partial(ctx=ctx).expand(slice=slices)
        split >> planned
        batches = plan_counts(ctx)
        chain(planned, batches)
        rendered: Any = render.partial(ctx=ctx).expand(batch=batches)
        stored = state(ctx)  # beside render: the snapshot needs only the plan
        batches >> stored
        published: Any = publish(ctx, rendered)
        stored >> published
        published >> [gc(ctx), finish(ctx)]
        notify(ctx, published)
        announce(published)
        if site.verify_url:  # the served copy, fetched as a crawler does
            verify(published)

    return sitemaps()


for _site in load_sites(default=Path(__file__).resolve().parent / "sites.toml"):
    build_dag(_site)
