"""The run report's charts as inline SVG: pure functions from numbers and names to an `<svg>`
element (a string), standard library only.

A plotting library cost every published run about 0.9 s (its import and three PNGs) for three
simple charts; these are a few rectangles, lines and texts, drawn in milliseconds. Each chart
scales with the page (a viewBox, width 100%), says what it shows to screen readers (role="img",
aria-label, <title>), and escapes every text: section names are user data.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

#: The viewBox's width: about the report's column, so that text is drawn near its font size.
WIDTH = 1100
FONT = 12
SMALL = 10
#: An average character's width in font sizes: SVG cannot measure text before the browser lays
#: it out, and margins must fit the labels.
CHAR_WIDTH = 0.6
TITLE_HEIGHT = 28
LEGEND_HEIGHT = 22
PANEL_GAP = 12
RIGHT_MARGIN = 16
#: Widest bar: a chart of one or two slots gets bars, not walls.
MAX_BAR = 40
#: Longer labels are cut (the full text is the label's tooltip).
MAX_LABEL = 40
GRID = "#ddd"
INK = "#222"


@dataclass(frozen=True)
class Series:
    """Values, one per x slot (category) of a chart, drawn in one color."""

    name: str
    color: str
    values: Sequence[float]


@dataclass(frozen=True)
class Rule:
    """A dashed horizontal line at a value (a limit), named in the legend."""

    name: str
    color: str
    value: float


@dataclass(frozen=True)
class Panel:
    """One plot area; the panels of a chart are stacked and share its x slots.

    kind: "bars" (grouped, one bar per series in each slot), "line", or "points" (a line with
    a marker on each value). y_top: the y axis reaches at least this (a fixed scale, such as
    125% of a limit); it goes higher when the data do, to a nice tick.
    """

    series: Sequence[Series]
    kind: Literal["bars", "line", "points"]
    y_title: str
    height: int = 240
    y_top: float = 0
    rule: Rule | None = None
    legend: bool = True


def nice_ticks(top: float, most: int = 5) -> list[int]:
    """Ticks from 0 to at least `top` at a round step (1, 2, 2.5 or 5 times a power of ten, 1 at
    least: the charts count things), at most `most` steps; [0, 1] when there is nothing."""
    if top <= 0:
        return [0, 1]
    # 1, 2, 2.5 and 5 in tenths, so that the steps stay whole numbers: 2.5 only from 25 on.
    steps = (tenths * 10**power // 10 for power in itertools.count()
             for tenths in (10, 20, 25, 50) if tenths * 10**power % 10 == 0)
    step = next(s for s in steps if s * most >= top)
    return list(range(0, math.ceil(top / step) * step + 1, step))


def number(value: float) -> str:
    """A tick or value: thousands separators; one decimal when it is not whole."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR_WIDTH


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "…"


def _label(x: float, y: float, text: str, *, size: int = FONT, anchor: str = "start",
           rotate: bool = False, bold: bool = False) -> str:
    """A text; cut when too long (the full text as its tooltip); `rotate`: read bottom up."""
    shown = _clip(text)
    where = (f'transform="translate({x:.1f},{y:.1f}) rotate(-90)"' if rotate
             else f'x="{x:.1f}" y="{y:.1f}"')
    weight = ' font-weight="bold"' if bold else ""
    tip = f"<title>{_esc(text)}</title>" if shown != text else ""
    return (f'<text {where} font-size="{size}" text-anchor="{anchor}"{weight}>{tip}'
            f"{_esc(shown)}</text>")


def _svg(alt: str, title: str, height: float, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
            f'width="100%" role="img" aria-label="{_esc(alt)}" fill="{INK}">'
            f"<title>{_esc(alt)}</title>"
            + _label(WIDTH / 2, 18, title, size=FONT + 2, anchor="middle", bold=True)
            + "".join(body) + "</svg>")


def _legend(entries: list[tuple[str, str, str]], right: float, y: float) -> list[str]:
    """(name, color, "bar" or "line" or "rule") in a row that ends at `right`."""
    widths = [18 + _text_width(_clip(name), SMALL) + 14 for name, _, _ in entries]
    x = right - sum(widths)
    out = []
    for (name, color, mark), width in zip(entries, widths, strict=True):
        if mark == "bar":
            out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="12" height="10" fill="{color}"/>')
        else:
            dash = ' stroke-dasharray="5 3"' if mark == "rule" else ""
            out.append(f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 14:.1f}" y2="{y - 4:.1f}" '
                       f'stroke="{color}" stroke-width="2"{dash}/>')
        out.append(_label(x + 18, y, name, size=SMALL))
        x += width
    return out


def _panel(panel: Panel, ticks: list[int], left: float, top: float, width: float,
           slot: float) -> list[str]:
    """The grid, y axis, series and rule of one panel whose plot area begins at (left, top)."""
    bottom = top + panel.height

    def y_of(value: float) -> float:
        return bottom - panel.height * value / ticks[-1]

    out = []
    for tick in ticks:
        y = y_of(tick)
        out.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{left + width:.1f}" y2="{y:.1f}" '
                   f'stroke="{GRID}"/>')
        out.append(_label(left - 6, y + 4, number(tick), size=SMALL, anchor="end"))
    out.append(_label(14, top + panel.height / 2, panel.y_title, size=SMALL, anchor="middle",
                      rotate=True))
    if panel.kind == "bars":
        bar = min(0.8 * slot / max(len(panel.series), 1), MAX_BAR)
        offset = (slot - bar * len(panel.series)) / 2  # the group centered in its slot
        for j, series in enumerate(panel.series):
            for i, value in enumerate(series.values):
                x, y = left + i * slot + offset + j * bar, y_of(value)
                out.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" '
                           f'height="{bottom - y:.1f}" fill="{series.color}"/>')
    else:
        for series in panel.series:
            points = [(left + (i + 0.5) * slot, y_of(v)) for i, v in enumerate(series.values)]
            out.append('<polyline class="line" fill="none" stroke-width="1.5" '
                       f'stroke="{series.color}" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y in points) + '"/>')
            if panel.kind == "points":
                out += [f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3" '
                        f'fill="{series.color}"/>' for x, y in points]
    if panel.rule:
        y = y_of(panel.rule.value)
        out.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{left + width:.1f}" y2="{y:.1f}" '
                   f'stroke="{panel.rule.color}" stroke-dasharray="5 3"/>')
    out.append(f'<line x1="{left:.1f}" y1="{bottom:.1f}" x2="{left + width:.1f}" '
               f'y2="{bottom:.1f}" stroke="{INK}"/>')
    if panel.legend:
        mark = "bar" if panel.kind == "bars" else "line"
        entries = [(s.name, s.color, mark) for s in panel.series]
        if panel.rule:
            entries.append((panel.rule.name, panel.rule.color, "rule"))
        out += _legend(entries, left + width, top - 8)
    return out


def xy_chart(alt: str, title: str, panels: Sequence[Panel], *,
             categories: Sequence[str] = (), x_title: str = "") -> str:
    """Panels stacked over shared x slots, one per value; `categories` name the slots under
    the last panel (upright when they fit, else read bottom up)."""
    slots = max((len(s.values) for p in panels for s in p.series), default=0)
    ticks = [nice_ticks(max([p.y_top, *(v for s in p.series for v in s.values)]))
             for p in panels]
    widest_tick = max(_text_width(number(t[-1]), SMALL) for t in ticks)
    left = 24 + widest_tick + 8
    width = WIDTH - left - RIGHT_MARGIN
    slot = width / max(slots, 1)
    widest_category = max((_text_width(_clip(c), SMALL) for c in categories), default=0)
    upright = widest_category + 4 <= slot
    body: list[str] = []
    y = float(TITLE_HEIGHT)
    for panel, panel_ticks in zip(panels, ticks, strict=True):
        y += LEGEND_HEIGHT
        body += _panel(panel, panel_ticks, left, y, width, slot)
        y += panel.height + PANEL_GAP
    y -= PANEL_GAP  # the last panel's bottom: its x axis
    for i, category in enumerate(categories):
        x = left + (i + 0.5) * slot
        body.append(_label(x, y + 14, category, size=SMALL, anchor="middle") if upright
                    else _label(x + SMALL / 3, y + 6, category, size=SMALL, anchor="end",
                                rotate=True))
    y += (18 if upright else widest_category + 10) if categories else 4
    if x_title:
        body.append(_label(left + width / 2, y + 14, x_title, size=SMALL, anchor="middle"))
        y += 20
    return _svg(alt, title, y + 6, body)


def hbar_chart(alt: str, title: str, labels: Sequence[str], values: Sequence[float], *,
               color: str, x_title: str) -> str:
    """One horizontal bar per label, in the given order from the top, the labels on the left."""
    row = 22
    widest_label = max((_text_width(_clip(label), FONT) for label in labels), default=0)
    left = 12 + widest_label + 8
    ticks = nice_ticks(max(values, default=0), most=8)
    # The last tick's label is centered on the plot's right edge.
    width = WIDTH - left - RIGHT_MARGIN - _text_width(number(ticks[-1]), SMALL) / 2
    top = TITLE_HEIGHT + 6
    bottom = top + row * max(len(labels), 1)
    body = []
    for tick in ticks:
        x = left + width * tick / ticks[-1]
        body.append(f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" '
                    f'stroke="{GRID}"/>')
        body.append(_label(x, bottom + 14, number(tick), size=SMALL, anchor="middle"))
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = top + i * row
        body.append(f'<rect class="bar" x="{left:.1f}" y="{y + 3:.1f}" '
                    f'width="{width * value / ticks[-1]:.1f}" height="{row - 6}" fill="{color}">'
                    f"<title>{_esc(label)}: {number(value)}</title></rect>")
        body.append(_label(left - 6, y + row / 2 + 4, label, anchor="end"))
    body.append(f'<line x1="{left:.1f}" y1="{top:.1f}" x2="{left:.1f}" y2="{bottom:.1f}" '
                f'stroke="{INK}"/>')
    body.append(_label(left + width / 2, bottom + 32, x_title, size=SMALL, anchor="middle"))
    return _svg(alt, title, bottom + 40, body)
