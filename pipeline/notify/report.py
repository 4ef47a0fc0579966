"""The run report: one self-contained HTML page per generation, for people.

It is internal (reject counts, the state's paths), so it is written beside the
generation's private state, `<state>/generations/<id>/report.html`, never under
the served output (a report an older version wrote there is removed). People open
it through the DAG run's "Sitemaps report" tab in Airflow (plugins/sitemaps_report.py)
or `sitemaps report`. It shows the counts (input, published, rejected by reason,
the indexability gate's reasons marked, added, changed, removed, shards written
and reused), per-section freshness (newest lastmod, URLs changed in the last 24
hours and 7 days, from the generation's snapshot), how full the shards are
against the limits, the largest sections, and the trend of published URLs over
the kept generations. The charts are inline SVG (pipeline/notify/charts.py), so the
page needs no server and no other file.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Iterable
from typing import Any

from pipeline import manifest as manifest_model
from pipeline import sql, storage
from pipeline.config import Limits
from pipeline.errors import ConfigError, LiveStateCorrupt
from pipeline.layout import REPORT_KEY, generation_key
from pipeline.manifest import Manifest, SitemapEntry
from pipeline.notify import charts
from pipeline.publish import read_live, state_files
from pipeline.state_owner import resolve_state
from pipeline.taskio import Meter
from pipeline.w3c import parse_w3c

log = logging.getLogger(__name__)

#: Reject reasons of the indexability gate (HTTP status, canonical, robots meta): the
#: report marks them; every reason in the counts is shown, whatever its name.
GATE_REASONS = ("not_200", "not_canonical", "noindex", "redirect")
#: Generations the trend chart goes back at most (those whose manifest is still there).
TREND_GENERATIONS = 30
#: Sections listed in the largest-sections table and chart.
TOP_SECTIONS = 15
#: Above this many shards the fill chart shows the sorted fill curve instead of bars.
MAX_SHARD_BARS = 80
#: The fill chart's series, and the trend's published URLs.
URLS_COLOR = "#1f77b4"
BYTES_COLOR = "#ff7f0e"

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.25em .8em;border:1px solid #ddd;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
svg{display:block;max-width:100%;height:auto;margin:.5em 0}.warn{color:#a40}.muted{color:#777}
"""


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else html.escape(str(value))


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_n(v)}</td>" for v in row) + "</tr>" for row in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><tr>{head}</tr>{body}</table>"


def shard_fill_chart(sitemaps: list[SitemapEntry], limits: Limits) -> str:
    """URLs and uncompressed bytes of each shard as a share of the limits."""
    urls = [100 * s["urls"] / limits.max_urls for s in sitemaps]
    size = [100 * s["bytes"] / limits.max_bytes for s in sitemaps]
    urls_name = f"URLs (limit {limits.max_urls:,})"
    size_name = f"bytes (limit {limits.max_bytes:,})"
    alt = "Shard fill: URLs and bytes per sitemap file against the limits"
    limit = charts.Rule("limit", "#c00", 100)
    if len(sitemaps) <= MAX_SHARD_BARS:
        bars = charts.Panel([charts.Series(urls_name, URLS_COLOR, urls),
                             charts.Series(size_name, BYTES_COLOR, size)],
                            "bars", "% of the limit", y_top=125, rule=limit)
        return charts.xy_chart(alt, "Shard fill", [bars],
                               categories=[f"{s['section']}-{s['shard']}" for s in sitemaps],
                               x_title="sitemap file (section-shard)")
    lines = charts.Panel([charts.Series(urls_name, URLS_COLOR, sorted(urls, reverse=True)),
                          charts.Series(size_name, BYTES_COLOR, sorted(size, reverse=True))],
                         "line", "% of the limit", y_top=125, rule=limit)
    return charts.xy_chart(alt, "Shard fill", [lines],
                           x_title=f"{len(sitemaps):,} sitemap files, fullest first")


def sections(sitemaps: list[SitemapEntry]) -> list[tuple[str, int, int, int]]:
    """(section, URLs, files, uncompressed bytes), largest first."""
    acc: dict[str, list[int]] = {}
    for s in sitemaps:
        a = acc.setdefault(s["section"], [0, 0, 0])
        a[0] += s["urls"]
        a[1] += 1
        a[2] += s["bytes"]
    rows = [(k, v[0], v[1], v[2]) for k, v in acc.items()]
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def sections_chart(rows: list[tuple[str, int, int, int]]) -> str:
    top = rows[:TOP_SECTIONS]
    return charts.hbar_chart("Largest sections by URLs",
                             f"Largest sections (top {len(top)} of {len(rows)})",
                             [r[0] for r in top], [r[1] for r in top], color="#4a7",
                             x_title="URLs")


def trend_chart(trend: list[dict[str, Any]]) -> str:
    """Published URLs, and added/changed/removed, per generation (oldest first)."""
    published = charts.Panel([charts.Series("published URLs", URLS_COLOR,
                                            [t["published"] for t in trend])],
                             "points", "published URLs", height=180, legend=False)
    changes = charts.Panel([charts.Series(name, color, [t[name] for t in trend])
                            for name, color in (("added", "#4a7"), ("changed", "#47a"),
                                                ("removed", "#c54"))],
                           "bars", "URLs", height=180)
    return charts.xy_chart("Trend of published URLs and changes per generation",
                           f"Last {len(trend)} generation(s)", [published, changes],
                           categories=[t["created"].replace("T", " ").rstrip("Z")
                                       for t in trend])


def trend_points(out: storage.Storage, manifest: Manifest,
                 limit: int = TREND_GENERATIONS) -> list[dict[str, Any]]:
    """Counts of the generations in `manifest`'s history still stored, oldest first."""
    points = []
    for gen in (manifest.get("history") or [manifest["generation"]])[:limit]:
        if gen == manifest["generation"]:
            m = manifest
        else:
            stored = manifest_model.read_stored_or_skip(out, gen, "the report's trend")
            if stored is None:
                continue  # garbage-collected (or broken)
            m = stored
        c = m.get("counts", {})
        points.append({"generation": gen, "created": m["created"],
                       "published": int(c.get("published", 0)),
                       **{k: int(c.get(k, 0)) for k in ("added", "changed", "removed")}})
    return points[::-1]


def report_key(generation: str) -> str:
    """Where a generation's report is, below the state prefix."""
    return generation_key(generation, REPORT_KEY)


def freshness(snapshot_uri: str, at: str, meter: Meter | None = None
              ) -> list[tuple[str, int, str, int, int]] | None:
    """(section, URLs, newest lastmod, changed in 24 h, changed in 7 days) per section of a
    generation's snapshot, largest first; None when the snapshot cannot be read
    (garbage-collected). From the snapshot's footer, where the state step summed them
    (pipeline.snapshot.Freshness); a snapshot without them there (an earlier version's) is
    scanned (sql/report_freshness.sql). `meter` counts what was read."""
    from pipeline.parquet import register_parquet
    from pipeline.snapshot import freshness_of

    store, key = storage.open_file(snapshot_uri)
    if not store.exists(key):
        return None
    meter = meter or Meter()
    recorded = freshness_of(snapshot_uri, at)
    meter.read(files=1)
    if recorded is not None:
        rows = sorted(map(tuple, recorded), key=lambda r: (-r[1], r[0]))
    else:
        log.info("report: %s holds no freshness (an earlier version wrote it): scanning its "
                 "rows", snapshot_uri)
        con = sql.connect()
        try:
            register_parquet(con, "report_snapshot", [snapshot_uri])
            rows = con.execute(sql.load_sql("report_freshness"),
                               {"at": parse_w3c(at)}).fetchall()
        finally:
            con.close()
        meter.read(rows=sum(int(r[1]) for r in rows))
    return [(str(s), int(n), str(t or ""), int(d1), int(d7)) for s, n, t, d1, d7 in rows]


def _freshness_table(manifest: Manifest, fresh: list[tuple[str, int, str, int, int]] | None
                     ) -> str:
    if fresh is None:  # the snapshot is gone: the newest lastmod per section from the manifest
        newest: dict[str, str] = {}
        for s in manifest.get("sitemaps", []):
            lastmod = s.get("lastmod")
            if lastmod and lastmod > newest.get(s["section"], ""):
                newest[s["section"]] = lastmod
        return ("<p class=\"muted\">The generation's snapshot is gone: newest lastmod only "
                "(from the manifest).</p>" + _table(["section", "newest lastmod"],
                                                     sorted(newest.items()), "freshness"))
    total = ("all sections", sum(r[1] for r in fresh), max((r[2] for r in fresh), default=""),
             sum(r[3] for r in fresh), sum(r[4] for r in fresh))
    return (f"<p>URLs whose lastmod is within 24 hours and 7 days before the generation's "
            f"time ({html.escape(manifest['created'])}).</p>" + _table(
                ["section", "URLs", "newest lastmod", "changed in 24 h", "changed in 7 days"],
                [total, *fresh], "freshness"))


def _rejects_table(counts: dict[str, Any]) -> str:
    rejected = {k: int(v) for k, v in (counts.get("rejected") or {}).items() if v}
    if not rejected:
        return "<p class=\"muted\">No row was rejected.</p>"
    total = int(counts.get("input_rows") or 0)
    rows = [(reason, n, f"{n / total:.2%}" if total else "",
             "indexability gate" if reason in GATE_REASONS else "URL rules")
            for reason, n in sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))]
    return _table(["reason", "rows", "share of input", "check"], rows, "rejects")


def render_report(manifest: Manifest, trend: list[dict[str, Any]],
                  limits: Limits | None = None,
                  fresh: list[tuple[str, int, str, int, int]] | None = None) -> str:
    """The HTML page for one generation's manifest; `fresh`: its per-section freshness
    (`freshness`), None when its snapshot is gone."""
    limits = limits or Limits()
    c = manifest.get("counts", {})
    sitemaps = manifest.get("sitemaps", [])
    esc = html.escape
    rejected = c.get("rejected") or {}
    counts = [
        ("input rows", c.get("input_rows", "")), ("published URLs", c.get("published", "")),
        ("rejected rows", c.get("rejected_rows", sum(rejected.values()))),
        ("added", c.get("added", "")), ("changed", c.get("changed", "")),
        ("removed", c.get("removed", "")), ("unchanged", c.get("unchanged", "")),
        ("sitemap files", c.get("sitemaps", len(sitemaps))),
        ("shards written", c.get("shards_written", "")),
        ("shards reused", c.get("shards_reused", "")),
        ("shards removed", c.get("shards_removed", "")),
        ("gzipped bytes written", c.get("bytes_written", "")),
    ]
    section_rows = sections(sitemaps)
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>Sitemaps report: generation {esc(manifest['generation'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Sitemaps report: generation {esc(manifest['generation'])}</h1>",
        f"<p>Created {esc(manifest['created'])} for <a href=\"{esc(manifest['site_url'])}\">"
        f"{esc(manifest['site_url'])}</a>; previous generation "
        f"{esc(manifest.get('previous') or 'none')}.</p>",
        "<p>Root index: " + ", ".join(f"<a href=\"{esc(i['url'])}\">{esc(i['url'])}</a>"
                                      for i in manifest.get("indexes", [])) + "</p>",
        "<h2>Counts</h2>", _table(["", "count"], counts, "counts"),
        "<h2>Rejected rows by reason</h2>", _rejects_table(c),
        "<h2>Freshness by section</h2>", _freshness_table(manifest, fresh),
    ]
    if manifest.get("rollback"):
        rb = manifest["rollback"]
        parts.insert(6, f"<p class=\"warn\">Made live again by a rollback from generation "
                        f"{esc(str(rb.get('from')))} at {esc(str(rb.get('at')))}.</p>")
    dropped = {k: v for k, v in (c.get("dropped_fields") or {}).items() if v}
    if dropped:
        parts += ["<p>Fields dropped (row kept):</p>",
                  _table(["field issue", "rows"], sorted(dropped.items()))]
    if manifest.get("warnings"):
        parts.append("<h2>Warnings</h2><ul>" + "".join(
            f"<li class=\"warn\">{esc(w)}</li>" for w in manifest["warnings"]) + "</ul>")
    parts.append("<h2>Shard fill</h2>")
    if sitemaps:
        fullest = max(max(s["urls"] / limits.max_urls, s["bytes"] / limits.max_bytes)
                      for s in sitemaps)
        parts += [f"<p>{len(sitemaps):,} sitemap file(s); the fullest is at {fullest:.0%} of a "
                  f"limit ({limits.max_urls:,} URLs, {limits.max_bytes:,} bytes "
                  "uncompressed).</p>", shard_fill_chart(sitemaps, limits)]
        parts += ["<h2>Largest sections</h2>", sections_chart(section_rows),
                  _table(["section", "URLs", "files", "bytes (uncompressed)"],
                         section_rows[:TOP_SECTIONS])]
    parts.append("<h2>Trend over the kept generations</h2>")
    if trend:
        parts += [trend_chart(trend), _table(
            ["generation", "created", "published", "added", "changed", "removed"],
            [[t["generation"], t["created"], t["published"], t["added"], t["changed"],
              t["removed"]] for t in trend[::-1]])]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def report_prefix(out_uri: str, state_uri: str | None = None, report_to: str | None = None
                  ) -> str:
    """Where reports go: `report_to` (`--report-to`, `report_to` in the site TOML), else the
    state prefix (pipeline.state_owner.resolve_state when not given)."""
    return report_to or resolve_state(out_uri, state_uri)


def write_generation_report(out_uri: str, generation: str | None = None, *,
                            limits: Limits | None = None, state_uri: str | None = None,
                            report_to: str | None = None, meter: Meter | None = None) -> str:
    """Write the report of `generation` (default: the live one) under the state prefix,
    `<state>/generations/<id>/report.html` (or under `report_to`); returns its URI.

    `state_uri`: the run's `--state` (resolve_state when not given), where the snapshot is.
    A copy an older version wrote under the served output is removed.
    """
    out = storage.open_storage(out_uri)
    state_uri = resolve_state(out_uri, state_uri)
    target = report_prefix(out_uri, state_uri, report_to)
    live = read_live(out_uri).manifest
    if live is None:
        raise ConfigError(f"{out_uri} has no live generation yet: nothing to report on")
    gen = generation or live["generation"]
    if gen == live["generation"]:
        manifest = live
    else:
        try:
            stored = manifest_model.read_stored(out, gen)
        except LiveStateCorrupt as exc:
            raise ConfigError(f"cannot report on generation {gen}: {exc}") from None
        if stored is None:
            raise ConfigError(f"generation {gen} has no manifest in {out_uri}")
        manifest = stored
    fresh = freshness(state_files(state_uri, gen)["snapshot"], manifest["created"], meter)
    body = render_report(manifest, trend_points(out, manifest), limits, fresh).encode("utf-8")
    state = storage.open_storage(target)
    state.write_bytes(report_key(gen), body, cache_control="private, no-store")
    # Reports used to be served: one there would show reject counts to anyone.
    out.delete([k for k in (REPORT_KEY, report_key(gen)) if out.exists(k)])
    log.info("report: %s written (%d bytes)", state.uri(report_key(gen)), len(body))
    return state.uri(report_key(gen))


def write_report(out_uri: str, *, limits: Limits | None = None,
                 state_uri: str | None = None, report_to: str | None = None,
                 meter: Meter | None = None) -> str:
    """Write the live generation's report; returns its URI (under the state prefix).

    `limits`: the run's limits, for the fill chart (default: the protocol's); `meter`
    counts the snapshot's rows and files read.
    """
    return write_generation_report(out_uri, limits=limits, state_uri=state_uri,
                                   report_to=report_to, meter=meter)


def read_report(out_uri: str, generation: str, *, state_uri: str | None = None,
                report_to: str | None = None, limits: Limits | None = None,
                write_missing: bool = True) -> bytes | None:
    """The report of `generation`, written first when missing (and `write_missing`); None
    when there is none (a generation whose manifest is gone)."""
    state_uri = resolve_state(out_uri, state_uri)
    where = storage.open_storage(report_prefix(out_uri, state_uri, report_to))
    body = where.read_bytes_or_none(report_key(generation))
    if body is None and write_missing:
        try:
            write_generation_report(out_uri, generation, state_uri=state_uri, limits=limits,
                                    report_to=report_to)
        except ConfigError:
            return None
        body = where.read_bytes_or_none(report_key(generation))
    return body
