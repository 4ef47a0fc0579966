"""Airflow plugin: the run report of a sitemaps DAG run, as the tab "Sitemaps report" of the
DAG run in the Airflow UI (Airflow 3.1+).

- `external_views`: a view with destination `dag_run`, so every DAG run's page has the tab;
  the UI fills `{DAG_ID}` and `{RUN_ID}` into its href and shows the page in an iframe.
- `fastapi_apps`: the app behind it, mounted by the api-server at `/sitemaps-report`:
  `GET /sitemaps-report/{dag_id}/{run_id}` finds the site of the DAG (the site configuration
  file the DAGs read), the generation the run made live (the `publish` task's summary, or the
  `rollback` task's result for a manual rollback run) and returns that generation's report,
  read from the site's private state prefix (`<state>/generations/<id>/report.html`) through
  the site's Airflow connection; it writes the report first when it is missing (a generation
  published before the report moved, or by a run with `report = false`).

Only a user who may read the DAG's runs gets it (Airflow's own check, with the UI's session
cookie or a bearer token): the report is internal. Point `[core] plugins_folder` at this
folder (`infra/local/stack.sh` does); the api-server loads it at start.
"""

from __future__ import annotations

import html
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger("sitemaps.report_plugin")

URL_PREFIX = "/sitemaps-report"
TAB_NAME = "Sitemaps report"
URL_ROUTE = "sitemaps-report"
#: One report read at a time: the S3 settings of the pipeline are per process.
_LOCK = threading.Lock()


def _sites() -> Any:
    """The site configurations the DAGs read (pipeline.sites; default: the DAGs folder's)."""
    from airflow.configuration import conf

    from pipeline.sites import load_sites

    dags_folder = Path(os.path.expanduser(conf.get("core", "dags_folder")))
    return load_sites(default=dags_folder / "sites.toml")


def site_for(dag_id: str) -> Any | None:
    return next((s for s in _sites() if s.dag_id == dag_id), None)


def run_generation(dag_id: str, run_id: str) -> tuple[str | None, str]:
    """(generation, what the run did with it) from the run's XComs; (None, "") when the run
    made none live (a dry run, a failed or unfinished run)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows: Sequence[Any] = session.scalars(XComModel.get_many(
            run_id=run_id, dag_ids=dag_id, task_ids=["publish", "rollback"],
            map_indexes=-1)).all()
        values = {(r.task_id, r.key): XComModel.deserialize_value(r) for r in rows}
    published = values.get(("publish", "return_value"))
    if isinstance(published, dict) and published.get("generation"):
        return str(published["generation"]), ("published by this run" if published.get(
            "published") else "already live: this run changed nothing")
    rolled = values.get(("rollback", "rollback"))
    if isinstance(rolled, dict) and rolled.get("live"):
        return str(rolled["live"]), f"made live again by this run (rollback from " \
                                    f"{rolled.get('previous')})"
    return None, ""


def s3_settings(site: Any) -> Any:
    """The pipeline's S3 settings from the site's Airflow connection (None: environment)."""
    if not site.aws_conn_id:
        return None
    from airflow.models.connection import Connection

    from pipeline import storage

    conn = Connection.get_connection_from_secrets(site.aws_conn_id)
    extra = conn.extra_dejson
    return storage.S3Settings(
        endpoint_url=extra.get("endpoint_url") or None, access_key_id=conn.login or None,
        secret_access_key=conn.password or None,
        session_token=extra.get("aws_session_token") or None,
        region=extra.get("region_name") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")


def _message(title: str, text: str) -> bytes:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
            f"{html.escape(title)}</title></head><body style=\"font-family:system-ui,sans-serif;"
            f"margin:2em\"><h1 style=\"font-size:1.3em\">{html.escape(title)}</h1><p>"
            f"{html.escape(text)}</p></body></html>").encode()


def report_page(dag_id: str, run_id: str) -> tuple[int, bytes]:
    """(HTTP status, HTML) of the tab for one DAG run."""
    from pipeline import storage
    from pipeline.errors import PipelineError
    from pipeline.notify.report import read_report

    site = site_for(dag_id)
    if site is None:
        return 404, _message("Not a sitemaps DAG", f"{dag_id} is not a DAG of the sitemaps "
                                                   "site configuration: it has no run report.")
    generation, what = run_generation(dag_id, run_id)
    if generation is None:
        return 404, _message("No run report for this run",
                             f"Run {run_id} made no generation live (a dry run, a run that "
                             "failed before publish, or one still running).")
    try:
        with _LOCK:
            storage.configure_s3(s3_settings(site))
            try:
                body = read_report(site.out, generation, state_uri=site.state_uri,
                                   report_to=site.report_to, limits=site.limits)
            finally:
                storage.configure_s3(None)
    except PipelineError as exc:
        log.warning("sitemaps report of %s %s: %s", dag_id, run_id, exc)
        return 502, _message("The report could not be read", str(exc))
    if body is None:
        return 404, _message("No run report for this run",
                             f"Generation {generation} is gone from {site.out} "
                             "(garbage-collected).")
    banner = (f"<p class=\"muted\">DAG run {html.escape(run_id)}: generation "
              f"{html.escape(generation)}, {html.escape(what)}.</p>").encode()
    return 200, body.replace(b"</h1>", b"</h1>" + banner, 1)


def create_app() -> Any:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from fastapi import Depends, FastAPI
    from fastapi.responses import HTMLResponse

    app = FastAPI(title="Sitemaps run report", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/{dag_id}/{run_id}", response_class=HTMLResponse,
             dependencies=[Depends(requires_access_dag(method="GET",
                                                       access_entity=DagAccessEntity.RUN))])
    def report(dag_id: str, run_id: str) -> HTMLResponse:
        code, body = report_page(dag_id, run_id)
        return HTMLResponse(body, status_code=code,
                            headers={"Cache-Control": "private, no-store"})

    return app


class SitemapsReportPlugin(AirflowPlugin):
    name = "sitemaps_report"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": TAB_NAME}]
    external_views = [{
        "name": TAB_NAME,
        # Relative: the UI resolves it against its base URL (works behind a path prefix).
        "href": URL_PREFIX.lstrip("/") + "/{DAG_ID}/{RUN_ID}",
        "destination": "dag_run",
        "url_route": URL_ROUTE,
    }]
