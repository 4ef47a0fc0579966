"""The run report: one self-contained HTML page per generation, for people.

Written beside the generation's manifest (`generations/<id>/report.html`) and,
for the live generation, as `report.html` at the output's root. It shows the
counts (input, published, rejected by reason, added, changed, removed, shards
written and reused), how full the shards are against the limits, the largest
sections, and the trend over the last generations. Charts are drawn by
matplotlib and embedded as PNG data URIs, so the page needs no server and no
other file.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pipeline import storage
from pipeline.config import Limits
from pipeline.errors import ConfigError
from pipeline.publish import GENERATIONS_FOLDER, read_live

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

REPORT_KEY = "report.html"
#: Generations the trend chart goes back at most (those whose manifest is still there).
TREND_GENERATIONS = 30
#: Sections listed in the largest-sections table and chart.
TOP_SECTIONS = 15
#: Above this many shards the fill chart shows the sorted fill curve instead of bars.
MAX_SHARD_BARS = 80

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.25em .8em;border:1px solid #ddd;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto}.warn{color:#a40}.muted{color:#777}
"""


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else html.escape(str(value))


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_n(v)}</td>" for v in row) + "</tr>" for row in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><tr>{head}</tr>{body}</table>"


def _png(fig: Figure, alt: str) -> str:
    buf = io.BytesIO()
    # Constrained layout already fits the labels; "tight" bbox would draw everything twice.
    fig.savefig(buf, format="png", dpi=100, pil_kwargs={"compress_level": 3})
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _figure(width: float, height: float) -> Figure:
    # The object API, not pyplot: no global state, safe in threads and workers.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def shard_fill_chart(sitemaps: list[dict[str, Any]], limits: Limits) -> str:
    """URLs and uncompressed bytes of each shard as a share of the limits."""
    fig = _figure(11, 4)
    ax = fig.add_subplot()
    urls = [100 * s["urls"] / limits.max_urls for s in sitemaps]
    size = [100 * s["bytes"] / limits.max_bytes for s in sitemaps]
    if len(sitemaps) <= MAX_SHARD_BARS:
        xs = range(len(sitemaps))
        ax.bar([x - 0.2 for x in xs], urls, width=0.4, label=f"URLs (limit {limits.max_urls:,})")
        ax.bar([x + 0.2 for x in xs], size, width=0.4,
               label=f"bytes (limit {limits.max_bytes:,})")
        ax.set_xticks(list(xs), [f"{s['section']}-{s['shard']}" for s in sitemaps],
                      rotation=90, fontsize=7)
        ax.set_xlabel("sitemap file (section-shard)")
    else:
        ax.plot(sorted(urls, reverse=True), label=f"URLs (limit {limits.max_urls:,})")
        ax.plot(sorted(size, reverse=True), label=f"bytes (limit {limits.max_bytes:,})")
        ax.set_xlabel(f"{len(sitemaps):,} sitemap files, fullest first")
    ax.axhline(100, color="#c00", linestyle="--", linewidth=1, label="limit")
    ax.set_ylabel("% of the limit")
    ax.set_ylim(0, 125)
    ax.set_title("Shard fill")
    ax.legend(loc="upper right", ncols=3, fontsize=8)
    return _png(fig, "Shard fill: URLs and bytes per sitemap file against the limits")


def sections(sitemaps: list[dict[str, Any]]) -> list[tuple[str, int, int, int]]:
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
    top = rows[:TOP_SECTIONS][::-1]
    fig = _figure(11, max(2.0, 0.35 * len(top) + 1))
    ax = fig.add_subplot()
    ax.barh([r[0] for r in top], [r[1] for r in top], color="#4a7")
    ax.set_xlabel("URLs")
    ax.set_title(f"Largest sections (top {len(top)} of {len(rows)})")
    return _png(fig, "Largest sections by URLs")


def trend_chart(trend: list[dict[str, Any]]) -> str:
    """Published URLs, and added/changed/removed, per generation (oldest first)."""
    fig = _figure(11, 5)
    top, bottom = fig.subplots(2, 1, sharex=True)
    labels = [t["created"].replace("T", "\n").rstrip("Z") for t in trend]
    xs = list(range(len(trend)))
    published = [t["published"] for t in trend]
    top.plot(xs, published, marker="o")
    top.set_ylabel("published URLs")
    top.set_ylim(0, max(published, default=0) * 1.15 + 1)
    top.set_title(f"Last {len(trend)} generation(s)")
    width = 0.27
    for i, (name, color) in enumerate((("added", "#4a7"), ("changed", "#47a"),
                                       ("removed", "#c54"))):
        bottom.bar([x + (i - 1) * width for x in xs], [t[name] for t in trend], width=width,
                   label=name, color=color)
    bottom.set_ylabel("URLs")
    bottom.legend(fontsize=8)
    bottom.set_xticks(xs, labels, fontsize=7)
    return _png(fig, "Trend of published URLs and changes per generation")


def trend_points(out: storage.Storage, manifest: dict[str, Any],
                 limit: int = TREND_GENERATIONS) -> list[dict[str, Any]]:
    """Counts of the generations in `manifest`'s history still stored, oldest first."""
    points = []
    for gen in (manifest.get("history") or [manifest["generation"]])[:limit]:
        if gen == manifest["generation"]:
            m = manifest
        else:
            raw = out.read_bytes_or_none(f"{GENERATIONS_FOLDER}/{gen}/manifest.json")
            if raw is None:
                continue  # garbage-collected
            m = json.loads(raw)
        c = m.get("counts", {})
        points.append({"generation": gen, "created": m["created"],
                       "published": int(c.get("published", 0)),
                       **{k: int(c.get(k, 0)) for k in ("added", "changed", "removed")}})
    return points[::-1]


def render_report(manifest: dict[str, Any], trend: list[dict[str, Any]],
                  limits: Limits | None = None) -> str:
    """The HTML page for one generation's manifest."""
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
        "<h2>Rejected rows by reason</h2>",
        _table(["reason", "rows"], sorted(rejected.items())) if rejected
        else "<p class=\"muted\">No row was rejected.</p>",
    ]
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
    parts.append("<h2>Trend</h2>")
    if trend:
        parts += [trend_chart(trend), _table(
            ["generation", "created", "published", "added", "changed", "removed"],
            [[t["generation"], t["created"], t["published"], t["added"], t["changed"],
              t["removed"]] for t in trend[::-1]])]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_generation_report(out_uri: str, generation: str | None = None, *,
                            limits: Limits | None = None) -> str:
    """Write `generations/<id>/report.html` (default: the live generation); returns its URI.

    For the live generation the same page is also written as `report.html` at the root.
    """
    out = storage.open_storage(out_uri)
    live = read_live(out_uri).manifest
    if live is None:
        raise ConfigError(f"{out_uri} has no live generation yet: nothing to report on")
    gen = generation or live["generation"]
    if gen == live["generation"]:
        manifest = live
    else:
        raw = out.read_bytes_or_none(f"{GENERATIONS_FOLDER}/{gen}/manifest.json")
        if raw is None:
            raise ConfigError(f"generation {gen} has no manifest in {out_uri}")
        manifest = json.loads(raw)
    body = render_report(manifest, trend_points(out, manifest), limits).encode("utf-8")
    key = f"{GENERATIONS_FOLDER}/{gen}/{REPORT_KEY}"
    out.write_bytes(key, body, cache_control=storage.CACHE_SHORT)
    if gen == live["generation"]:
        out.write_bytes(REPORT_KEY, body, cache_control=storage.CACHE_SHORT)
    log.info("report: %s written (%d bytes)", out.uri(key), len(body))
    return out.uri(key)


def write_report(out_uri: str, *, limits: Limits | None = None) -> str:
    """Write the live generation's report (its own and the root's); returns the root's URI.

    `limits`: the run's limits, for the fill chart (default: the protocol's).
    """
    write_generation_report(out_uri, limits=limits)
    return storage.open_storage(out_uri).uri(REPORT_KEY)
