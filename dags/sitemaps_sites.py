"""The site file of the DAGs: `pipeline.sites` (its format), read from this folder by default."""

from __future__ import annotations

from pathlib import Path

from pipeline import sites as _sites
from pipeline.sites import SITES_FILE_ENV, SiteConfig, parse_sites

__all__ = ["DEFAULT_SITES_FILE", "SITES_FILE_ENV", "SiteConfig", "load_sites", "parse_sites"]

#: Used when $SITEMAPS_SITES_FILE is not set.
DEFAULT_SITES_FILE = Path(__file__).resolve().parent / "sites.toml"


def load_sites(path: Path | None = None) -> list[SiteConfig]:
    """The sites of `path`, else of $SITEMAPS_SITES_FILE, else of `sites.toml` here."""
    return _sites.load_sites(path, default=DEFAULT_SITES_FILE)
