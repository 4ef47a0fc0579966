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
  published before the report moved, or by a run with `report = false`). Above the report, a
  search box asks the next route about one URL.
- `GET /sitemaps-report/{dag_id}/explain?url=URL[&format=json]`: why that URL is (not) in the
  site's live sitemaps, as `sitemaps explain` answers (pipeline.explain, through the same
  connection): its sitemap file and index, or its reject reasons, and its history over the
  kept generations; an HTML page, or the CLI's `--json` answer. A bad URL is HTTP 400, a site
  with no live generation yet 404. (Declared first: a run whose id is "explain" has no tab.)

Only a user who may read the DAG's runs gets it (Airflow's own check, with the UI's session
cookie or a bearer token): the report is internal. Point `[core] plugins_folder` at this
folder (`infra/local/stack.sh` does); the api-server loads it at start.
"""

from __future__ import annotations

import html
import logging
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger("sitemaps.report_plugin")

URL_PREFIX = "/sitemaps-report"
TAB_NAME = "Sitemaps report"
URL_ROUTE = "sitemaps-report"
#: One report read (or URL explained) at a time: the S3 settings of the pipeline are per
#: process.
_LOCK = threading.Lock()
#: The longest `url` the explain route looks up (a query parameter is no place for more;
#: load itself rejects URLs longer than pipeline.limits.MAX_URL_LENGTH once encoded).
MAX_EXPLAIN_URL = 8192


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
    return 200, with_search_form(body.replace(b"</h1>", b"</h1>" + banner, 1))


def search_form(value: str = "") -> str:
    """The search box of the explain route. Its action is relative: from the report
    (`<prefix>/<dag_id>/<run_id>`) and from an answer (`<prefix>/<dag_id>/explain`) alike it
    is `<prefix>/<dag_id>/explain`, behind any path prefix of the UI."""
    return ("<form action=\"explain\" method=\"get\" role=\"search\" style=\"margin:0 0 1em;"
            "padding:.6em .8em;background:#f4f4f4;border:1px solid #ddd;border-radius:4px;"
            "font-family:system-ui,sans-serif\"><label for=\"sitemaps-explain-url\">"
            "Why is this URL (not) in the sitemaps?</label> <input id=\"sitemaps-explain-url\" "
            f"name=\"url\" type=\"text\" inputmode=\"url\" required maxlength=\"{MAX_EXPLAIN_URL}\" "
            f"value=\"{html.escape(value)}\" placeholder=\"https://www.example.com/a/page\" "
            "style=\"width:min(36em,50%);font:inherit;padding:.2em .4em\"> "
            "<button type=\"submit\" style=\"font:inherit\">Explain</button></form>")


def with_search_form(page: bytes) -> bytes:
    """`page` with the search form first in its body (the page unchanged otherwise)."""
    form = search_form().encode()
    m = re.search(rb"<body\b[^>]*>", page, re.IGNORECASE)
    if m is None:
        return form + page
    return page[:m.end()] + form + page[m.end():]


def url_problem(url: str) -> str | None:
    """Why `url` (the query parameter, as given) is no URL to look up, or None."""
    if not url.strip():
        return "Give a URL: the url parameter is empty."
    if len(url) > MAX_EXPLAIN_URL:
        return (f"The URL is {len(url):,} characters long: at most {MAX_EXPLAIN_URL:,} are looked "
                "up (no sitemap lists one that long).")
    return None


def explain_url(dag_id: str, url: str) -> tuple[int, Any]:
    """(HTTP status, pipeline.explain.Explanation) for the site of `dag_id`, or (status,
    (title, message)) when there is no answer: 400 bad input, 404 no such site or no live
    generation, 502 the state could not be read."""
    import duckdb

    from pipeline import storage
    from pipeline.errors import ConfigError, PipelineError
    from pipeline.explain import explain, normalize
    from pipeline.publish import read_live
    from pipeline.urls import Site

    site = site_for(dag_id)
    if site is None:
        return 404, ("Not a sitemaps DAG", f"{dag_id} is not a DAG of the sitemaps site "
                                           "configuration: it has no sitemaps to look in.")
    problem = url_problem(url)
    if problem:
        return 400, ("Not a URL to look up", problem)
    try:
        with _LOCK:
            storage.configure_s3(s3_settings(site))
            try:
                live = read_live(site.out).manifest
                if live is None:
                    return 404, ("No live generation yet",
                                 f"{site.out} has no live generation: {dag_id} has not "
                                 "published yet, so no URL is in its sitemaps.")
                try:  # the bad input first: what explain's own ConfigError may also say
                    normalize(url, Site.parse(live["site_url"]))
                except (ConfigError, ValueError) as exc:
                    return 400, ("Not a URL the sitemaps could list", str(exc))
                return 200, explain(site.out, url, state_uri=site.state_uri)
            finally:
                storage.configure_s3(None)
    except (PipelineError, duckdb.Error) as exc:
        log.warning("sitemaps explain of %r in %s: %s", url[:200], dag_id, exc)
        return 502, ("The URL could not be looked up", str(exc))


_EXPLAIN_CSS = (
    "body{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif;margin:2em auto;"
    "max-width:1100px;color:#222;padding:0 1em}h1{font-size:1.4em}h2{font-size:1.15em;"
    "margin-top:1.6em;border-bottom:1px solid #ddd}table{border-collapse:collapse;margin:.5em 0}"
    "td,th{padding:.25em .8em;border:1px solid #ddd;text-align:left;vertical-align:top}"
    "th{background:#f4f4f4}code{word-break:break-all}.ok{color:#060}.warn{color:#a40}"
    ".muted{color:#777}")


def _esc(value: Any) -> str:
    return "-" if value is None or value == "" else html.escape(str(value))


def _link(url: str | None) -> str:
    """A link to a public URL of the manifest (plain text unless http(s))."""
    if not url:
        return "-"
    if not url.startswith(("https://", "http://")):
        return html.escape(url)
    return f"<a href=\"{html.escape(url)}\" target=\"_blank\" rel=\"noopener\">{html.escape(url)}</a>"


def _rows(headers: Sequence[str] | None, rows: Sequence[Sequence[str]]) -> str:
    """A table of HTML cells (each escaped by the caller)."""
    head = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>" \
        if headers else ""
    return f"<table>{head}" + "".join(
        "<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows) + "</table>"


def _page(title: str, url: str, body: str) -> bytes:
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
            f"{html.escape(title)}</title><style>{_EXPLAIN_CSS}</style></head><body>"
            f"{search_form(url)}{body}</body></html>").encode()


def explain_html(url: str, status: int, answer: Any) -> bytes:
    """The page of an explain_url result: the answer, or its title and message."""
    if status != 200:
        title, text = answer
        return _page(title, url, f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>")
    a = answer
    given = "" if a.normalized == a.url else f" (given as <code>{html.escape(a.url)}</code>)"
    gen = html.escape(a.generation)
    parts = ["<h1>Why is this URL (not) in the sitemaps?</h1>",
             f"<p>URL <code>{html.escape(a.normalized)}</code>{given}, as the run normalises "
             "it.</p>"]
    listing = a.listing
    if listing is not None:
        since = (f"; unchanged since generation {_esc(a.unchanged_since)}"
                 if a.unchanged_since else "")
        parts += [f"<p class=\"ok\"><strong>Published</strong> in generation {gen} (live)"
                  + (" (other rows of it lost to it as duplicates, below)" if a.verdict ==
                     "duplicate" else "") + ".</p>",
                  _rows(None, [
                      ["sitemap file", f"{_link(listing.sitemap_url)} (section "
                                       f"{_esc(listing.section)}, shard {listing.shard})"],
                      ["listed by the index", _link(listing.index_url)],
                      ["lastmod", _esc(listing.lastmod)],
                      ["first seen", _esc(listing.first_seen)],
                      ["last changed", _esc(listing.last_changed) + since]])]
    elif a.rejects:
        parts.append(f"<p class=\"warn\"><strong>Not published</strong> in generation {gen} "
                     "(live): rejected.</p>")
    else:
        parts.append(f"<p class=\"warn\"><strong>Not published</strong> in generation {gen} "
                     "(live): not in the inventory (no row of it, in any spelling).</p>")
    if a.rejects:
        parts += ["<h2>Rows of it left out</h2>", _rows(
            ["row", "reason", "what it means", "what caused it", "URL as it came in",
             "lastmod", "changefreq", "priority"],
            [[str(r.row_id), _esc(r.reason), _esc(r.why), _esc(r.cause()),
              f"<code>{_esc(r.url)}</code>",
              _esc(r.lastmod), _esc(r.changefreq), _esc(r.priority)] for r in a.rejects])]
    parts += ["<h2>History over the kept generations (newest first)</h2>", _rows(
        ["generation", "created", "in the sitemaps", "its run's change", "sitemap file"],
        [[_esc(g.generation) + (" (live)" if g.live else ""), _esc(g.created),
          ("published" if g.published else "not published") if g.published is not None
          else "<span class=\"muted\">its state is gone</span>", _esc(g.change),
          _link(g.sitemap_url)] for g in a.history])]
    return _page(f"Sitemaps: {a.normalized}", url, "".join(parts))


def create_app() -> Any:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from fastapi import Depends, FastAPI, Query
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    app = FastAPI(title="Sitemaps run report", docs_url=None, redoc_url=None, openapi_url=None)
    may_read_runs = [Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN))]
    no_store = {"Cache-Control": "private, no-store"}

    # Before the report's route, which would take "explain" for a run id.
    @app.get("/{dag_id}/explain", dependencies=may_read_runs)
    def explain(dag_id: str, url: str = "", fmt: str = Query("html", alias="format")) -> Response:
        if fmt not in ("html", "json"):
            return HTMLResponse(_message("Unknown format", f"format={fmt}: give html or json."),
                                status_code=400, headers=no_store)
        code, answer = explain_url(dag_id, url)
        if fmt == "json":
            return JSONResponse(answer.to_dict() if code == 200 else
                                {"error": answer[0], "detail": answer[1]},
                                status_code=code, headers=no_store)
        return HTMLResponse(explain_html(url, code, answer), status_code=code, headers=no_store)

    @app.get("/{dag_id}/{run_id}", response_class=HTMLResponse, dependencies=may_read_runs)
    def report(dag_id: str, run_id: str) -> HTMLResponse:
        code, body = report_page(dag_id, run_id)
        return HTMLResponse(body, status_code=code, headers=no_store)

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
