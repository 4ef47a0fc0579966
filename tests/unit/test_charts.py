"""The report's SVG charts: well-formed whatever the names and numbers, escaped, nice ticks."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pipeline.notify.charts import Panel, Rule, Series, hbar_chart, nice_ticks, number, xy_chart

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = 'a<b & "c" </svg><script>alert(1)</script>'


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # raises on anything not well-formed
    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    assert root.get("width") == "100%" and root.get("viewBox", "").startswith("0 0 ")
    assert root.findtext(f"{SVG}title") == root.get("aria-label")
    return root


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_a_hostile_section_name_is_text_not_markup() -> None:
    bars = hbar_chart(f"alt {HOSTILE}", f"title {HOSTILE}", [HOSTILE, "blog"], [3, 1],
                      color="#4a7", x_title="URLs")
    columns = xy_chart("alt", "title", [Panel([Series(HOSTILE, "#47a", [1.0])], "bars", "y")],
                       categories=[HOSTILE], x_title=HOSTILE)
    for svg in (bars, columns):
        assert "<script" not in svg and "<b " not in svg
        root = parse(svg)
        assert not list(root.iter(f"{SVG}script"))
        assert any(HOSTILE in t for t in texts(root))  # as typed (cut, its tooltip whole)
    root = parse(bars)
    assert root.get("aria-label") == f"alt {HOSTILE}"
    assert [b.findtext(f"{SVG}title") for b in root.iter(f"{SVG}rect")] == [f"{HOSTILE}: 3",
                                                                            "blog: 1"]


def test_a_long_label_is_cut_with_its_full_text_as_tooltip() -> None:
    name = "x" * 100
    root = parse(hbar_chart("alt", "title", [name], [1], color="#4a7", x_title="URLs"))
    label = next(t for t in root.iter(f"{SVG}text") if t.find(f"{SVG}title") is not None)
    assert label.findtext(f"{SVG}title") == name
    assert "".join(label.itertext()).endswith("x…") and len(label.text or "") < 60


@pytest.mark.parametrize("kind", ["bars", "line", "points"])
@pytest.mark.parametrize("values", [[], [0], [0, 0], [7], [3, 1_234_567]])
def test_empty_zero_and_single_values_draw(kind: str, values: list[float]) -> None:
    panel = Panel([Series("a", "#4a7", values), Series("b", "#47a", values)], kind,
                  "y", rule=Rule("limit", "#c00", 1))
    svg = xy_chart("alt", "title", [panel], categories=[str(v) for v in values])
    root = parse(svg)
    assert "nan" not in svg and "inf" not in svg
    drawn = {"bars": f"{SVG}rect[@class='bar']", "line": f"{SVG}polyline",
             "points": f"{SVG}circle"}[kind]
    assert len(root.findall(drawn)) == (2 * len(values) if kind != "line" else 2)
    root = parse(hbar_chart("alt", "title", [str(v) for v in values], values, color="#4a7",
                            x_title="URLs"))
    assert len(root.findall(f"{SVG}rect")) == len(values)


@pytest.mark.parametrize(("top", "ticks"), [
    (0, [0, 1]), (-5, [0, 1]), (0.3, [0, 1]), (1, [0, 1]), (3, [0, 1, 2, 3]),
    (7, [0, 2, 4, 6, 8]), (24, [0, 5, 10, 15, 20, 25]), (125, [0, 25, 50, 75, 100, 125]),
    (9_290_000, [0, 2_000_000, 4_000_000, 6_000_000, 8_000_000, 10_000_000]),
])
def test_nice_ticks(top: float, ticks: list[int]) -> None:
    assert nice_ticks(top) == ticks


def test_nice_ticks_of_large_numbers_are_round_and_few() -> None:
    for top in (10**12 + 1, 123_456_789, 49_999):
        ticks = nice_ticks(top, most=8)
        step = ticks[1]
        assert ticks[-1] >= top and len(ticks) <= 9
        assert str(step).rstrip("0") in ("1", "2", "25", "5")
        assert ticks == list(range(0, ticks[-1] + 1, step))


def test_numbers_have_thousands_separators() -> None:
    assert [number(v) for v in (0, 1_234_567, 12.5, 100.0)] == ["0", "1,234,567", "12.5", "100"]
    root = parse(xy_chart("alt", "title", [Panel([Series("a", "#4a7", [9_290_000])], "points",
                                                 "URLs")]))
    assert "10,000,000" in texts(root)
