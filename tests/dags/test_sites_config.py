"""The site configuration file of the DAGs (plain Python: no Airflow needed)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pipeline.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sitemaps_sites", ROOT / "dags" / "sitemaps_sites.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sitemaps_sites", mod)
    spec.loader.exec_module(mod)
    return mod


sites = _load()

BASE = {"site_url": "https://www.example.com/", "inventory": "s3://inv/www/",
        "out": "s3://sitemaps/www/"}


def test_defaults_derive_state_work_and_asset_from_out_and_inventory() -> None:
    (s,) = sites.parse_sites({"sites": {"www": BASE}})
    assert s.dag_id == "sitemaps_www"
    assert s.default_states() == ["s3://sitemaps/www.state", "s3://sitemaps/www/_state"]
    assert s.inventory_asset_uri == "s3://inv/www/"
    assert s.manifest_uri == "s3://sitemaps/www/manifest.json"
    assert s.schedule == "0 3 * * *" and s.aws_conn_id is None
    assert (s.format, s.lease_seconds, s.gc_keep, s.gc_grace_hours) == ("xml", 0, 3, 48)
    assert s.limits.max_urls == 50_000
    assert s.diff_partitions is None  # automatic
    assert s.plan_slice_rows is None  # pipeline.plan.SLICE_ROWS


def test_diff_partitions_and_plan_slice_rows() -> None:
    (s,) = sites.parse_sites({"sites": {"www": {**BASE, "diff_partitions": 4,
                                                "plan_slice_rows": 1_000_000}}})
    assert s.diff_partitions == 4 and s.plan_slice_rows == 1_000_000


def test_defaults_table_applies_to_every_site_and_a_site_overrides_it() -> None:
    data = {"defaults": {"aws_conn_id": "s3", "schedule": "0 1 * * *",
                         "limits": {"max_urls_per_sitemap": 1000}},
            "sites": {"a": BASE, "b": {**BASE, "out": "s3://sitemaps/b/", "schedule": "0 2 * * *",
                                       "limits": {"max_sitemaps_per_index": 10}}}}
    a, b = sites.parse_sites(data)
    assert (a.aws_conn_id, a.schedule, a.limits.max_urls) == ("s3", "0 1 * * *", 1000)
    assert (b.schedule, b.limits.max_urls, b.limits.max_sitemaps_per_index) == (
        "0 2 * * *", 1000, 10)


def test_the_state_and_work_of_a_run_are_beside_out_or_in_an_older_state(
        tmp_path: Path) -> None:
    """The run (not the parse) resolves the state: `<out>.state`, or an older `<out>/_state`
    while it holds one; the work root is below it."""
    from pipeline.layout import INPUT_IDENTITY_KEY

    out = tmp_path / "www"
    (s,) = sites.parse_sites({"sites": {"www": {**BASE, "out": str(out)}}})
    assert s.state_uri == str(tmp_path / "www.state")
    assert s.work_uri == str(tmp_path / "www.state" / "runs")
    (out / "_state").mkdir(parents=True)
    (out / "_state" / INPUT_IDENTITY_KEY).write_text("{}")
    assert s.state_uri == str(out / "_state")
    opts = s.run_options(run_id="r")
    assert (opts.state, opts.work) == (str(out / "_state"), str(out / "_state" / "runs"))


def test_explicit_state_and_work() -> None:
    (s,) = sites.parse_sites({"sites": {"w": {**BASE, "state": "s3://private/w",
                                              "work": "s3://scratch/w"}}})
    assert (s.state_uri, s.work_uri) == ("s3://private/w", "s3://scratch/w")


@pytest.mark.parametrize("block, message", [
    ({"site_url": "https://x/", "out": "s3://o/"}, "missing ['inventory']"),
    ({**BASE, "shedule": "x"}, "unknown keys ['shedule']"),
    ({**BASE, "section_depth": "1"}, "section_depth = '1' has the wrong type"),
    ({**BASE, "limits": {"max_urls_per_sitemap": 50_001}}, "--max-urls-per-sitemap"),
    ({**BASE, "limits": {"max_urls": 10}}, "unknown limits ['max_urls']"),
    ({**BASE, "shrink_threshold": 5}, "shrink_threshold must be 0..1"),
    ({**BASE, "tags": "demo"}, "tags must be a list"),
    ({**BASE, "format": "html"}, "format must be one of xml, txt"),
    ({**BASE, "gc_keep": 0}, "gc_keep must be at least 1"),
    ({**BASE, "diff_partitions": 0}, "diff_partitions must be at least 1"),
    ({**BASE, "diff_partitions": 2.0}, "diff_partitions = 2.0 has the wrong type"),
    ({**BASE, "plan_slice_rows": 0}, "plan_slice_rows must be at least 1"),
    ({**BASE, "plan_slice_rows": "4M"}, "plan_slice_rows = '4M' has the wrong type"),
])
def test_mistakes_are_config_errors_that_name_the_site(block: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=r"\[sites\.www\]") as exc:
        sites.parse_sites({"sites": {"www": block}})
    assert message in str(exc.value)


def test_bad_names_and_top_level_keys() -> None:
    with pytest.raises(ConfigError, match="a site name is"):
        sites.parse_sites({"sites": {"w w": BASE}})
    with pytest.raises(ConfigError, match="unknown top-level keys"):
        sites.parse_sites({"site": {"www": BASE}})


def test_load_sites_reads_the_env_file_and_says_how_to_fix_a_missing_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sites.toml"
    path.write_text('[sites.www]\nsite_url = "https://www.example.com/"\n'
                    'inventory = "/data/inv.parquet"\nout = "/srv/sitemaps"\n')
    monkeypatch.setenv(sites.SITES_FILE_ENV, str(path))
    assert [s.name for s in sites.load_sites()] == ["www"]
    monkeypatch.setenv(sites.SITES_FILE_ENV, str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="SITEMAPS_SITES_FILE"):
        sites.load_sites()
    path.write_text("[sites.www\n")
    monkeypatch.setenv(sites.SITES_FILE_ENV, str(path))
    with pytest.raises(ConfigError, match="not valid TOML"):
        sites.load_sites()


def test_the_demo_config_is_valid() -> None:
    (demo,) = sites.load_sites(ROOT / "infra" / "local" / "sites.toml")
    assert demo.aws_conn_id == "sitemaps_s3" and demo.inventory.startswith("s3://sitemaps/")


@pytest.mark.parametrize("run_id", ["..", ".", "", "/", "a/../..", "../../etc", "..\\..", "x/" * 200,
                                    "manual__2026-12-06T12:00:00+00:00", "x" * 250, "é/.."])
def test_the_work_folder_of_any_airflow_run_id_stays_below_the_runs_folder(
        run_id: str, tmp_path: Path) -> None:
    """Airflow's default allowed_run_id_pattern accepts '..' for a manual run: its work
    folder `<state>/runs/..` was the state itself, and finish deleted every snapshot."""
    from pipeline.layout import RUN_ID_PATTERN
    from pipeline.orchestration import work_folder_name
    from pipeline.steps import run_work_folder

    (s,) = sites.parse_sites({"sites": {"www": {**BASE, "out": str(tmp_path / "out")}}})
    name = work_folder_name(s.dag_id, run_id)
    assert re.fullmatch(RUN_ID_PATTERN, name), name
    work = Path(run_work_folder(s.work_uri, name)).resolve()
    assert work.parent == (tmp_path / "out.state" / "runs").resolve()
    s.run_options(run_id=name)  # the rule RunOptions checks


def test_run_ids_that_differ_only_in_mapped_characters_keep_their_own_folders() -> None:
    from pipeline.orchestration import work_folder_name

    ids = ["manual__2026-12-06T12:00:00+00:00", "manual__2026-12-06T12_00_00_00_00",
           "manual__2026-12-06T12:00:00.5+00:00", "a.b", "a_b", "a/b", "..", "..."]
    assert len({work_folder_name("sitemaps_www", i) for i in ids}) == len(ids)
    assert work_folder_name("sitemaps_www", "scheduled_x-1") == "sitemaps_www.scheduled_x-1"


@pytest.mark.parametrize("root, work", [
    ("/w", "/w/.."), ("/w", "/w"), ("/w", "/w/a/../.."), ("/w", "/other"),
    ("s3://b/w", "s3://b/w/.."), ("s3://b/w", "s3://b/w"), ("s3://b/w", "s3://b/w/a/../.."),
    ("s3://b/w", "s3://b/w2/x"), ("s3://b/w", "s3://b/w//x")])
def test_a_work_folder_not_below_its_root_is_refused(root: str, work: str) -> None:
    from pipeline.errors import InternalError
    from pipeline.steps import check_below

    with pytest.raises(InternalError, match="not below the work root"):
        check_below(root, work)
    check_below(root, root + "/run-1")


def test_two_sites_sharing_a_work_root_never_share_a_work_folder(tmp_path: Path) -> None:
    """Every site's DAG has the same run id at a cron tick: with `work` set once in
    [defaults], `<work>/scheduled__<tick>` was one folder for two sites, and each published
    the other's URLs. (A `state` set once there is refused: see the next test.)"""
    from pipeline.layout import RUN_ID_PATTERN
    from pipeline.orchestration import work_folder_name
    from pipeline.steps import run_work_folder

    data = {"defaults": {"work": str(tmp_path / "work")},
            "sites": {"a": {**BASE, "out": "s3://sitemaps/a/"},
                      "b": {**BASE, "out": "s3://sitemaps/b/"}}}
    a, b = sites.parse_sites(data)
    assert a.work_uri == b.work_uri  # one work root: allowed
    tick = "scheduled__2026-12-06T03:00:00+00:00"
    folders = {run_work_folder(s.work_uri, work_folder_name(s.dag_id, tick)) for s in (a, b)}
    assert len(folders) == 2
    assert all(Path(f).parent == Path(a.work_uri) for f in folders)
    # A site name that ends like another's run id cannot take its folder either.
    assert work_folder_name("sitemaps_a__x", "y") != work_folder_name("sitemaps_a", "x__y")
    (long,) = sites.parse_sites({"sites": {"w" * 200: BASE}})
    assert re.fullmatch(RUN_ID_PATTERN, work_folder_name(long.dag_id, tick))


def test_two_sites_with_one_state_are_refused(tmp_path: Path) -> None:
    """Issue 40 (4): gc of one output deleted the other's snapshots in a shared state."""
    data = {"defaults": {"state": str(tmp_path / "state")},
            "sites": {"a": {**BASE, "out": "s3://sitemaps/a/"},
                      "b": {**BASE, "out": "s3://sitemaps/b/"}}}
    with pytest.raises(ConfigError, match=r"\[sites.b\]: state .* is also the state of "
                                          r"\[sites.a\]"):
        sites.parse_sites(data)


@pytest.mark.parametrize("state", ["s3://sitemaps/a.state", "s3://sitemaps/a/_state/"])
def test_a_state_that_is_another_sites_default_is_refused(state: str) -> None:
    data = {"sites": {"a": {**BASE, "out": "s3://sitemaps/a/"},
                      "b": {**BASE, "out": "s3://sitemaps/b/", "state": state}}}
    with pytest.raises(ConfigError, match=r"\[sites.b\]: state .* is also the state of "
                                          r"\[sites.a\]"):
        sites.parse_sites(data)


def test_a_site_at_the_root_of_a_bucket_parses() -> None:
    """Its state is resolved by the run: an older `_state` there, else a ConfigError."""
    (s,) = sites.parse_sites({"sites": {"www": {**BASE, "out": "s3://sitemaps"}}})
    assert s.default_states() == ["s3://sitemaps/_state"]


@pytest.mark.parametrize("other", ["s3://sitemaps/www/", "s3://sitemaps/www", "s3://sitemaps/www//"])
def test_two_sites_with_one_out_are_refused(other: str) -> None:
    data = {"sites": {"www": BASE, "www2": {**BASE, "out": other}}}
    with pytest.raises(ConfigError, match=r"\[sites.www2\]: out .* is also the out of "
                                          r"\[sites.www\]"):
        sites.parse_sites(data)
