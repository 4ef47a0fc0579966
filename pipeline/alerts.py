"""A site's alerts: who is told when its DAG run fails, and what the message says.

The site file's `[sites.<name>.alerts]` table (`parse_alerts`) names the recipients (e-mail
through an Airflow SMTP connection, a Slack incoming webhook through an Airflow connection)
and the events they hear of (`EVENTS`). When a task of the site's DAG fails,
`pipeline.orchestration` hands the failure to `alert_for`, which classifies it and writes
the message: which site, what happened (the task, the error's class and first line), the
run, and the one command that shows the state of things. Plain Python: the Airflow side
(the providers' SmtpNotifier and SlackWebhookNotifier) is in pipeline.orchestration.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Protocol

from pipeline.errors import (
    ConfigError,
    PipelineError,
    ServedCopyWrong,
    ShrinkRefused,
    TooManyRejects,
)

#: The events a site's alerts may be told of (all of them by default):
#: `failed`: a task failed for any other reason (after its last retry);
#: `refused`: the shrink guard (publish) or the reject guard (load) refused the generation;
#: `served_copy_wrong`: the verify task found the served copy not as published.
EVENTS = ("failed", "refused", "served_copy_wrong")
#: The Airflow connection the mails go through when the table names none (the SMTP
#: provider's default connection).
DEFAULT_SMTP_CONN_ID = "smtp_default"
_KEYS = ("email", "smtp_conn_id", "from_email", "slack_webhook_conn_id", "events")
#: An address as a mail header can carry it: no spaces, commas, angle brackets or quotes;
#: one @, with a domain of dotted labels.
_ADDRESS = re.compile(r"[^\s@,;<>\"()]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*")
#: The longest error line a message quotes (a message stays readable in a Slack channel).
MAX_ERROR_CHARS = 600


@dataclass(frozen=True)
class Alerts:
    """Who a site's alerts go to, and of which events."""

    email: tuple[str, ...] = ()
    smtp_conn_id: str = DEFAULT_SMTP_CONN_ID
    #: The sender; None: the SMTP connection's `from_email` extra.
    from_email: str | None = None
    slack_webhook_conn_id: str | None = None
    events: tuple[str, ...] = EVENTS


def _text(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: alerts.{key} must be a non-empty string, not {value!r}")
    return value


def _address(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise ConfigError(f"{where}: alerts.{key}: {value!r} is not an e-mail address "
                          "(name@example.com)")
    return value


def parse_alerts(where: str, table: Any) -> Alerts:
    """The `alerts` table of a site block, checked; ConfigError naming the site otherwise."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: alerts must be a table ([sites.<name>.alerts])")
    unknown = set(table) - set(_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown alerts keys {sorted(unknown)}; allowed: "
                          f"{sorted(_KEYS)}")
    email = table.get("email", [])
    if isinstance(email, str):  # one address
        email = [email]
    if not isinstance(email, list):
        raise ConfigError(f"{where}: alerts.email must be a list of e-mail addresses")
    events = table.get("events", list(EVENTS))
    if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
        raise ConfigError(f"{where}: alerts.events must be a non-empty list of {list(EVENTS)}")
    wrong = sorted(set(events) - set(EVENTS))
    if wrong:
        raise ConfigError(f"{where}: unknown alerts events {wrong}; allowed: {list(EVENTS)}")
    alerts = Alerts(
        email=tuple(_address(where, "email", a) for a in email),
        smtp_conn_id=_text(where, "smtp_conn_id", table.get("smtp_conn_id",
                                                            DEFAULT_SMTP_CONN_ID)),
        from_email=(_address(where, "from_email", table["from_email"])
                    if "from_email" in table else None),
        slack_webhook_conn_id=(_text(where, "slack_webhook_conn_id",
                                     table["slack_webhook_conn_id"])
                               if "slack_webhook_conn_id" in table else None),
        events=tuple(e for e in EVENTS if e in events))
    if not alerts.email and not alerts.slack_webhook_conn_id:
        raise ConfigError(f"{where}: alerts tell no one: give alerts.email or "
                          "alerts.slack_webhook_conn_id (or remove the alerts table)")
    return alerts


class AlertSite(Protocol):
    """What a message says of the site (a pipeline.sites.SiteConfig)."""

    @property
    def name(self) -> str: ...
    @property
    def dag_id(self) -> str: ...
    @property
    def site_url(self) -> str: ...
    @property
    def out(self) -> str: ...
    @property
    def state(self) -> str | None: ...
    @property
    def verify_url(self) -> str | None: ...
    @property
    def alerts(self) -> Alerts | None: ...


@dataclass(frozen=True)
class Failure:
    """A failed task of a site's DAG run, as Airflow's failure callback sees it."""

    task_id: str
    run_id: str
    #: What the task raised (Airflow passes the exception, or sometimes only a text).
    error: BaseException | str | None
    map_index: int = -1
    #: The task's log in the Airflow UI.
    log_url: str | None = None
    #: The run's report (the "Sitemaps report" tab), for a run that published.
    report_url: str | None = None


@dataclass(frozen=True)
class Alert:
    event: str
    subject: str
    text: str


def cause(error: BaseException | str | None) -> BaseException | str | None:
    """The pipeline's own error behind `error`: a TerminalError reaches Airflow wrapped in an
    AirflowFailException (`raise ... from exc`), so the chain is followed to it."""
    seen: BaseException | None = error if isinstance(error, BaseException) else None
    while seen is not None:
        if isinstance(seen, PipelineError):
            return seen
        seen = seen.__cause__
    return error


def event_of(error: BaseException | str | None) -> str:
    """The event a task's error is: one of EVENTS."""
    found = cause(error)
    if isinstance(found, ServedCopyWrong):
        return "served_copy_wrong"
    if isinstance(found, ShrinkRefused | TooManyRejects):
        return "refused"
    return "failed"


def _what(error: BaseException | str | None, task: str) -> str:
    found = cause(error)
    if isinstance(found, ShrinkRefused):
        return "the shrink guard refused the generation"
    if isinstance(found, TooManyRejects):
        return "the reject guard refused the generation"
    if isinstance(found, ServedCopyWrong):
        return "the served copy does not match the published generation"
    return f"task {task} failed"


def _error_line(error: BaseException | str | None) -> str:
    """`Class: first line of the message` of the error (its pipeline cause, if any)."""
    found = cause(error)
    if found is None:
        return "no error was recorded"
    if isinstance(found, str):
        message, name = found, ""
    else:
        message, name = str(found), type(found).__name__
    line = next((x.strip() for x in message.splitlines() if x.strip()), "")
    if len(line) > MAX_ERROR_CHARS:
        line = line[:MAX_ERROR_CHARS - 3] + "..."
    return f"{name}: {line}" if name and line else name or line


def look_command(site: AlertSite, event: str) -> str:
    """The one command that shows what an operator needs to see first."""
    if event == "served_copy_wrong":
        args = ["sitemaps", "verify", "--out", site.out, "--site-url",
                site.verify_url or site.site_url]
    else:  # the live generation (unchanged by a failed or refused run), its files checked
        args = ["sitemaps", "status", "--out", site.out]
        if site.state:
            args += ["--state", site.state]
    return shlex.join(args)


def alert_for(site: AlertSite, failure: Failure) -> Alert | None:
    """The alert of a failed task, or None when the site's alerts are not told of its event."""
    if site.alerts is None:
        return None
    event = event_of(failure.error)
    if event not in site.alerts.events:
        return None
    task = failure.task_id if failure.map_index < 0 else \
        f"{failure.task_id}[{failure.map_index}]"
    what = _what(failure.error, task)
    after = ("The generation is live, but crawlers do not get it as published." if
             event == "served_copy_wrong" else "The live sitemaps are unchanged.")
    lines = [
        f"Site: {site.name} ({site.site_url}), DAG {site.dag_id}",
        f"What happened: {what} ({'' if event == 'failed' else f'task {task}, '}"
        f"run {failure.run_id})",
        f"Error: {_error_line(failure.error)}",
        after,
        f"To look: {look_command(site, event)}",
    ]
    if failure.log_url:
        lines.append(f"Task log: {failure.log_url}")
    if failure.report_url and event == "served_copy_wrong":
        lines.append(f"Run report: {failure.report_url}")
    return Alert(event=event, subject=f"[sitemaps] {site.name}: {what}",
                 text="\n".join(lines) + "\n")
