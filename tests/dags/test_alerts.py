"""A site's alerts in a real DAG run: `airflow dags test` of a run the reject guard refuses
sends the alert to a real SMTP server on loopback (aiosmtpd) and to a local HTTP endpoint
standing for the Slack incoming webhook, through the Airflow connections the site names.

`dags test` runs each task as a worker does (the task SDK's run, then finalize, which calls
the task's on_failure_callback once its last try failed), in the CLI's process.
"""

from __future__ import annotations

import email
import email.policy
import html
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.dags.airflow_env import free_port, new_home, requires_airflow, tail

pytestmark = [*requires_airflow, pytest.mark.integration]

SITE = "https://www.example.com/"
RUN_TIME = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
BASE_URL = "http://airflow.example.test:8080"


class Mailbox:
    """An aiosmtpd handler that keeps every message it receives."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], EmailMessage]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 OK"


@pytest.fixture
def smtp_server() -> Iterator[tuple[int, Mailbox]]:
    from aiosmtpd.controller import Controller

    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller.port, mailbox
    finally:
        controller.stop()


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local endpoint that answers as Slack's incoming webhooks do ("ok") and keeps the
    JSON bodies posted to it."""
    posted: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            posted.append({"path": self.path, "body": json.loads(body)})
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/services/T0/B0/secret", posted
    finally:
        server.shutdown()
        server.server_close()


def text_of(message: EmailMessage) -> str:
    """The mail's text as a reader sees it (the notifier sends it as HTML, in <pre>)."""
    part = message.get_body(preferencelist=("html", "plain"))
    assert part is not None, message
    content = str(part.get_content())
    assert content.startswith("<pre>") and content.endswith("</pre>"), content
    return html.unescape(content.removeprefix("<pre>").removesuffix("</pre>"))


def test_a_refused_run_alerts_by_email_and_slack(
        tmp_path: Path, airflow_db: Path, smtp_server: tuple[int, Mailbox],
        webhook: tuple[str, list[dict[str, Any]]]) -> None:
    port, mailbox = smtp_server
    webhook_url, posted = webhook
    # 10 of 100 rows are not http(s): more than the 5% the reject guard allows.
    urls = [f"{SITE}p/{i}" for i in range(90)] + [f"ftp://x.example.com/{i}" for i in range(10)]
    inventory = tmp_path / "inventory.parquet"
    pq.write_table(pa.table({"url": urls}), inventory)
    out = tmp_path / "out"
    sites = f"""
[sites.alerted]
site_url = "{SITE}"
inventory = "{inventory}"
out = "{out}"

[sites.alerted.alerts]
email = ["seo-oncall@example.com", "ops@example.com"]
smtp_conn_id = "smtp_alerts"
from_email = "sitemaps@example.com"
slack_webhook_conn_id = "slack_alerts"
"""
    env = new_home(tmp_path, airflow_db, sites, {
        "AIRFLOW_CONN_SMTP_ALERTS": json.dumps({
            "conn_type": "smtp", "host": "127.0.0.1", "port": port,
            "extra": {"disable_tls": True, "disable_ssl": True, "timeout": 10,
                      "retry_limit": 0}}),
        "AIRFLOW_CONN_SLACK_ALERTS": json.dumps({"conn_type": "slackwebhook",
                                                 "password": webhook_url}),
        "AIRFLOW__API__BASE_URL": BASE_URL,
    })

    proc = env.run("dags", "test", "sitemaps_alerted", RUN_TIME.isoformat(), timeout=300,
                   check=False)
    assert proc.returncode != 0, tail(proc.stdout)
    states = env.task_states("sitemaps_alerted")
    assert states[("load", -1)] == ("failed", 1), states
    (run_id,) = [r for (r,) in env.query(
        "SELECT run_id FROM dag_run WHERE dag_id = 'sitemaps_alerted'")]

    # One mail (load's failure; the tasks after it never ran), to both addresses.
    assert len(mailbox.messages) == 1, (mailbox.messages, tail(proc.stdout))
    mail_from, rcpt_tos, message = mailbox.messages[0]
    assert mail_from == "sitemaps@example.com"
    assert sorted(rcpt_tos) == ["ops@example.com", "seo-oncall@example.com"]
    subject = "[sitemaps] alerted: the reject guard refused the generation"
    assert message["Subject"] == subject
    mail = text_of(message)
    expected = [
        f"Site: alerted ({SITE}), DAG sitemaps_alerted",
        f"What happened: the reject guard refused the generation (task load, run {run_id})",
        "Error: TooManyRejects: 10 of 100 input rows (10.0%) were rejected (not_http: 10), "
        "more than the 5% allowed; nothing was published; the rejected rows are in "
        f"{out}.state/refused/",
        "The live sitemaps are unchanged.",
        f"To look: sitemaps status --out {out}",
        f"Task log: {BASE_URL}/dags/sitemaps_alerted/runs/",
    ]
    for line in expected:
        assert line in mail, mail

    # The same message on the Slack webhook, once.
    assert len(posted) == 1, posted
    assert posted[0]["path"] == "/services/T0/B0/secret"
    slack = posted[0]["body"]["text"]
    assert slack.startswith(f"*{subject}*\n"), slack
    for line in expected:
        assert line in slack, slack
    assert "alert (refused) sent by EmailAlert" in proc.stdout
    assert "alert (refused) sent by SlackAlert" in proc.stdout


def test_a_failed_run_alerts_through_the_default_smtp_connection(
        tmp_path: Path, airflow_db: Path, smtp_server: tuple[int, Mailbox]) -> None:
    """A missing inventory fails the run (the event `failed`): the mail goes through
    `smtp_default`, from the connection's sender, and names the task that failed."""
    port, mailbox = smtp_server
    out = tmp_path / "out"
    sites = f"""
[sites.broken]
site_url = "{SITE}"
inventory = "{tmp_path / 'missing.parquet'}"
out = "{out}"

[sites.broken.alerts]
email = ["ops@example.com"]
"""
    env = new_home(tmp_path, airflow_db, sites, {
        "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps({
            "conn_type": "smtp", "host": "127.0.0.1", "port": port,
            "extra": {"disable_tls": True, "disable_ssl": True, "retry_limit": 0,
                      "from_email": "airflow@example.com"}})})
    proc = env.run("dags", "test", "sitemaps_broken", RUN_TIME.isoformat(), timeout=300,
                   check=False)
    assert proc.returncode != 0, tail(proc.stdout)
    failed = [t for (t, _), (s, _) in env.task_states("sitemaps_broken").items()
              if s == "failed"]
    assert len(failed) == 1, tail(proc.stdout)

    assert len(mailbox.messages) == 1, (mailbox.messages, tail(proc.stdout))
    mail_from, rcpt_tos, message = mailbox.messages[0]
    assert (mail_from, rcpt_tos) == ("airflow@example.com", ["ops@example.com"])
    assert message["Subject"] == f"[sitemaps] broken: task {failed[0]} failed"
    mail = text_of(message)
    assert "What happened: task " + failed[0] + " failed (run " in mail, mail
    assert f"Error: InventoryError: inventory '{tmp_path / 'missing.parquet'}' matches no " \
        "Parquet file\n" in mail, mail
    assert f"To look: sitemaps status --out {out}\n" in mail, mail
