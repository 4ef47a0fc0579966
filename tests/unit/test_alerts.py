"""A site's alerts: the site file's table, and the message of each event (plain Python)."""

from __future__ import annotations

import pytest

from pipeline.alerts import EVENTS, Alerts, Failure, alert_for, event_of, parse_alerts
from pipeline.errors import (
    ConfigError,
    InventoryError,
    ServedCopyWrong,
    ShrinkRefused,
    TooManyRejects,
)
from pipeline.sites import parse_sites

BASE = {"site_url": "https://www.example.com/", "inventory": "s3://inv/www/",
        "out": "s3://sitemaps/www/"}


def site(alerts: dict | None = None, **keys: object):
    block = {**BASE, **keys, **({"alerts": alerts} if alerts is not None else {})}
    (s,) = parse_sites({"sites": {"www": block}})
    return s


class AirflowFail(Exception):
    """Stands for the AirflowFailException that orchestration.step raises from a
    TerminalError (`raise ... from exc`)."""


def wrapped(exc: Exception) -> Exception:
    try:
        try:
            raise exc
        except Exception as inner:
            raise AirflowFail(str(inner)) from inner
    except AirflowFail as outer:
        return outer


def test_a_site_without_alerts_has_none() -> None:
    s = site()
    assert s.alerts is None
    assert alert_for(s, Failure("load", "r1", InventoryError("missing"))) is None


def test_the_table_and_its_defaults() -> None:
    s = site({"email": ["ops@example.com", "seo@shop.example.co.uk"]})
    assert s.alerts == Alerts(email=("ops@example.com", "seo@shop.example.co.uk"),
                              smtp_conn_id="smtp_default", events=EVENTS)
    s = site({"slack_webhook_conn_id": "slack_seo", "events": ["refused"],
              "email": "ops@example.com", "smtp_conn_id": "smtp_ops",
              "from_email": "sitemaps@example.com"})
    assert s.alerts == Alerts(email=("ops@example.com",), smtp_conn_id="smtp_ops",
                              from_email="sitemaps@example.com",
                              slack_webhook_conn_id="slack_seo", events=("refused",))


def test_defaults_alerts_apply_to_every_site_and_a_site_refines_them() -> None:
    a, b = parse_sites({
        "defaults": {"alerts": {"email": ["ops@example.com"]}},
        "sites": {"a": BASE, "b": {**BASE, "out": "s3://sitemaps/b/",
                                   "alerts": {"events": ["served_copy_wrong"]}}}})
    assert a.alerts == Alerts(email=("ops@example.com",))
    assert b.alerts == Alerts(email=("ops@example.com",), events=("served_copy_wrong",))


@pytest.mark.parametrize("table, message", [
    ({"emails": ["ops@example.com"]}, "unknown alerts keys ['emails']"),
    ({"email": ["ops at example.com"]}, "'ops at example.com' is not an e-mail address"),
    ({"email": ["Ops <ops@example.com>"]}, "is not an e-mail address"),
    ({"email": ["a@example.com, b@example.com"]}, "is not an e-mail address"),
    ({"email": [3]}, "3 is not an e-mail address"),
    ({"email": {"to": "ops@example.com"}}, "alerts.email must be a list"),
    ({"email": ["ops@example.com"], "events": ["failure"]}, "unknown alerts events ['failure']"),
    ({"email": ["ops@example.com"], "events": []}, "alerts.events must be a non-empty list"),
    ({"email": ["ops@example.com"], "from_email": "sitemaps"}, "alerts.from_email: 'sitemaps'"),
    ({"email": ["ops@example.com"], "smtp_conn_id": ""}, "alerts.smtp_conn_id must be a non-"),
    ({"slack_webhook_conn_id": 1}, "alerts.slack_webhook_conn_id must be a non-empty string"),
    ({}, "alerts tell no one"),
    ({"email": []}, "alerts tell no one"),
])
def test_mistakes_are_config_errors_that_name_the_site(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=r"\[sites\.www\]") as exc:
        site(table)
    assert message in str(exc.value)


def test_an_alerts_key_that_is_no_table_is_refused() -> None:
    with pytest.raises(ConfigError, match="alerts must be a table"):
        parse_alerts("[sites.www]", "ops@example.com")


def test_each_error_is_its_event_also_behind_airflows_exception() -> None:
    assert event_of(wrapped(ShrinkRefused("x"))) == "refused"
    assert event_of(wrapped(TooManyRejects("x"))) == "refused"
    assert event_of(ServedCopyWrong("x")) == "served_copy_wrong"  # raised as is: retried
    assert event_of(wrapped(InventoryError("x"))) == "failed"
    assert event_of(KeyError("x")) == "failed"
    assert event_of("Task was killed") == "failed"
    assert event_of(None) == "failed"


def test_the_reject_guard_message_names_the_site_what_happened_and_the_command() -> None:
    s = site({"email": ["ops@example.com"]})
    error = wrapped(TooManyRejects(
        "10 of 100 input rows (10.0%) were rejected (not_http: 10), more than the 5% allowed; "
        "nothing was published; the rejected rows are in s3://sitemaps/www.state/refused/g1/"
        "rejects.parquet; fix the inventory or raise --max-reject-share"))
    alert = alert_for(s, Failure("load", "manual__2026-12-01T03:00:00+00:00", error,
                                 log_url="http://airflow.example.com/dags/sitemaps_www/runs/"
                                         "manual__2026-12-01T03%3A00%3A00%2B00%3A00/tasks/load"))
    assert alert is not None and alert.event == "refused"
    assert alert.subject == "[sitemaps] www: the reject guard refused the generation"
    assert alert.text == (
        "Site: www (https://www.example.com/), DAG sitemaps_www\n"
        "What happened: the reject guard refused the generation (task load, run "
        "manual__2026-12-01T03:00:00+00:00)\n"
        "Error: TooManyRejects: 10 of 100 input rows (10.0%) were rejected (not_http: 10), more "
        "than the 5% allowed; nothing was published; the rejected rows are in "
        "s3://sitemaps/www.state/refused/g1/rejects.parquet; fix the inventory or raise "
        "--max-reject-share\n"
        "The live sitemaps are unchanged.\n"
        "To look: sitemaps status --out s3://sitemaps/www/\n"
        "Task log: http://airflow.example.com/dags/sitemaps_www/runs/"
        "manual__2026-12-01T03%3A00%3A00%2B00%3A00/tasks/load\n")


def test_the_shrink_guard_message() -> None:
    s = site({"email": ["ops@example.com"]}, state="s3://private/www state")
    alert = alert_for(s, Failure("publish", "scheduled__x", wrapped(ShrinkRefused(
        "the new generation would publish 600 URLs against 3,000 live (80.0% fewer, more "
        "than the 10% allowed); the live generation stays; check the inventory, or pass "
        "--allow-shrink"))))
    assert alert is not None
    assert alert.subject == "[sitemaps] www: the shrink guard refused the generation"
    assert "Error: ShrinkRefused: the new generation would publish 600 URLs" in alert.text
    # The site's own state is passed on (quoted for a shell).
    assert "To look: sitemaps status --out s3://sitemaps/www/ --state 's3://private/www state'\n" \
        in alert.text
    assert "Task log" not in alert.text


def test_the_served_copy_message_names_verify_and_the_report() -> None:
    s = site({"slack_webhook_conn_id": "slack_seo"}, verify_url="https://www.example.com/")
    alert = alert_for(s, Failure(
        "verify", "r1", ServedCopyWrong("the served copy at https://www.example.com/ has 2 "
                                        "problem(s), the first: robots.txt names no index"),
        report_url="http://airflow.example.com/sitemaps-report/sitemaps_www/r1"))
    assert alert is not None and alert.event == "served_copy_wrong"
    assert alert.subject == ("[sitemaps] www: the served copy does not match the published "
                             "generation")
    assert "Error: ServedCopyWrong: the served copy at https://www.example.com/ has 2" in alert.text
    assert "The generation is live, but crawlers do not get it as published.\n" in alert.text
    assert ("To look: sitemaps verify --out s3://sitemaps/www/ --site-url "
            "https://www.example.com/\n") in alert.text
    assert "Run report: http://airflow.example.com/sitemaps-report/sitemaps_www/r1\n" in alert.text


def test_any_other_failure_says_which_task_and_the_errors_first_line() -> None:
    s = site({"email": ["ops@example.com"]})
    error = OSError("connection reset by peer\nTraceback (most recent call last): ...")
    alert = alert_for(s, Failure("render", "r1", error, map_index=3,
                                 report_url="http://a/sitemaps-report/sitemaps_www/r1"))
    assert alert is not None and alert.event == "failed"
    assert alert.subject == "[sitemaps] www: task render[3] failed"
    assert "What happened: task render[3] failed (run r1)\n" in alert.text
    assert "Error: OSError: connection reset by peer\n" in alert.text
    assert "To look: sitemaps status --out s3://sitemaps/www/\n" in alert.text
    assert "Run report" not in alert.text  # a failed run made no report
    # A TerminalError is named by its own class, not Airflow's that carries it.
    missing = alert_for(s, Failure("load", "r1", wrapped(InventoryError(
        "inventory 's3://inv/www/' matches no Parquet file"))))
    assert missing is not None and missing.subject == "[sitemaps] www: task load failed"
    assert "Error: InventoryError: inventory 's3://inv/www/' matches no Parquet file\n" in \
        missing.text
    long = alert_for(s, Failure("load", "r1", "x" * 5000))
    assert long is not None and "Error: " + "x" * 597 + "...\n" in long.text


def test_a_site_is_told_only_of_its_events() -> None:
    s = site({"email": ["ops@example.com"], "events": ["refused", "served_copy_wrong"]})
    assert alert_for(s, Failure("load", "r1", wrapped(InventoryError("missing")))) is None
    assert alert_for(s, Failure("load", "r1", wrapped(TooManyRejects("x")))) is not None
    assert alert_for(s, Failure("verify", "r1", ServedCopyWrong("x"))) is not None
