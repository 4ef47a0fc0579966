"""The site file of the sitemap DAGs: one TOML block per site, one DAG each.

Read once when the DAG file is parsed (a local file, no network). The file is
`$SITEMAPS_SITES_FILE`, else `sites.toml` in the DAGs folder. A site block's keys are
the run options of `pipeline.settings.RunOptions` that have a site key (their defaults
live there), plus the DAG's own keys below; plain Python, tested without Airflow.

    [defaults]                      # optional: applies to every site below
    schedule = "0 3 * * *"          # cron, UTC
    aws_conn_id = "sitemaps_s3"     # Airflow connection for S3; omit or "": the environment

    [sites.www]                     # DAG id `sitemaps_www`
    site_url = "https://www.example.com/"
    public_url = "https://www.example.com/sitemaps/"   # where `out` is served
    inventory = "s3://inventory/www/"                  # Parquet file, glob, folder or table
    out = "s3://sitemaps-public/www/"
    # state = "<out>.state"        work = "<state>/runs"   (must be shared storage)

    [sites.www.limits]
    max_urls_per_sitemap = 50000

    [sites.www.alerts]              # optional: who is told of a failed or refused run
    email = ["seo-oncall@example.com"]
    slack_webhook_conn_id = "slack_seo"
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.alerts import Alerts, parse_alerts
from pipeline.errors import ConfigError
from pipeline.layout import LIVE_MANIFEST_KEY, RUNS_FOLDER, default_state, legacy_state
from pipeline.settings import (
    Limits,
    RunOptions,
    base_type,
    environment,
    option,
    required,
    site_key,
)

#: Environment variable naming the site configuration file (settings.Environment.sites_file).
SITES_FILE_ENV = "SITEMAPS_SITES_FILE"
#: Prefix of every DAG id: `sitemaps_<site name>`.
DAG_ID_PREFIX = "sitemaps_"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,199}$")


@dataclass(frozen=True, kw_only=True)
class SiteConfig(RunOptions):
    """One site: one DAG. Its run options, and the DAG's own keys (schedule, connection)."""

    name: str = required("the site's name, from its block: [sites.<name>]", flag="", site_key="")
    #: The Asset whose updates trigger a run (default: the inventory URI itself).
    inventory_asset: str | None = option(
        None, "the Asset whose updates trigger a run (default: the inventory URI)", flag="")
    schedule: str = option("0 3 * * *", "cron, UTC (default nightly at 03:00)", flag="")
    aws_conn_id: str | None = option(
        None, "the Airflow connection (type aws) for S3; omitted or \"\": the environment",
        flag="")
    tags: tuple[str, ...] = option((), "extra DAG tags", flag="")
    verify_url: str | None = option(
        None, "after each publish a verify task fetches the served copy from this site URL "
        "(`sitemaps verify --site-url`) and fails, naming each problem, when it is not as "
        "published (default: no verify task)", flag="")
    alerts: Alerts | None = option(
        None, "who is told, by e-mail or Slack, when a run fails, a guard refuses a "
        "generation or the served copy is wrong (pipeline.alerts; default: no one, and the "
        "DAG's tasks have no failure callback)", flag="")

    @property
    def gc_keep(self) -> int:
        """The site-file name of `keep_generations`."""
        return self.keep_generations

    @property
    def dag_id(self) -> str:
        return DAG_ID_PREFIX + self.name

    @property
    def state_uri(self) -> str:
        """The site's state (pipeline.state_owner.resolve_state): it may look at storage, so
        a run asks, never the parse of the DAG file (which imports no storage)."""
        from pipeline.state_owner import resolve_state

        return resolve_state(self.out, self.state)

    @property
    def work_uri(self) -> str:
        """Root of the runs' work folders; each run works in `<work>/<dag id>.<run id>/`, so
        sites may share one root. Without `work`, it is below the state (state_uri)."""
        return self.work or _join(self.state_uri, RUNS_FOLDER)

    def default_states(self) -> list[str]:
        """The state's names without storage: `state`, else both defaults of `out`
        (`<out>.state`, where out has a parent, and an older `<out>/_state`)."""
        if self.state:
            return [self.state]
        try:
            return [default_state(self.out), legacy_state(self.out)]
        except ConfigError:  # the root of a bucket: only an older state can be there
            return [legacy_state(self.out)]

    @property
    def inventory_asset_uri(self) -> str:
        return self.inventory_asset or self.inventory

    @property
    def manifest_uri(self) -> str:
        """The live manifest: the publish task's outlet asset."""
        return _join(self.out, LIVE_MANIFEST_KEY)

    def run_options(self, **overrides: Any) -> RunOptions:
        """The site's run options, as a plain RunOptions (the DAG's per-run values win)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(RunOptions)}
        state = self.state_uri
        return RunOptions(**{**values, "work": self.work or _join(state, RUNS_FOLDER),
                             "state": state,
                             **overrides})


def _join(uri: str, part: str) -> str:
    return uri.rstrip("/") + "/" + part


#: Site key -> field name, for every field a site file may set.
_KEYS = {site_key(f): f.name for f in dataclasses.fields(SiteConfig) if site_key(f)}
_REQUIRED = {site_key(f) for f in dataclasses.fields(RunOptions)
             if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
_LIMIT_KEYS = {site_key(f): f.name for f in dataclasses.fields(Limits)}


def _check_type(where: str, key: str, value: Any) -> Any:
    name = _KEYS[key]
    if key == "aws_conn_id" and value == "":
        return None  # overrides a default connection: S3 from the environment
    if key == "tags":
        if not (isinstance(value, list) and all(isinstance(t, str) for t in value)):
            raise ConfigError(f"{where}: tags must be a list of strings")
        return tuple(value)
    expected = base_type(SiteConfig, name)
    if expected is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} = {value!r} must be true or false")
        return value
    if expected is float:  # a TOML integer is a number too
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: {key} = {value!r} has the wrong type")
        return float(str(value))
    if isinstance(value, bool) or not isinstance(value, expected):
        raise ConfigError(f"{where}: {key} = {value!r} has the wrong type")
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
    out: list[SiteConfig] = []
    for name, block in sites.items():
        where = f"{source}: [sites.{name}]"
        if not _NAME.match(name):
            raise ConfigError(f"{where}: a site name is letters, digits, '_' and '-'")
        if not isinstance(block, dict):
            raise ConfigError(f"{where} must be a table")
        merged = {**defaults, **block}
        for table in ("limits", "alerts"):  # a site's table refines the defaults' one
            if isinstance(defaults.get(table), dict) and isinstance(block.get(table), dict):
                merged[table] = {**defaults[table], **block[table]}
        unknown = set(merged) - set(_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; "
                              f"allowed: {sorted(_KEYS)}")
        missing = _REQUIRED - set(merged)
        if missing:
            raise ConfigError(f"{where}: missing {sorted(missing)}")
        values: dict[str, Any] = {
            _KEYS[k]: (_limits(where, v) if k == "limits" else parse_alerts(where, v)
                       if k == "alerts" else _check_type(where, k, v))
            for k, v in merged.items()}
        try:
            site = SiteConfig(name=name, **values)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        # Two DAGs publishing to one output would each publish over the other's generations.
        twin = next((o for o in out if _same_uri(o.out, site.out)), None)
        if twin is not None:
            raise ConfigError(f"{where}: out {site.out!r} is also the out of [sites.{twin.name}]"
                              ": give each site its own output")
        # Nor may two share a state: gc of one would delete the other's snapshots.
        shared = next(((o, a) for o in out for a in site.default_states()
                       for b in o.default_states() if _same_uri(a, b)), None)
        if shared is not None:
            raise ConfigError(f"{where}: state {shared[1]!r} is also the state of "
                              f"[sites.{shared[0].name}]: give each site its own state (set it "
                              "per site, or leave it out: <out>.state)")
        out.append(site)
    return out


def _same_uri(a: str, b: str) -> bool:
    """One output named twice (trailing and doubled slashes aside)."""
    return re.sub("/+", "/", a).rstrip("/") == re.sub("/+", "/", b).rstrip("/")


def sites_file(default: Path | None = None) -> Path:
    """`$SITEMAPS_SITES_FILE`, else `default` (the DAGs folder's `sites.toml`)."""
    path = environment().sites_file or default
    if path is None:
        raise ConfigError(f"no site configuration: point ${SITES_FILE_ENV} at one")
    return Path(path).expanduser()


def load_sites(path: Path | None = None, default: Path | None = None) -> list[SiteConfig]:
    """Reads and checks the site configuration file (see the module docstring)."""
    path = path or sites_file(default)
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
