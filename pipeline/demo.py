"""`sitemaps demo`: a realistic synthetic inventory, then a full run on it."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pipeline import sql

log = logging.getLogger(__name__)

DEMO_SITE = "https://www.example.com/"
DEFAULT_DEMO_URLS = 1_000_000


def make_inventory(path: Path, urls: int = DEFAULT_DEMO_URLS, site: str = DEMO_SITE) -> Path:
    """Write the demo inventory Parquet (see sql/demo_inventory.sql) to `path`."""
    started = time.monotonic()
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sql.connect()
    con.sql(sql.load_sql("demo_inventory"), params={"urls": urls, "site": site.rstrip("/")}
            ).write_parquet(str(path), compression="zstd")
    log.info("demo: wrote %d inventory rows to %s (%.1f s)", urls, path,
             time.monotonic() - started)
    return path
