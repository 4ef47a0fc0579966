"""The indexability gate through the real CLI: rows the site itself marks as not to be
indexed (status other than 200, a redirect, noindex, another canonical URL) are never
published, each is rejected with its own reason and counted, they do not count toward
the reject guard, and a gate column of the wrong type stops the run before it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tests.output_check import read_output, state_file, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
ROOT = Path(__file__).resolve().parents[2]

GATE_SCHEMA = pa.schema([("url", pa.string()), ("http_status", pa.int16()),
                         ("canonical_url", pa.string()), ("noindex", pa.bool_()),
                         ("redirect_to", pa.string())])


def sitemaps(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", *args], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=300)


def run(inventory: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return sitemaps("run", "--inventory", str(inventory), "--site-url", SITE, "--out", str(out),
                    "--feed-days", "0", "--no-report", "--json", *extra)


def test_gate_rejects_each_signal_with_its_reason(tmp_path: Path) -> None:
    p = SITE + "p/"
    rows = [  # (url, http_status, canonical_url, noindex, redirect_to, expected reason)
        (p + "ok-plain", None, None, None, None, None),
        (p + "ok-200", 200, None, False, None, None),
        (p + "ok-self-canonical", 200, p + "ok-self-canonical", False, "", None),
        # canonical given in another spelling of the same URL: normalised, then equal
        (p + "ok-canonical-spelling", 200, "HTTPS://WWW.EXAMPLE.COM/p/ok-canonical-spelling",
         None, None, None),
        (p + "gone", 404, None, None, None, "not_200"),
        (p + "error", 500, p + "error", None, None, "not_200"),
        (p + "moved", 200, None, None, p + "new-home", "redirect"),
        (p + "hidden", 200, None, True, None, "noindex"),
        (p + "copy", 200, p + "original", False, None, "not_canonical"),
        (p + "elsewhere", None, "https://other.example.org/x", None, None, "not_canonical"),
        # a bad URL keeps its own reason, whatever the gate says
        ("ftp://www.example.com/p/file", 404, None, True, None, "not_http"),
    ]
    inv = write_inventory(tmp_path / "inv.parquet", {
        "url": [r[0] for r in rows], "http_status": [r[1] for r in rows],
        "canonical_url": [r[2] for r in rows], "noindex": [r[3] for r in rows],
        "redirect_to": [r[4] for r in rows]}, GATE_SCHEMA)
    out = tmp_path / "out"
    proc = run(inv, out, "--max-reject-share", "0.5")  # 1 bad row of 11
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)["counts"]
    assert counts["rejected"] == {"noindex": 1, "not_200": 2, "not_canonical": 2, "not_http": 1,
                                  "redirect": 1}
    assert counts["not_indexable"] == 6
    published = read_output(str(out))
    assert sorted(published.locs) == sorted(r[0] for r in rows if r[5] is None)
    assert published.manifest["counts"]["not_indexable"] == 6
    rejects = dict(duckdb.sql(
        f"SELECT url, reason FROM read_parquet('{state_file(str(out), published.manifest, 'rejects')}')"
    ).fetchall())
    assert rejects == {r[0]: r[5] for r in rows if r[5] is not None}


def test_gate_rejects_do_not_trip_the_reject_guard(tmp_path: Path) -> None:
    n = 200
    urls = [f"{SITE}item/{i}" for i in range(n)]
    noindex = [i % 2 == 0 for i in range(n)]  # half the site is noindex: its own choice
    bad = [f"ftp://bad/{i}" for i in range(6)]  # 6 of 206 rows are bad data: 2.9% < 5%
    inv = write_inventory(tmp_path / "inv.parquet", {
        "url": urls + bad, "http_status": [200] * (n + 6), "canonical_url": [None] * (n + 6),
        "noindex": noindex + [False] * 6, "redirect_to": [None] * (n + 6)}, GATE_SCHEMA)
    proc = run(inv, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counts"]["rejected"] == {"noindex": 100, "not_http": 6}
    # the same share with a lower limit: the bad rows alone trip it (exit 5), the gate's
    # 100 rows are not named among the rejects that count
    proc = run(inv, tmp_path / "out2", "--max-reject-share", "0.02")
    assert proc.returncode == 5, proc.stderr
    assert "6 of 206 input rows" in proc.stderr and "noindex" not in proc.stderr


@pytest.mark.parametrize("column, values, arrow_type, must_be", [
    ("noindex", ["yes", "no"], pa.string(), "a boolean"),
    ("http_status", ["200", "404"], pa.string(), "an integer"),
    ("canonical_url", [1, 2], pa.int64(), "a string"),
    ("redirect_to", [True, False], pa.bool_(), "a string"),
])
def test_gate_column_of_wrong_type_stops_before_writing(tmp_path: Path, column: str,
                                                        values: list[object],
                                                        arrow_type: pa.DataType,
                                                        must_be: str) -> None:
    inv = write_inventory(tmp_path / "inv.parquet", {
        "url": [SITE + "a/1", SITE + "a/2"], column: pa.array(values, arrow_type)})
    out = tmp_path / "out"
    proc = run(inv, out)
    assert proc.returncode == 2, proc.stderr
    assert f"`{column}` column" in proc.stderr and must_be in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "manifest.json").exists()
    assert not list(out.rglob("*.xml.gz"))
