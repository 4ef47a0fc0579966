"""The Airflow adapter of the pipeline: everything a DAG task wraps around a step.

The DAG file (dags/sitemaps_dag.py) is wiring and docs; each of its tasks calls one
function here with the site and the run context. This module holds what is about Airflow:
S3 settings from an Airflow connection, a TerminalError failing the task at once (no retry
can help) while a TransientError is left to the task's retries, the run's time and work
folder from the DAG run, the params of a manual run (dry run, allow shrink, force,
rollback), the asset event of a new generation, and the alerts of a failed task (the
SMTP and Slack providers' notifiers). `pipeline` core never imports this module; Airflow is
imported inside its functions, so importing it costs nothing.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from pipeline.alerts import Alert, Failure, alert_for
from pipeline.context import PublishSummary, RunContext, StepResult
from pipeline.settings import RunOptions, help_text
from pipeline.sites import SiteConfig
from pipeline.taskio import TaskIO

log = logging.getLogger("sitemaps.dag")

#: Each task's doc_md: what it does and what to do when it fails.
TASK_DOCS = {
    "rollback": """\
An ordinary run passes straight through. A manual run with the param `rollback_to`
(`previous`: the generation before the live one; or a generation id) makes that kept
generation live again (`sitemaps rollback`: every file it lists and its snapshot checked
first, then the same conditional swap of `manifest.json` and root repair as a publish) and
skips every other task. *If it fails*: the log's last line says why (not a kept generation,
files missing, or a publish won the race: exit 3); the live generation is unchanged.""",
    "begin": """\
Checks that S3 can be reached and the output written, reads the live manifest (its
version is what publish's conditional write checks), fixes the run time (when the DAG run
started, the same on every retry) and the work prefix,
and returns the run context that every other task receives.
*If it fails*: S3 unreachable or access refused: check the connection `{conn}`.""",
    "load_groups": """\
Lists the inventory, checks its schema from its files' footers (no row is read) and cuts
its files into groups of about `load_group_rows` rows (20,000,000 by default), which the
normalize task is mapped over; writes `load-plan.json` under the work prefix. Chooses the
diff's partitions from the footers' row counts. *If it fails*: the log's last line says
what is wrong with the inventory (no file, not Parquet, missing `url` column, wrong
type); fix the inventory, then trigger again.""",
    "normalize": """\
One mapped task per group of inventory files: normalises and validates its rows, writes
them (with their reject reasons) as Parquet under the work prefix, cut by the diff's hash
partitions, and a small `load-NNNNN.json` of its counts. *If it fails*: a file that
cannot be read fails at once; storage errors are retried. Clearing one map index
normalises only that group again.""",
    "dedupe_parts": """\
Returns the numbers of the duplicate search's parts, which the dedupe task is mapped over
(load_groups chose how many: about 16,000,000 rows each, at most one per diff partition or
bucket). *If it fails*: it only reads `load-plan.json` from the work prefix: storage; it
is retried.""",
    "dedupe": """\
One mapped task per part of the duplicate search: reads the URL hashes of the normalised
rows of its own diff partitions or buckets (every copy of a URL is in one), ranks the
copies of each repeated URL (newest lastmod, then the first row) and writes the losers and
a small `dedupe-NNNNN.json` of their counts. *If it fails*: usually storage or memory; it
is retried. Clearing one map index searches only that part again.""",
    "load": """\
Adds up the normalize and dedupe tasks' counts, puts their rejects and duplicates together
(`rejects.parquet`, `duplicates.parquet`) and applies the reject guard; it reads no
normalised row (but every one where the inventory has alternates, to check that their
pages name each other). *If it fails*: the log's last line says what is wrong with the
inventory (too many rejects, no lastmod that parses); fix the inventory, then trigger
again.""",
    "diff_partitions": """\
Returns the numbers of the diff's hash partitions, which the diff task is mapped over: load
chose how many (the site's `diff_partitions`, else as many as keep each join in DuckDB's
memory, at most 1,024; one on a first run) and cut the valid rows it wrote by them.
*If it fails*: it only reads load's result from the work prefix: storage; it is retried.""",
    "diff": """\
One mapped task per hash partition of the URLs (`hash(url) % partitions`): compares that
partition's rows with the same partition of the last published snapshot (added, changed,
removed, unchanged) and computes each URL's lastmod; writes the partition's diffed and
changes Parquet parts and a small `diff-NNNNN.json` of its counts under the work prefix (a
first run in one partition writes no part: plan reads load's rows through the diff's query).
*If it fails*: usually storage; it is retried. Clearing one map index diffs only that
partition again.""",
    "diff_counts": """\
Adds up the diff partitions' counts and gathers their Parquet parts into `diff.json`, which
plan reads. *If it fails*: a partition has no result (a diff map index did not finish: clear
it) or storage; it is retried.""",
    "plan_slices": """\
Cuts the plan into slices of about `plan_slice_rows` URLs (4,000,000 by default; a
section's URLs in a range, or several small sections; a kept shard is never cut) and
returns their numbers, which the plan task is mapped over; writes `plan-slices.json`
under the work prefix. The cuts come from the section counts, a sample of URLs and the
live shards' bounds; when a slice would read more than twice its rows (a first run's slice
of a large section, whose bucket holds all of it; every slice of a nightly with many
slices), it names the units (diffed files or buckets) for plan_split to write by slice.
*If it fails*: storage; it is retried.""",
    "plan_splits": """\
Returns the numbers of the units of the diffed rows that plan_split is mapped over (one
that splits nothing when every slice reads about its own rows anyway: a task mapped over
none would be skipped, and the plan tasks after it too). *If it fails*: it only reads
`plan-slices.json`: storage; it is retried.""",
    "plan_split": """\
One mapped task per unit of the diffed rows (a first run's bucket of sections, a nightly's
diff partition file): reads its rows once and writes them under
`plan-input/slice=N/` for each slice N they fall in, and `plan-split-NNNNN.json` (those
files), so that each plan task reads only its own slice's rows. *If it fails*: storage or
memory; it is retried; clearing one map index splits only that unit again (the plan tasks
after it must run again too).""",
    "plan": """\
One mapped task per plan slice: buckets the slice's URLs into shards within the
limits, with stable boundaries; reads its own rows (plan_split's files, else its sections'
diffed files); writes the slice's planned Parquet part and
`plan-slice-NNNNN.json` (its shards) under the work prefix.
*If it fails*: storage or limits; see the log's last line. It is retried; clearing
one map index plans only that slice again.""",
    "plan_counts": """\
Gathers the slices' shards in order, gives them their final numbers (`shards.json`)
and groups the shards to rewrite into render batches (`plan.json`). In a dry run,
this is the last step: its log line is the report. *If it fails*: a slice has no
result (a plan map index did not finish: clear it) or storage; it is retried.""",
    "render": """\
One mapped task per batch number (its shard ids are read from the run's plan, not passed
through XCom): writes the batch's shards as gzipped sitemap files
under content-addressed keys (an unchanged shard is never rewritten). Mapped over
zero batches when nothing changed (it then shows as skipped, which is fine).
*If it fails*: retried; clearing one map index renders only that batch again.""",
    "state": """\
Stores the generation's snapshot (what the next run diffs against), rejects and changes
under the state prefix; it needs only the plan, so it runs beside render. Leaves them to
publish when there is no shard to render (the run may publish nothing), and in a dry run.
*If it fails*: storage; it is retried, and publish waits for it (clearing it stores the
state again).""",
    "publish": """\
Writes the index files and the generation's manifest, then swaps the live
`manifest.json` with one conditional write, so a racing run loses cleanly (announce then
emits the manifest asset event). Skipped in a dry run.
*If it fails*: `PublishConflict`: another run published first, trigger again;
`ShrinkRefused`: check the inventory, or trigger with `allow_shrink`.""",
    "announce": """\
Emits the manifest asset event, with the run's summary in its extra (generation, counts,
root index URLs), when publish made a new generation live; skipped when the generation was
already live (nothing changed), so the asset's consumers run only for a new generation.
*If it fails*: the sitemaps are live; clear it to emit the event.""",
    "gc": """\
Removes shard and generation files that no kept generation references, after a
grace period. *If it fails*: the new sitemaps are already live; clear it later.""",
    "notify": """\
Writes the feed of recent changes (feed.atom, listed in robots-sitemaps.txt) and the HTML run
report (internal: under the state prefix, shown in the DAG run's "Sitemaps report" tab), and
submits changed URLs to IndexNow when the site has a key. *If it fails*: the new sitemaps are
already live; a refused IndexNow submission is only a warning; clear the task to write the
feed and report again.""",
    "verify": """\
Fetches the served copy as a crawler does (`sitemaps verify --site-url {url}`): robots.txt,
the root index(es) against the live generation's, 20 sitemaps by sha256, no second gzip.
*If it fails*: the sitemaps are published, but crawlers do not read them as published; the
log lists each problem (a stale cache retries away; a double gzip or a robots.txt that
disallows them needs the server fixed).""",
    "finish": """\
Removes the run's work files (and gives back the output's lease, if the site uses one).
Runs only when publish succeeded (or was skipped by a dry run), so a failed run keeps what
clearing its failed task needs; gc removes abandoned work folders after its grace period.""",
}

#: Outside this set a character of an Airflow run id is mapped to '_': no '.' (so never '.'
#: or '..'), no '/', no ':' or '+' (which some tools mishandle).
_RUN_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def work_folder_name(dag_id: str, run_id: str) -> str:
    """The work folder's name of one DAG run, `<dag id>.<run id>`, as one folder name
    (settings' run id rule, layout.RUN_ID_PATTERN).

    The DAG id is in it because every site's DAG has the same run id at a cron tick, and
    sites may share a work root (`work` or `state` set in the site file's [defaults]); no
    DAG id has a '.', so the first one ends it. Airflow accepts a manual run id of '..' or
    'a/b'; the work folder `<work>/<name>` must stay below the work root, since finish
    deletes it. A mapped or shortened name gets a hash of what it was made from, so two
    run ids that differ only in mapped characters keep two folders.
    """
    name = _RUN_ID_UNSAFE.sub("_", run_id).strip("_")
    if not name or name != run_id:
        name = f"{name[:150] or 'run'}-{_digest(run_id)}"
    folder = f"{dag_id}.{name}"
    return folder if len(folder) <= 200 else f"{folder[:187]}-{_digest(folder)}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def run_time(context: Any) -> datetime:
    """The run's time: when the DAG run actually started. It stamps the generation and the
    lastmod of new URLs, so it must not be a logical date hours earlier (unpausing makes the
    last cron tick's run, due at 03:00, at whatever time it is). The run's start is the same
    for every try of begin; `airflow dags test` starts its run at the date it is given."""
    dag_run = context.get("dag_run")
    for value in (getattr(dag_run, "start_date", None), getattr(dag_run, "run_after", None)):
        if value is not None:
            return datetime.fromisoformat(str(value)) if isinstance(value, str) else value
    return datetime.now(UTC)


def use_s3_connection(site: SiteConfig) -> None:
    """S3 settings for this process: the site's Airflow connection, else the environment."""
    from airflow.sdk.exceptions import AirflowFailException

    from pipeline import storage

    if not site.aws_conn_id:
        storage.configure_s3(None)
        return
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    hook = AwsBaseHook(aws_conn_id=site.aws_conn_id, client_type="s3")
    if hook.conn_config.conn_id != site.aws_conn_id:
        raise AirflowFailException(
            f"Airflow connection {site.aws_conn_id!r} (aws_conn_id of site {site.name!r}) does "
            "not exist: create it (type aws; extra endpoint_url for a non-AWS S3)")
    creds = hook.get_credentials()  # also masks the secret in task logs
    settings = storage.S3Settings(
        endpoint_url=hook.conn_config.get_service_endpoint_url("s3"),
        access_key_id=creds.access_key, secret_access_key=creds.secret_key,
        session_token=creds.token,
        region=hook.region_name or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    storage.configure_s3(settings)
    log.info("S3 through connection %s: %r", site.aws_conn_id, settings)


@contextlib.contextmanager
def step(site: SiteConfig) -> Iterator[None]:
    """Around every step: S3 from the connection, no huge pages on request
    (pipeline.hugepages); a TerminalError (a full disk too) fails without retries."""
    from airflow.sdk.exceptions import AirflowFailException

    from pipeline import hugepages, sql
    from pipeline.errors import TerminalError, out_of_space

    hugepages.decline_on_request()
    use_s3_connection(site)
    try:
        yield
    except TerminalError as exc:
        log.error("%s: %s", type(exc).__name__, exc)
        raise AirflowFailException(str(exc)) from exc
    except Exception as exc:
        full = out_of_space(exc, sql.spill_dir_for_errors())
        if full is None:
            raise
        # a full disk: the task log says which folder; a retry fills it again
        log.error("%s: %s", type(full).__name__, full)
        raise AirflowFailException(str(full)) from exc


def params() -> dict[str, Any]:
    """The params of a manual run: `dry_run`, the run options a run may set (their fields'
    `param`, e.g. allow_shrink and force), and `rollback_to`."""
    from airflow.sdk import Param

    out = {"dry_run": Param(False, type="boolean", title="Dry run",
                            description="Run up to plan and report; publish nothing.")}
    for f in dataclasses.fields(RunOptions):
        if f.metadata["option"].param:
            out[f.name] = Param(f.default, type="boolean", title=f.name.replace("_", " ")
                                .capitalize(), description=help_text(f).capitalize() + ".")
    out["rollback_to"] = Param(
        "", type="string", title="Roll back to",
        description="Instead of a run: make this kept generation live again ('previous': the "
                    "one before the live one; else a generation id from `sitemaps status`). "
                    "Empty: an ordinary run.")
    return out


def _context() -> Any:
    from airflow.sdk import get_current_context

    return get_current_context()


def _label(name: str, text: str) -> None:
    """The mapped task's label (its `map_index_template`)."""
    _context()[name] = text


def rollback(site: SiteConfig) -> bool:
    """True (go on) for an ordinary run; a rollback run rolls back and stops here."""
    context = _context()
    to = str(context["params"].get("rollback_to") or "").strip()
    if not to:
        return True
    from pipeline.status import rollback as roll_back

    with step(site):
        result = roll_back(site.out, site.state_uri, to=None if to == "previous" else to)
    context["ti"].xcom_push(key="rollback", value=result.to_dict())
    log.info("rollback: generation %s is live again (%s URLs in %d sitemaps); was %s; "
             "every other task is skipped", result.live, f"{result.published:,}",
             result.sitemaps, result.previous)
    return False


def _logged(result: StepResult) -> dict[str, Any]:
    """Logs the step's summary line (the line the CLI logs) and returns its XCom value."""
    log.info("%s", result.line())
    return result.to_dict()


def begin(site: SiteConfig) -> dict[str, Any]:
    """The run context: the site's options with this DAG run's id, time and params."""
    from pipeline import steps

    context = _context()
    params = context["params"]
    per_run = {f.name: bool(params[f.name]) for f in dataclasses.fields(RunOptions)
               if f.metadata["option"].param}
    with step(site):  # the site's state is found on its storage, through its connection
        opts = site.run_options(
            run_id=work_folder_name(site.dag_id, context["run_id"]), run_time=run_time(context),
            **per_run, check_writable=not params["dry_run"])  # a dry run writes nothing to out
        ctx = dataclasses.replace(steps.begin(opts), dry_run=bool(params["dry_run"]))
    log.info("%s", ctx.summary())
    return ctx.to_dict()


def load_groups(site: SiteConfig, ctx: dict[str, Any]) -> list[int]:
    """The groups of inventory files' numbers, 0 .. N-1: what the normalize task is mapped
    over (none for an unchanged run)."""
    from pipeline import steps

    with step(site):
        return steps.load_groups_step(RunContext.from_dict(ctx))


def normalize(site: SiteConfig, ctx: dict[str, Any], group: int) -> dict[str, Any]:
    from pipeline import steps

    _label("group_label", f"group {group}")
    with step(site):
        return _logged(steps.load_group_step(RunContext.from_dict(ctx), group))


def dedupe_parts(site: SiteConfig, ctx: dict[str, Any]) -> list[int]:
    """The duplicate search's parts, 0 .. N-1: what the dedupe task is mapped over (none
    for an unchanged run)."""
    from pipeline import steps

    with step(site):
        return steps.dedupe_parts_step(RunContext.from_dict(ctx))


def dedupe(site: SiteConfig, ctx: dict[str, Any], part: int) -> dict[str, Any]:
    from pipeline import steps

    _label("part_label", f"part {part}")
    with step(site):
        return _logged(steps.dedupe_step(RunContext.from_dict(ctx), part))


def load(site: SiteConfig, ctx: dict[str, Any]) -> dict[str, Any]:
    from pipeline import steps

    with step(site):
        return _logged(steps.load_combine_step(RunContext.from_dict(ctx)))


def diff_partitions(site: SiteConfig, ctx: dict[str, Any]) -> list[int]:
    """The diff partitions' numbers, 0 .. N-1: what the diff task is mapped over."""
    from pipeline import steps

    with step(site):
        partitions = steps.diff_partitions(RunContext.from_dict(ctx))
    log.info("diff: %d partition(s)", partitions)
    return list(range(partitions))


def diff(site: SiteConfig, ctx: dict[str, Any], partition: int) -> dict[str, Any]:
    from pipeline import steps

    _label("partition_label", f"partition {partition}")
    with step(site):
        return _logged(steps.diff_partition_step(RunContext.from_dict(ctx), partition))


def diff_counts(site: SiteConfig, ctx: dict[str, Any]) -> dict[str, Any]:
    from pipeline import steps

    with step(site):
        return _logged(steps.diff_combine_step(RunContext.from_dict(ctx)))


def plan_slices(site: SiteConfig, ctx: dict[str, Any]) -> list[int]:
    """The plan slices' numbers, 0 .. N-1: what the plan task is mapped over."""
    from pipeline import steps

    with step(site):
        slices = steps.plan_prepare_step(RunContext.from_dict(ctx), split_tasks=True)
    log.info("plan: %d slice(s)", len(slices))
    return slices


def plan_splits(site: SiteConfig, ctx: dict[str, Any]) -> list[int]:
    """The units of the diffed rows that the plan_split task is mapped over; [0], a task
    that splits nothing, when each slice reads its own rows without a split: a task mapped
    over none is skipped, and so would be the plan tasks after it."""
    from pipeline import steps

    with step(site):
        units = steps.plan_split_units(RunContext.from_dict(ctx))
    log.info("plan: the rows split by slice in %d task(s)", len(units))
    return units or [0]


def plan_split(site: SiteConfig, ctx: dict[str, Any], unit: int) -> dict[str, Any]:
    from pipeline import steps

    _label("split_label", f"split {unit}")
    with step(site):
        return _logged(steps.plan_split_step(RunContext.from_dict(ctx), unit))


def plan(site: SiteConfig, ctx: dict[str, Any], slice: int) -> dict[str, Any]:
    from pipeline import steps

    _label("slice_label", f"slice {slice}")
    with step(site):
        return _logged(steps.plan_slice_step(RunContext.from_dict(ctx), slice))


def max_map_length() -> int:
    """Airflow's `[core] max_map_length`: a task mapped over more items fails."""
    from airflow.sdk.configuration import conf

    return int(conf.getint("core", "max_map_length"))


def max_active_tasks() -> int:
    """The DAG's `max_active_tasks`: the deployment's `[core] parallelism` (its running
    tasks at most), so that mapped tasks are not held to Airflow's 16 a DAG."""
    from airflow.sdk.configuration import conf

    return int(conf.getint("core", "parallelism"))


def plan_counts(site: SiteConfig, ctx: dict[str, Any]) -> list[int]:
    """Returns the render batches' numbers (their shard ids stay in the run's plan.json:
    XCom carries no list of 20,000 shards at 1B URLs); the counts go to XCom `summary`;
    a dry run's report to XCom `dry_run`, and no batches."""
    from pipeline import steps

    run = RunContext.from_dict(ctx)
    with step(site):
        planned = steps.plan_combine_step(run, max_batches=max_map_length())
        report = steps.dry_run_summary(run) if run.dry_run else None
    ti = _context()["ti"]
    log.info("%s", planned.line())
    ti.xcom_push(key="summary", value=planned.counts())
    if report is None:
        return list(range(len(planned.batches)))
    ti.xcom_push(key="dry_run", value=_logged(report))
    return []


def render(site: SiteConfig, ctx: dict[str, Any], batch: int) -> dict[str, Any]:
    """Renders the plan's batch number `batch` (its shard ids from plan.json)."""
    from pipeline import steps

    run = RunContext.from_dict(ctx)
    with step(site):
        uids = steps.render_batch(run, batch)
        _label("batch_label", f"batch {batch}: {len(uids)} shards")
        return _logged(steps.render_step(run, uids, name=str(batch)))


def state(site: SiteConfig, ctx: dict[str, Any]) -> dict[str, Any]:
    from pipeline import steps

    with step(site):
        return _logged(steps.state_step(RunContext.from_dict(ctx)))


def publish(site: SiteConfig, ctx: dict[str, Any], rendered: Any) -> dict[str, Any]:
    """Publishes the rendered batches (none when render was mapped over zero batches)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from pipeline import steps

    run = RunContext.from_dict(ctx)
    if run.dry_run:
        raise AirflowSkipException("dry run: nothing published")
    # One slice request (iterating would probe past the end).
    uris = [r["uri"] for r in (rendered[:] if rendered is not None else [])]
    with step(site):
        return _logged(steps.publish_step(run, uris))


def announce(summary: dict[str, Any], asset: Any) -> None:
    """The manifest asset's event, only for a run that published a new generation."""
    from airflow.sdk.exceptions import AirflowSkipException

    if not summary["published"]:
        # A skipped task emits no asset event: nothing new for its consumers.
        raise AirflowSkipException(f"generation {summary['generation']} was already "
                                   "live: nothing to announce")
    extra = {k: summary[k] for k in ("generation", "published", "out", "root_indexes",
                                     "warnings")}
    extra["counts"] = summary["counts"]
    _context()["outlet_events"][asset].extra = extra
    log.info("announce: generation %s on %s", summary["generation"], asset.uri)


def gc(site: SiteConfig, ctx: dict[str, Any]) -> dict[str, Any]:
    from pipeline import steps

    with step(site):
        return _logged(steps.gc_step(RunContext.from_dict(ctx)))


def notify(site: SiteConfig, ctx: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    from pipeline import steps

    with step(site):
        published = PublishSummary(**{**summary, "io": TaskIO.from_dict(summary.get("io"))})
        return _logged(steps.notify_step(RunContext.from_dict(ctx), published))


def verify(site: SiteConfig) -> dict[str, Any]:
    """The served copy of the site's live generation (pipeline.verify); ServedCopyWrong
    (retried: a cache may refresh) listing the problems when it is not as published."""
    from pipeline.errors import ServedCopyWrong
    from pipeline.verify import verify as verify_served

    with step(site):
        result = verify_served(site.out, site.verify_url)
        for note in result.notes:
            log.info("verify: %s", note)
        for problem in result.problems:
            log.error("verify: %s", problem)
        if not result.ok:
            raise ServedCopyWrong(f"the served copy at {result.site_url} has "
                                  f"{len(result.problems)} problem(s), the first: "
                                  f"{result.problems[0]}")
        log.info("verify: %d file(s) fetched from %s, as published", result.checked,
                 result.site_url)
        return result.as_dict()


def finish(site: SiteConfig, ctx: dict[str, Any]) -> None:
    from pipeline import steps

    with step(site):
        steps.finish(RunContext.from_dict(ctx))
    log.info("finish: removed the work files under %s", ctx["work"])


class _SiteAlert(abc.ABC):
    """A failure callback of a site's tasks: the alert of the failure (pipeline.alerts), sent
    through one provider's notifier. Airflow calls it after a task's last try failed (not on
    a retry: a stale cache that a retry of verify outlives tells no one); the provider is
    imported only then. Each channel is its own callback, so one that fails (Airflow logs
    it) does not keep the other from sending."""

    def __init__(self, site: SiteConfig) -> None:
        self.site = site

    def __call__(self, context: Any) -> None:
        alert = alert_for(self.site, failure_of(context))
        if alert is None:  # an event the site's alerts are not told of
            return
        self.send(alert, context)
        log.info("alert (%s) sent by %s: %s", alert.event, type(self).__name__, alert.subject)

    @abc.abstractmethod
    def send(self, alert: Alert, context: Any) -> None:
        """Sends the alert through the channel."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.site.name!r})"


class EmailAlert(_SiteAlert):
    """The alert by e-mail: the SMTP provider's SmtpNotifier, through `alerts.smtp_conn_id`."""

    def send(self, alert: Alert, context: Any) -> None:
        import html

        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        alerts = self.site.alerts
        assert alerts is not None
        # notify(), not the notifier's call: that would render the text as a Jinja template,
        # and an error message may hold "{{".
        SmtpNotifier(to=list(alerts.email), from_email=alerts.from_email,
                     subject=alert.subject, html_content=f"<pre>{html.escape(alert.text)}</pre>",
                     smtp_conn_id=alerts.smtp_conn_id).notify(context)


class SlackAlert(_SiteAlert):
    """The alert on Slack: the Slack provider's SlackWebhookNotifier, through the incoming
    webhook of `alerts.slack_webhook_conn_id`."""

    def send(self, alert: Alert, context: Any) -> None:
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        alerts = self.site.alerts
        assert alerts is not None and alerts.slack_webhook_conn_id
        notifier = SlackWebhookNotifier(slack_webhook_conn_id=alerts.slack_webhook_conn_id,
                                        text=f"*{alert.subject}*\n{alert.text}")
        notifier.notify(context)  # type: ignore[no-untyped-call]  # the provider's is untyped


def failure_callbacks(site: SiteConfig) -> list[Callable[[Any], None]]:
    """The `on_failure_callback` of every task of the site's DAG: one per channel of its
    alerts; none for a site without alerts (its tasks cost nothing more)."""
    if site.alerts is None:
        return []
    callbacks: list[Callable[[Any], None]] = []
    if site.alerts.email:
        callbacks.append(EmailAlert(site))
    if site.alerts.slack_webhook_conn_id:
        callbacks.append(SlackAlert(site))
    return callbacks


def failure_of(context: Any) -> Failure:
    """The failed task as pipeline.alerts describes it, from the callback's context."""
    from airflow.sdk.configuration import conf

    ti = context["ti"]
    base_url = str(conf.get("api", "base_url", fallback="http://localhost:8080/")).rstrip("/")
    map_index = getattr(ti, "map_index", None)
    return Failure(
        task_id=ti.task_id, run_id=context["run_id"], error=context.get("exception"),
        map_index=-1 if map_index is None else int(map_index),
        log_url=getattr(ti, "log_url", None),
        # the plugins/ report tab's page of this run (it published, for verify to run)
        report_url=f"{base_url}/sitemaps-report/{quote(ti.dag_id, safe='')}/"
                   f"{quote(context['run_id'], safe='')}")
