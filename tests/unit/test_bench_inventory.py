"""The benchmark's realistic inventory (bench/inventory.py): deterministic, and what it holds.

The shares are the ones bench/realistic_inventory.sql aims at; the rejects are counted with
the pipeline's own rule (pipeline.urls.check_url), so a change to either shows here.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.urls import check_url

ROWS = 20_000
SITE = "https://www.example.com/"


def _inventory_module():
    path = Path(__file__).resolve().parents[2] / "bench" / "inventory.py"
    spec = importlib.util.spec_from_file_location("bench_inventory", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


inventory = _inventory_module()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inv") / "a.parquet"
    inventory.make(path, ROWS, seed=7)
    return path


def test_same_seed_same_file_other_seed_other_rows(made: Path, tmp_path: Path) -> None:
    again, other = tmp_path / "b.parquet", tmp_path / "c.parquet"
    inventory.make(again, ROWS, seed=7)
    inventory.make(other, ROWS, seed=8)
    assert again.read_bytes() == made.read_bytes()
    assert pq.read_table(other).column("url") != pq.read_table(made).column("url")


def test_shares_within_bounds(made: Path) -> None:
    s = inventory.stats(made)
    assert s["rows"] == ROWS
    assert 70 <= s["mean_url_length"] <= 90
    assert s["max_url_length"] > 300 and s["share_over_300"] > 0.001
    assert 0.06 <= s["share_xml_escape"] <= 0.10
    assert 0.03 <= s["share_raw_utf8"] <= 0.05
    assert 0.04 <= s["share_percent_encoded"] <= 0.065
    assert 0.04 <= s["share_query"] <= 0.10
    assert 0.08 <= s["share_lastmod_null"] <= 0.16
    assert 0.14 <= s["share_lastmod_date_only"] <= 0.26
    assert s["lastmod_min"] < "2017" and s["lastmod_max"] > "2026"
    assert 0.2 <= s["share_changefreq_null"] <= 0.6 and 0.2 <= s["share_priority_null"] <= 0.6
    sections = s["sections"]
    assert 0.26 <= sections.pop("products") <= 0.34
    assert 0.07 <= sections.pop("(root level)") <= 0.14
    assert 18 <= len(sections) <= 22 and max(sections.values()) < 0.12
    assert {"1", "2", "3", "4", "5"} <= set(s["depth"]) and s["depth"]["3"] < 0.7


def test_rejects_by_the_pipelines_rule(made: Path) -> None:
    urls = pq.read_table(made, columns=["url"]).column("url").to_pylist()
    seen: set[str] = set()
    reasons: Counter[str] = Counter()
    for raw in urls:
        url = check_url(raw, SITE)
        if url.startswith("!"):
            reasons[url[1:]] += 1
        elif url in seen:
            reasons["duplicate"] += 1
        else:
            seen.add(url)
    share = {k: v / ROWS for k, v in reasons.items()}
    assert 0.02 <= sum(share.values()) <= 0.03, share
    for reason in ("duplicate", "off_site", "not_http", "too_long", "illegal_char",
                   "bad_percent_encoding", "empty"):
        assert share.get(reason, 0) > 0.0004, (reason, share)
    assert 0.008 <= share["duplicate"] <= 0.012
