"""The notify step: after publish, the feed, the run report and IndexNow (CLI and DAG alike)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pipeline import manifest as manifest_model
from pipeline import storage
from pipeline.errors import ConfigError
from pipeline.layout import FEED_KEY
from pipeline.notify import report as run_report
from pipeline.notify.feed import DEFAULT_FEED_DAYS, write_feed
from pipeline.notify.indexnow import (
    INDEXNOW_ENDPOINT,
    generation_changed_urls,
    publish_indexnow_key,
    submit_indexnow,
)
from pipeline.publish import read_live, repair_root, state_files
from pipeline.taskio import Meter

if TYPE_CHECKING:
    from pipeline.context import RunContext

log = logging.getLogger(__name__)


def notify_step(ctx: RunContext, summary: dict[str, Any], *,
                indexnow_key: str | None = None, indexnow_endpoint: str | None = None,
                key_location: str | None = None, feed_days: float | None = DEFAULT_FEED_DAYS,
                report: bool = True, indexnow_first_generation: bool = False,
                meter: Meter | None = None) -> dict[str, Any]:
    """After publish: feed, run report, IndexNow; returns small counts. `meter` counts
    the snapshot's rows and files a report read.

    On an unchanged run (`summary["published"]` false) only a missing feed or
    report is written again (a lost notify converges) and nothing is submitted.
    IndexNow is off without `indexnow_key`, and skips a first generation (every
    URL is "added": the sitemaps announce them) unless `indexnow_first_generation`.
    """
    out_uri = ctx.out
    out = storage.open_storage(out_uri)
    limits = ctx.options.limits
    result: dict[str, Any] = {"generation": summary["generation"]}
    if not summary.get("published"):
        result["skipped"] = "unchanged"
        if feed_days and not out.exists(FEED_KEY):
            result["feed_entries"] = write_feed(out_uri, ctx.state, days=feed_days)["entries"]
        reports = run_report.report_prefix(out_uri, ctx.state, ctx.options.report_to)
        if report and not storage.open_storage(reports).exists(
                run_report.report_key(summary["generation"])):
            result["report"] = run_report.write_report(out_uri, limits=limits,
                                                       state_uri=ctx.state,
                                                       report_to=ctx.options.report_to,
                                                       meter=meter)
        return result

    if feed_days:
        feed = write_feed(out_uri, ctx.state, days=feed_days)
        result.update(feed_entries=feed["entries"], feed=feed["uri"])
        live = read_live(out_uri).manifest
        if live is not None:
            repair_root(out, live)  # robots-sitemaps.txt lists the feed once it exists
    if report:
        result["report"] = run_report.write_report(out_uri, limits=limits, state_uri=ctx.state,
                                                   report_to=ctx.options.report_to, meter=meter)

    if not indexnow_key:
        return result
    manifest: dict[str, Any] = dict(manifest_model.read_stored_or_skip(
        out, summary["generation"], "IndexNow") or {})
    changes = (manifest.get("state") or {}).get("changes") or (
        state_files(ctx.state, summary["generation"])["changes"] if manifest else None)
    if not manifest.get("previous") and not indexnow_first_generation:
        log.info("notify: first generation: IndexNow not told (the sitemaps list every URL)")
        result["indexnow"] = {"skipped": "first generation"}
        return result
    if not changes:
        log.warning("notify: generation %s records no changes file; IndexNow not told",
                    summary["generation"])
        result["indexnow"] = {"skipped": "no changes file"}
        return result
    host = urlsplit(ctx.site_url).netloc
    try:
        publish_indexnow_key(out_uri, indexnow_key, key_location, public_url=ctx.public_url)
    except ConfigError as exc:
        log.info("notify: the site must serve the IndexNow key file itself: %s", exc)
    key_url = key_location or f"https://{host}/{indexnow_key}.txt"
    key_folder = key_url.rpartition("/")[0] + "/"
    if not ctx.site_url.startswith(key_folder):
        log.warning("notify: the IndexNow key file %s covers only URLs below %s, not the site "
                    "%s: IndexNow will refuse them (422); serve the key at the host's root",
                    key_url, key_folder, ctx.site_url)
    result["indexnow"] = submit_indexnow(
        generation_changed_urls(changes), host=host, key=indexnow_key,
        key_location=key_location, endpoint=indexnow_endpoint or INDEXNOW_ENDPOINT)
    return result
