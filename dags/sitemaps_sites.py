"""The site configuration file of the sitemap DAGs: one TOML block per site.

Read once when the DAG file is parsed (a local file, no network). The file is
`$SITEMAPS_SITES_FILE`, else `sites.toml` next to this module. Plain Python
(stdlib and `pipeline` only), so it is tested and reused without Airflow.

    [defaults]                      # optional: applies to every site below
    schedule = "0 3 * * *"          # cron, UTC
    aws_conn_id = "sitemaps_s3"     # Airflow connection for S3; omit or "": the environment

    [sites.www]                     # DAG id `sitemaps_www`
    site_url = "https://www.example.com/"
    public_url = "https://www.example.com/sitemaps/"   # where `out` is served
    inventory = "s3://inventory/www/"                  # Parquet file, glob or folder
    out = "s3://sitemaps-public/www/"
    # state = "<out>/_state"       work = "<state>/runs"   (must be shared storage)

    [sites.www.limits]
    max_urls_per_sitemap = 50000
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.config import Limits
from pipeline.errors import ConfigError
from pipeline.layout import LIVE_MANIFEST_KEY, RUNS_FOLDER, default_state

#: Environment variable naming the site configuration file.
SITES_FILE_ENV = "SITEMAPS_SITES_FILE"
#: Used when the variable is not set.
DEFAULT_SITES_FILE = Path(__file__).resolve().parent / "sites.toml"
#: Prefix of every DAG id: `sitemaps_<site name>`.
DAG_ID_PREFIX = "sitemaps_"
#: Nightly at 03:00 UTC unless the site says otherwise.
DEFAULT_SCHEDULE = "0 3 * * *"
#: Mapped render tasks get about this many uncompressed bytes of shards each.
DEFAULT_RENDER_BATCH_BYTES = 256 * 1024 * 1024
#: Output formats (pipeline.steps.RunOptions.format).
FORMATS = ("xml", "txt")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$")
_LIMIT_KEYS = {
    "max_urls_per_sitemap": "max_urls",
    "max_bytes_per_sitemap": "max_bytes",
    "max_sitemaps_per_index": "max_sitemaps_per_index",
}


@dataclass(frozen=True)
class SiteConfig:
    """One site: one DAG. Field names are the TOML keys (plus the `limits` table)."""

    name: str
    site_url: str
    inventory: str
    out: str
    public_url: str | None = None
    #: The Asset whose updates trigger a run (default: the inventory URI itself).
    inventory_asset: str | None = None
    state: str | None = None
    work: str | None = None
    schedule: str = DEFAULT_SCHEDULE
    aws_conn_id: str | None = None
    limits: Limits = field(default_factory=Limits)
    section_depth: int = 1
    #: Write the image tags Google stopped using in 2022 (left out and counted by default).
    keep_deprecated_tags: bool = False
    shrink_threshold: float = 0.10
    max_reject_share: float = 0.05
    render_batch_bytes: int = DEFAULT_RENDER_BATCH_BYTES
    #: Hash partitions of the diff, each one mapped diff task (None: automatic,
    #: pipeline.diff.partitions_for: as many as keep each join in memory, at most 4).
    diff_partitions: int | None = None
    #: URLs per plan slice, each one mapped plan task (None: pipeline.plan.SLICE_ROWS,
    #: 4,000,000 unless SITEMAPS_PLAN_SLICE_ROWS says otherwise).
    plan_slice_rows: int | None = None
    #: "xml" sitemaps, or "txt": plain-text sitemaps (one URL a line, same limits).
    format: str = "xml"
    #: Seconds the run holds the output's lease (0: none; the conditional commit still
    #: refuses a run that lost a race, a lease only saves the loser's work).
    lease_seconds: float = 0.0
    gc_keep: int = 3
    gc_grace_hours: float = 48.0
    #: After publish (the notify task): days of changes in feed.atom, the HTML run report,
    #: and IndexNow submission of changed URLs when a key is set (off by default).
    feed_days: float = 7.0
    report: bool = True
    #: Where the run reports go (None: the state prefix; internal, never the served `out`).
    report_to: str | None = None
    indexnow_key: str | None = None
    indexnow_endpoint: str | None = None
    indexnow_key_location: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def dag_id(self) -> str:
        return DAG_ID_PREFIX + self.name

    @property
    def state_uri(self) -> str:
        """Default: the private `_state/` folder beside the sitemaps (as the CLI)."""
        return self.state or default_state(self.out)

    @property
    def work_uri(self) -> str:
        """Root of the runs' work folders; each run works in `<work>/<run id>/`."""
        return self.work or _join(self.state_uri, RUNS_FOLDER)

    @property
    def inventory_asset_uri(self) -> str:
        return self.inventory_asset or self.inventory

    @property
    def manifest_uri(self) -> str:
        """The live manifest: the publish task's outlet asset."""
        return _join(self.out, LIVE_MANIFEST_KEY)


def _join(uri: str, part: str) -> str:
    return uri.rstrip("/") + "/" + part


_FIELDS = {f.name: f for f in fields(SiteConfig)}
_KEYS = set(_FIELDS) - {"name"}
_REQUIRED = {"site_url", "inventory", "out"}
_NUMBER = (int, float)
#: TOML types of the non-string keys (tags and limits are checked on their own).
_TYPES: dict[str, type | tuple[type, ...]] = {
    "section_depth": int, "render_batch_bytes": int, "diff_partitions": int,
    "plan_slice_rows": int, "gc_keep": int,
    "shrink_threshold": _NUMBER, "max_reject_share": _NUMBER,
    "gc_grace_hours": _NUMBER, "lease_seconds": _NUMBER, "feed_days": _NUMBER,
    "report": bool, "keep_deprecated_tags": bool,
}


def _check_type(where: str, key: str, value: Any) -> Any:
    expected: type | tuple[type, ...] = _TYPES.get(key, str)
    if key == "aws_conn_id" and value == "":
        return None  # overrides a default connection: S3 from the environment
    if key == "tags":
        if not (isinstance(value, list) and all(isinstance(t, str) for t in value)):
            raise ConfigError(f"{where}: tags must be a list of strings")
        return tuple(value)
    if expected is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} = {value!r} must be true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, expected):
        raise ConfigError(f"{where}: {key} = {value!r} has the wrong type")
    if expected == _NUMBER:
        return float(str(value))
    if expected is str and not str(value).strip():
        raise ConfigError(f"{where}: {key} must not be empty")
    return value


def _limits(where: str, table: Any) -> Limits:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: limits must be a table")
    unknown = set(table) - set(_LIMIT_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown limits {sorted(unknown)}; "
                          f"allowed: {sorted(_LIMIT_KEYS)}")
    for k, v in table.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{where}: limits.{k} = {v!r} must be an integer")
    try:
        return Limits(**{_LIMIT_KEYS[k]: v for k, v in table.items()})
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def parse_sites(data: dict[str, Any], source: str = "<sites>") -> list[SiteConfig]:
    """Site configs from the parsed TOML; raises ConfigError saying what to fix."""
    unknown = set(data) - {"defaults", "sites"}
    if unknown:
        raise ConfigError(f"{source}: unknown top-level keys {sorted(unknown)}; "
                          "use [defaults] and [sites.<name>]")
    defaults = data.get("defaults", {})
    sites = data.get("sites", {})
    if not isinstance(defaults, dict) or not isinstance(sites, dict):
        raise ConfigError(f"{source}: [defaults] and [sites.<name>] must be tables")
    out = []
    for name, block in sites.items():
        where = f"{source}: [sites.{name}]"
        if not _NAME.match(name):
            raise ConfigError(f"{where}: a site name is letters, digits, '_' and '-'")
        if not isinstance(block, dict):
            raise ConfigError(f"{where} must be a table")
        merged = {**defaults, **block}
        if "limits" in defaults and "limits" in block:
            merged["limits"] = {**defaults["limits"], **block["limits"]}
        unknown = set(merged) - _KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
        missing = _REQUIRED - set(merged)
        if missing:
            raise ConfigError(f"{where}: missing {sorted(missing)}")
        values: dict[str, Any] = {
            k: (_limits(where, v) if k == "limits" else _check_type(where, k, v))
            for k, v in merged.items()}
        site = SiteConfig(name=name, **values)
        if site.render_batch_bytes < 1:
            raise ConfigError(f"{where}: render_batch_bytes must be positive")
        if site.diff_partitions is not None and site.diff_partitions < 1:
            raise ConfigError(f"{where}: diff_partitions must be at least 1 (or left out: "
                              "automatic)")
        if site.plan_slice_rows is not None and site.plan_slice_rows < 1:
            raise ConfigError(f"{where}: plan_slice_rows must be at least 1 (or left out: "
                              "the default)")
        if not 0 <= site.shrink_threshold <= 1 or not 0 <= site.max_reject_share <= 1:
            raise ConfigError(f"{where}: shrink_threshold and max_reject_share are shares, 0..1")
        if site.format not in FORMATS:
            raise ConfigError(f"{where}: format must be one of {', '.join(FORMATS)}")
        if site.gc_keep < 1 or site.gc_grace_hours < 0 or site.lease_seconds < 0 \
                or site.section_depth < 1:
            raise ConfigError(f"{where}: gc_keep and section_depth are at least 1; "
                              "gc_grace_hours and lease_seconds are not negative")
        out.append(site)
    return out


def sites_file() -> Path:
    return Path(os.environ.get(SITES_FILE_ENV) or DEFAULT_SITES_FILE).expanduser()


def load_sites(path: Path | None = None) -> list[SiteConfig]:
    """Reads and checks the site configuration file (see the module docstring)."""
    path = path or sites_file()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"no site configuration at {path}: create it (one [sites.<name>] block per site) "
            f"or point ${SITES_FILE_ENV} at one") from None
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return parse_sites(data, str(path))
