"""Run settings shared by the CLI and the DAGs, with the protocol's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import ConfigError
from pipeline.limits import MAX_BYTES_PER_SITEMAP, MAX_SITEMAPS_PER_INDEX, MAX_URLS_PER_SITEMAP
from pipeline.sitemap_xml import max_urlset_overhead


@dataclass(frozen=True)
class Limits:
    """Per-file limits; smaller values than the protocol's are honoured exactly."""

    max_urls: int = MAX_URLS_PER_SITEMAP
    max_bytes: int = MAX_BYTES_PER_SITEMAP
    max_sitemaps_per_index: int = MAX_SITEMAPS_PER_INDEX

    def __post_init__(self) -> None:
        if not 1 <= self.max_urls <= MAX_URLS_PER_SITEMAP:
            raise ConfigError(f"--max-urls-per-sitemap must be 1..{MAX_URLS_PER_SITEMAP:,}, "
                              f"not {self.max_urls}")
        if not max_urlset_overhead() < self.max_bytes <= MAX_BYTES_PER_SITEMAP:
            raise ConfigError(f"--max-bytes-per-sitemap must be {max_urlset_overhead() + 1}.."
                              f"{MAX_BYTES_PER_SITEMAP:,}, not {self.max_bytes}")
        if not 1 <= self.max_sitemaps_per_index <= MAX_SITEMAPS_PER_INDEX:
            raise ConfigError(f"--max-sitemaps-per-index must be 1..{MAX_SITEMAPS_PER_INDEX:,}, "
                              f"not {self.max_sitemaps_per_index}")

    @property
    def body_budget(self) -> int:
        """Bytes available to <url> lines in one file."""
        return self.max_bytes - max_urlset_overhead()
