"""The one run-options model: the CLI, the site file and the environment all derive from it."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from pathlib import Path

import pytest

from pipeline import settings
from pipeline.cli import build_parser, main
from pipeline.errors import ConfigError
from pipeline.settings import Environment, Limits, RunOptions, environment
from pipeline.sites import SiteConfig, load_sites, parse_sites

REQUIRED = {"inventory": "s3://inv/", "site_url": "https://www.example.com/", "out": "s3://o/"}


def _cli(*extra: str) -> RunOptions:
    args = build_parser().parse_args(
        ["run", "--inventory", REQUIRED["inventory"], "--site-url", REQUIRED["site_url"],
         "--out", REQUIRED["out"], *extra])
    return settings.from_args(args)


def _site(**keys: object) -> SiteConfig:
    (site,) = parse_sites({"sites": {"www": {**REQUIRED, **keys}}})
    return site


def test_the_cli_and_a_site_file_default_to_the_models_defaults() -> None:
    model = RunOptions(**REQUIRED)
    assert _cli() == model
    site = _site()
    assert all(getattr(site, f.name) == getattr(model, f.name)
               for f in dataclasses.fields(RunOptions) if f.name not in ("state", "work"))
    # The drift the model ended: a run writes the feed and the report, as the DAG does.
    assert model.feed_days == 7 and model.report is True


def test_flags_and_site_keys_reach_the_same_fields() -> None:
    cli = _cli("--keep-generations", "5", "--shrink-threshold", "0.2", "--no-report",
               "--max-urls-per-sitemap", "100", "--format", "txt", "--no-gc")
    site = _site(gc_keep=5, shrink_threshold=0.2, report=False, format="txt",
                 limits={"max_urls_per_sitemap": 100})
    assert (cli.keep_generations, cli.shrink_threshold, cli.report, cli.format) == (
        site.keep_generations, site.shrink_threshold, site.report, site.format)
    assert cli.limits == site.limits == Limits(max_urls=100)
    assert cli.gc_grace_hours is None and site.gc_grace_hours == 48


def test_every_option_is_reachable_or_deliberately_internal() -> None:
    """A new field gets a flag and a site key unless its Option says otherwise."""
    run = next(a for a in build_parser()._actions if a.dest == "command").choices["run"]  # type: ignore[index]
    parser_flags = {s for action in run._actions for s in action.option_strings}
    for f in [*dataclasses.fields(RunOptions), *dataclasses.fields(Limits)]:
        flag = settings.flag(f)
        if flag and f.name != "limits":  # its fields have the flags
            assert flag in parser_flags, f.name
    internal = {f.name for f in dataclasses.fields(RunOptions)
                if not settings.flag(f) and not settings.site_key(f)}
    assert internal == {"run_time", "compare_snapshot", "check_writable"}


@pytest.mark.parametrize("kw, message", [
    ({"shrink_threshold": 1.5}, "shrink_threshold must be 0..1"),
    ({"keep_generations": 0}, "gc_keep must be at least 1"),
    ({"diff_partitions": 0}, "diff_partitions must be at least 1"),
    ({"format": "html"}, "format must be one of xml, txt"),
    ({"lease_seconds": -1}, "lease_seconds must be at least 0"),
])
def test_bad_values_are_config_errors_that_name_the_key(kw: dict[str, object],
                                                        message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RunOptions(**REQUIRED, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["out", "state", "work", "inventory", "report_to"])
@pytest.mark.parametrize("value", ["", " \t"])
def test_an_empty_uri_is_refused_by_the_model(name: str, value: str) -> None:
    """`--out ""` published into the current folder (and the state to /_state)."""
    with pytest.raises(ConfigError, match=f"^{name} must not be empty$"):
        RunOptions(**{**REQUIRED, name: value})  # type: ignore[arg-type]
    flag = "--" + name.replace("_", "-")
    with pytest.raises(ConfigError, match=f"^{flag} must not be empty$"):
        _cli(flag, value)


FLOATS = [f.name for f in dataclasses.fields(RunOptions)
          if settings.base_type(RunOptions, f.name) is float]


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_refused_by_the_model_the_cli_and_the_site_file(
        name: str, value: float) -> None:
    """NaN passed every range check (every comparison with it is false), infinity any
    minimum: `--gc-grace-hours nan` published, then failed in gc."""
    assert {"gc_grace_hours", "feed_days", "lease_seconds", "shrink_threshold"} <= set(FLOATS)
    with pytest.raises(ConfigError, match=f"^{name} must be a finite number, not {value}$"):
        RunOptions(**REQUIRED, **{name: value})  # type: ignore[arg-type]
    flag = "--" + name.replace("_", "-")
    with pytest.raises(ConfigError, match=f"^{flag} must be a finite number, not {value}$"):
        _cli(f"{flag}={value}")  # "-inf" alone would be taken for a flag
    with pytest.raises(ConfigError, match=f"{name} must be a finite number, not {value}$"):
        (site,) = parse_sites(tomllib.loads(
            "[sites.www]\n" + "".join(f'{k} = "{v}"\n' for k, v in REQUIRED.items())
            + f"{name} = {value}\n"))


@pytest.mark.parametrize("variable", ["SITEMAPS_S3_CONNECT_TIMEOUT", "SITEMAPS_S3_ATTEMPTS"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_environment_refuses_nan_and_infinity(variable: str, value: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=f"\\${variable} = '{value}'"):
        environment()


def test_on_the_command_line_a_bad_value_names_its_flag() -> None:
    with pytest.raises(ConfigError, match="--keep-generations must be at least 1, not 0"):
        _cli("--keep-generations", "0")
    with pytest.raises(ConfigError, match="--shrink-threshold must be 0..1, not 1.5"):
        _cli("--shrink-threshold", "1.5")


#: --public-url values that are no served folder's URL (issue 40, item 8): a newline would
#: add lines to robots.txt, a relative or javascript: one would be every index <loc>.
BAD_PUBLIC_URLS = [
    ("https://www.example.com/sitemaps/\nDisallow: /", "no whitespace or control"),
    ("https://www.example.com/site maps/", "no whitespace or control"),
    ("https://www.example.com/\x00/", "no whitespace or control"),
    ("sitemaps/", "absolute http"),
    ("/sitemaps/", "absolute http"),
    ("javascript:alert(1)//", "absolute http"),
    ("ftp://www.example.com/", "absolute http"),
    ("https:///sitemaps/", "absolute http"),
    ("", "(absolute http|not be empty)"),  # the site file has its own rule
    ("https://www.example.com/sitemaps/?v=1", "no query or fragment"),
    ("https://www.example.com/sitemaps/#top", "no query or fragment"),
    ("https://user:pw@www.example.com/", "no user name"),
    ("https://www.example.com:99999/", "not a URL"),
    ('https://www.example.com/"><script>/', "percent-encode"),
    ("https://www.example.com/sitemaps", "end in /"),
]


@pytest.mark.parametrize("value, message", BAD_PUBLIC_URLS)
def test_a_public_url_that_is_no_served_folder_is_refused_everywhere(
        value: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=f"public_url (must|is).*{message}"):
        RunOptions(**REQUIRED, public_url=value)
    with pytest.raises(ConfigError, match=f"^--public-url (must|is).*{message}"):
        _cli("--public-url", value)
    with pytest.raises(ConfigError, match=f"sites.www\\]: public_url (must|is).*{message}"):
        _site(public_url=value)
    # the site file the DAGs read, found through $SITEMAPS_SITES_FILE
    toml = tmp_path / "sites.toml"
    toml.write_text("[sites.www]\n" + "".join(
        f"{k} = {json.dumps(v)}\n" for k, v in {**REQUIRED, "public_url": value}.items()))
    monkeypatch.setenv("SITEMAPS_SITES_FILE", str(toml))
    with pytest.raises(ConfigError, match=f"public_url (must|is).*{message}"):
        load_sites()
    # the command: exit 2, one error line, before any work
    out = tmp_path / "out"
    assert main(["run", "--inventory", str(tmp_path / "none.parquet"), "--site-url",
                 REQUIRED["site_url"], "--out", str(out), "--public-url", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --public-url"), err
    assert not out.exists()


@pytest.mark.parametrize("value", ["https://www.example.com/sitemaps/", "http://cdn.example.com",
                                   "https://www.example.com/", "HTTPS://CDN.example.com:8443/a/b/",
                                   "https://www.example.com/%7Euser/"])
def test_a_served_folders_url_is_accepted(value: str) -> None:
    assert RunOptions(**REQUIRED, public_url=value).public_url == value
    assert _cli("--public-url", value).public_url == value


def test_environment_is_read_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    for f in dataclasses.fields(Environment):
        monkeypatch.delenv(Environment.variable(f.name), raising=False)
    assert environment() == Environment()
    monkeypatch.setenv("SITEMAPS_PLAN_SLICE_ROWS", "1000")
    monkeypatch.setenv("SITEMAPS_S3_CONNECT_TIMEOUT", "1.5")
    monkeypatch.setenv("SITEMAPS_TEMP_DIR", "")  # empty: unset
    env = environment()
    assert (env.plan_slice_rows, env.s3_connect_timeout, env.temp_dir) == (1000, 1.5, None)
    monkeypatch.setenv("SITEMAPS_S3_ATTEMPTS", "five")
    with pytest.raises(ConfigError, match="SITEMAPS_S3_ATTEMPTS"):
        environment()


@pytest.mark.parametrize(("name", "value", "message"), [
    ("SITEMAPS_PLAN_SLICE_ROWS", "0", "must be at least 1"),
    ("SITEMAPS_PLAN_SLICE_ROWS", "-5", "must be at least 1"),
    ("SITEMAPS_S3_ATTEMPTS", "0", "must be at least 1"),
    ("SITEMAPS_S3_CONNECT_TIMEOUT", "0", "must be at least 0.001"),
    ("SITEMAPS_GZIP_LEVEL", "-1", "must be at least 0$"),
    ("SITEMAPS_S3_CONNECT_TIMEOUT", "nan", "must be a finite number"),
    ("SITEMAPS_DIFF_PARTITION_ROWS", "-1", r"must be at least 0 \(0: automatic\)"),
])
def test_environment_refuses_a_number_out_of_range(monkeypatch: pytest.MonkeyPatch, name: str,
                                                   value: str, message: str) -> None:
    """A 0 where a count is needed failed deep in a run (plan: a division by zero)."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"\\${name} = '{re.escape(value)}' {message}"):
        environment()


def test_every_environment_variable_the_code_names_is_in_the_model() -> None:
    """settings.Environment lists (and documents) every SITEMAPS_* variable."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    named = {m for p in [*(root / "pipeline").glob("*.py"), *(root / "dags").glob("*.py")]
             for m in re.findall(r"\bSITEMAPS_[A-Z_]+[A-Z]", p.read_text())}
    known = {Environment.variable(f.name) for f in dataclasses.fields(Environment)}
    assert named and named <= known, named - known


def test_the_readme_options_table_is_the_models() -> None:
    """The README's table of options is `settings.options_table()`, as is: a new option, a
    new default or a new help text shows there once `python -m pipeline.settings` is pasted."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert settings.readme_table(readme) == settings.options_table(), (
        "the README's options table differs from RunOptions: paste the output of "
        "`python -m pipeline.settings` between its markers")


def test_the_options_table_has_a_row_per_flag_and_site_key() -> None:
    table = settings.options_table()
    for f in dataclasses.fields(RunOptions):
        if f.name == "limits":
            continue
        shown = [x for x in (settings.flag(f), settings.site_key(f)) if x]
        assert all(x in table for x in shown), f.name
    assert "| `--max-urls-per-sitemap N` | `max_urls_per_sitemap` |  | URLs per sitemap file " \
           "(default and most 50,000) |" in table
    assert "(default 0.10)" in table  # the default, formatted by the help text
