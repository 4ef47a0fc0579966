"""The run report renders in a real browser (headless Chromium) from a file:// URL, no server."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.config import Limits
from pipeline.notify.report import write_report
from pipeline.run import RunOptions, run
from tests.output_check import write_inventory

pytestmark = [pytest.mark.integration, pytest.mark.browser]
CHROMIUM = os.environ.get("SITEMAPS_CHROMIUM", "/usr/bin/chromium")
SITE = "https://www.example.com/"


def screenshot(page: Path, tmp_path: Path) -> bytes:
    """A headless Chromium screenshot (PNG) of a page, 1200x2000."""
    shot = tmp_path / f"{page.stem}.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'chromium'}",
           f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert shot.is_file(), f"no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    return png


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is not installed: the browser tests need it "
                    "(apt-get install -y chromium; `make test` installs it), or deselect them "
                    "with -m 'not browser'", pytrace=False)
    inv = write_inventory(tmp_path / "inv.parquet",
                          {"url": [f"{SITE}{s}/{i}" for s in ("a", "b") for i in range(15)]})
    out = tmp_path / "out"
    run(RunOptions(inventory=str(inv), site_url=SITE, out=str(out),
                   run_time=datetime(2026, 12, 1, tzinfo=UTC), limits=Limits(max_urls=10)))
    report = Path(write_report(str(out), limits=Limits(max_urls=10)))
    page = report.read_text(encoding="utf-8")
    charts = re.findall(r"<svg\b.*?</svg>", page, re.DOTALL)
    assert len(charts) == 3  # inline SVG: nothing to load
    assert "<td>input rows</td><td>30</td>" in page

    # A blank 1200x2000 page compresses to about 11 KB; text, tables and charts do not.
    png = screenshot(report, tmp_path)
    assert len(png) > 30_000, f"screenshot of {len(png)} bytes looks empty"
    # The charts alone (the report's style, none of its text) are drawn too: about 35 KB.
    alone = tmp_path / "charts.html"
    alone.write_text(page[:page.index("<body>") + len("<body>")] + "".join(charts)
                     + "</body></html>", encoding="utf-8")
    png = screenshot(alone, tmp_path)
    assert len(png) > 20_000, f"screenshot of the charts alone of {len(png)} bytes looks empty"
