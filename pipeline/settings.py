"""Run options: the one typed model of what a run can be told, with every default.

`RunOptions` is the only place an option's default lives. Each field's `Option`
metadata says how the option is reached from outside, and everything else is
derived from it:

- the flags of `sitemaps run` (`pipeline.cli` builds them with `add_arguments`),
- the keys of a site block in the DAGs' TOML file (`pipeline.sites`),
- the params of a manual DAG run (`pipeline.orchestration`),
- the README's table of options (`options_table`; `python -m pipeline.settings` prints it).

A new option is one field here (plus the code that uses it). `Environment` reads the
`SITEMAPS_*` environment variables, in this one place, when asked (never at import time).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Union

from pipeline.errors import ConfigError
from pipeline.layout import LEGACY_STATE_FOLDER, RUN_ID_PATTERN, RUNS_FOLDER, STATE_SUFFIX
from pipeline.limits import MAX_BYTES_PER_SITEMAP, MAX_SITEMAPS_PER_INDEX, MAX_URLS_PER_SITEMAP
from pipeline.sitemap_xml import max_urlset_overhead

#: Output formats: XML sitemaps, or plain-text ones (one URL a line, same limits).
FORMATS = ("xml", "txt")


#: The state when --state is not given, as the help texts say it (pipeline.state_owner).
DEFAULT_STATE_HELP = (f"<out>{STATE_SUFFIX}; an older <out>/{LEGACY_STATE_FOLDER} that holds "
                      "a state is still used")


@dataclass(frozen=True)
class Option:
    """How one field of `RunOptions` (or `Limits`) is reached from outside.

    `help` is one line; `{default}` in it is replaced by the field's default.
    """

    help: str
    #: The `sitemaps run` flag: None derives `--field-name`; "" keeps it off the command line.
    flag: str | None = None
    #: Its key in a site block: None derives the field name; "" keeps it out of site files.
    site_key: str | None = None
    #: A second flag that turns the option off (False for a bool, None otherwise).
    off_flag: str = ""
    off_help: str = ""
    metavar: str | None = None
    #: A manual DAG run may set it (a DAG param); the site's value is its default.
    param: bool = False
    #: Inclusive bounds of a number (None: unbounded).
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    #: A text value must match this (re.fullmatch); `pattern_help` says the rule.
    pattern: str | None = None
    pattern_help: str = ""
    #: The value is a URL of a served folder (public_url_problem).
    folder_url: bool = False


def option(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field with its `Option` (the `metadata["option"]` of the field)."""
    meta = {"option": Option(help, **kw)}
    if isinstance(default, type):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


def required(help: str, **kw: Any) -> Any:
    return field(metadata={"option": Option(help, **kw)})


@dataclass(frozen=True)
class Limits:
    """Per-file limits; smaller values than the protocol's are honoured exactly."""

    max_urls: int = option(
        MAX_URLS_PER_SITEMAP, "URLs per sitemap file (default and most {default:,})",
        flag="--max-urls-per-sitemap", site_key="max_urls_per_sitemap", metavar="N")
    max_bytes: int = option(
        MAX_BYTES_PER_SITEMAP, "uncompressed bytes per sitemap file (default and most "
        "{default:,})", flag="--max-bytes-per-sitemap", site_key="max_bytes_per_sitemap",
        metavar="N")
    max_sitemaps_per_index: int = option(
        MAX_SITEMAPS_PER_INDEX, "sitemaps per index file (default and most {default:,}; more "
        "make more indexes)", flag="--max-sitemaps-per-index",
        site_key="max_sitemaps_per_index", metavar="N")

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


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Everything one run can be told; every default lives here (see the module docstring)."""

    inventory: str = required("Parquet file, glob or (Hive-partitioned) folder; local or s3://; "
                              "or a table: delta+URI, iceberg+sqlite:///catalog.db#ns.table")
    site_url: str = required("the site, scheme included, e.g. https://www.example.com/")
    out: str = required("local folder or s3://bucket/prefix/")
    public_url: str | None = option(
        None, "URL of the folder --out is served from: absolute http(s), ending in / "
        "(default: --site-url)", folder_url=True)
    state: str | None = option(
        None, f"state URI: snapshots between runs (default: {DEFAULT_STATE_HELP})")
    work: str | None = option(
        None, "work URI for intermediate files (default: a temp folder; a site's DAG: "
        f"<state>/{RUNS_FOLDER}, which must be shared storage)")
    limits: Limits = option(Limits, "per-file limits (the fields of Limits)")
    run_id: str | None = option(
        None, "names the work folder (default: the generation id)", site_key="",
        pattern=RUN_ID_PATTERN,
        pattern_help="letters, digits, '_', '-' and '.' (not first), at most 200 characters: "
                     "one folder name below --work")
    #: The run's time: it stamps the generation and new URLs' lastmod (default: now).
    run_time: datetime | None = option(None, "the run's time (default: now)", flag="",
                                       site_key="")
    section_depth: int = option(1, "path segments that name a section (default {default})",
                                metavar="N", minimum=1)
    keep_deprecated_tags: bool = option(
        False, "write the image tags Google stopped using in 2022 (caption, title, "
        "geo_location, license); by default they are left out and counted")
    allow_shrink: bool = option(
        False, "publish even if far fewer URLs than the live generation", site_key="",
        param=True)
    shrink_threshold: float = option(
        0.10, "largest allowed drop in published URLs (default {default:.2f})",
        minimum=0, maximum=1)
    max_reject_share: float = option(
        0.05, "fail when more than this share of rows is rejected as bad data (default "
        "{default}; rows the indexability gate leaves out do not count)", minimum=0, maximum=1)
    force: bool = option(False, "rewrite every shard file (a full rewrite)", site_key="",
                         param=True)
    rebuild: bool = option(
        False, "do the work even when the inventory's rows and the options are the live "
        "generation's (such a run otherwise stops after begin: nothing could change)",
        site_key="")
    lease_seconds: float = option(
        0.0, "hold a lease on --out for this long (default 0: none; the conditional commit "
        "still refuses a run that lost a race, a lease only saves the loser's work)",
        minimum=0)
    keep_generations: int = option(3, "generations whose files gc keeps (default {default})",
                                   site_key="gc_keep", minimum=1)
    gc_grace_hours: float | None = option(
        48.0, "gc deletes only files older than this (default {default:g})", minimum=0,
        off_flag="--no-gc", off_help="do not garbage-collect after publishing")
    format: str = option("xml", "xml sitemaps (default) or plain-text ones, one URL a line",
                         choices=FORMATS)
    #: Diff against this snapshot instead of the live generation's (dry runs from a state URI).
    compare_snapshot: str | None = option(None, "the snapshot to diff against", flag="",
                                          site_key="")
    feed_days: float | None = option(
        7.0, "feed.atom lists the changes of this many days (default {default:g}; 0: no feed)",
        minimum=0)
    report: bool = option(
        True, "write the run report (<state>/generations/<id>/report.html)", flag="",
        off_flag="--no-report",
        off_help="do not write the run report (<state>/generations/<id>/report.html)")
    report_to: str | None = option(
        None, "where run reports go, <URI>/generations/<id>/report.html (default: the state "
        "prefix); internal: not a served folder", metavar="URI")
    indexnow_key: str | None = option(
        None, "submit each generation's changed URLs to IndexNow with this key (default: off)")
    indexnow_key_location: str | None = option(
        None, "URL of the key file (default https://<host>/<key>.txt)")
    indexnow_endpoint: str | None = option(
        None, "where to submit (default https://api.indexnow.org/indexnow)")
    diff_partitions: int | None = option(
        None, "diff in N hash partitions of the URLs, one join at a time (default: as many as "
        "keep each join in memory, at most 1,024; 1 on a first run); the DAG maps its diff task "
        "over them", metavar="N", minimum=1)
    plan_slice_rows: int | None = option(
        None, "plan at most about N URLs at a time (default 4,000,000, "
        "SITEMAPS_PLAN_SLICE_ROWS): bounds plan's memory and temp disk; the DAG maps its plan "
        "task over the slices", metavar="N", minimum=1)
    load_group_rows: int | None = option(
        None, "the DAG normalises the inventory's files in groups of about N rows, one "
        "mapped task each (default 20,000,000, SITEMAPS_LOAD_GROUP_ROWS; a file is never "
        "split); the CLI loads them in one", flag="", metavar="N", minimum=1)
    render_batch_bytes: int = option(
        256 * 1024 * 1024, "bytes of <url> lines per mapped render task of the DAG (default "
        "{default:,}, 256 MiB)", flag="", minimum=1)
    #: Check at begin, before any work, that --out (and --state) can be written; a dry run,
    #: which writes nothing there, checks only that S3 can be reached.
    check_writable: bool = option(True, "check at begin that --out can be written", flag="",
                                  site_key="")
    check_conditional_writes: bool = option(
        True, "probe once that the output's S3 server refuses a failed conditional write (412) "
        "before relying on one for the commit", flag="", site_key="",
        off_flag="--no-conditional-write-check",
        off_help="do not probe that the S3 server refuses a failed conditional write (only for "
                 "a server known to honour If-Match / If-None-Match)")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            problem = check(f, getattr(self, f.name))
            if problem:
                raise ConfigError(f"{site_key(f) or f.name} {problem}")

def check(f: dataclasses.Field[Any], value: Any) -> str | None:
    """What is wrong with `value` for field `f` (its Option's bounds and choices), or None.

    RunOptions raises it naming the site key; the command line names the flag instead.
    """
    opt: Option = f.metadata["option"]
    if opt.choices and value not in opt.choices:
        return f"must be one of {', '.join(opt.choices)}, not {value!r}"
    if isinstance(value, str) and not value.strip():
        return "must not be empty"
    if opt.pattern and value is not None and not (
            isinstance(value, str) and re.fullmatch(opt.pattern, value)):
        return f"must be {opt.pattern_help}, not {value!r}"
    if opt.folder_url and value is not None:
        return public_url_problem(value)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):  # NaN passes every bound (each comparison is false)
        return f"must be a finite number, not {value}"
    if opt.minimum is not None and opt.maximum is not None \
            and not opt.minimum <= value <= opt.maximum:
        return f"must be {opt.minimum:g}..{opt.maximum:g}, not {value}"
    if opt.minimum is not None and value < opt.minimum:
        return f"must be at least {opt.minimum:g}, not {value}"
    return None


#: A character no public URL may hold: whitespace (a newline would add lines to robots.txt)
#: and control characters.
_NOT_IN_URL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
#: Characters RFC 3986 never allows unencoded (and that XML or HTML would need escaped).
_UNSAFE_IN_URL = re.compile(r'[<>"{}|\\^`]')


def public_url_problem(value: Any) -> str | None:
    """What makes `value` no URL of a served folder, or None: it must be an absolute http(s)
    URL with a host, no whitespace, control or unsafe characters, user info, query or
    fragment, and end in / unless it is the host's root (its files are joined below it, and
    robots.txt and every index <loc> name it)."""
    from urllib.parse import urlsplit

    if not isinstance(value, str):
        return f"must be a URL, not {value!r}"
    shown = repr(value)
    if _NOT_IN_URL.search(value):
        return f"must hold no whitespace or control characters, not {shown}"
    try:
        parts = urlsplit(value)
        _ = parts.port  # read only to refuse a bad port
    except ValueError as exc:
        return f"is not a URL ({exc}): {shown}"
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return (f"must be an absolute http(s) URL with a host, e.g. "
                f"https://www.example.com/sitemaps/, not {shown}")
    if "@" in parts.netloc:
        return f"must hold no user name or password, not {shown}"
    if "?" in value or "#" in value:
        return f"must have no query or fragment, not {shown}"
    if _UNSAFE_IN_URL.search(value):
        return f"must hold no < > \" {{ }} | \\ ^ or ` (percent-encode them), not {shown}"
    if parts.path and not value.endswith("/"):
        return f"must end in / (the folder --out is served from), not {shown}"
    return None


def default_of(name: str, cls: type = RunOptions) -> Any:
    """The default of one field (for a function that takes the option as an argument)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def flag(f: dataclasses.Field[Any]) -> str:
    """The command-line flag of a field ("" if it has none)."""
    opt: Option = f.metadata["option"]
    if opt.flag is None:
        return "--" + f.name.replace("_", "-")
    return opt.flag or opt.off_flag


def site_key(f: dataclasses.Field[Any]) -> str:
    """The site-file key of a field ("" if it has none)."""
    opt: Option = f.metadata["option"]
    return f.name if opt.site_key is None else opt.site_key


def base_type(cls: type, name: str) -> type:
    """The type of a field without `| None`: int, float, bool, str, datetime or Limits."""
    hint = typing.get_type_hints(cls)[name]
    if typing.get_origin(hint) in (Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    assert isinstance(hint, type)
    return hint


def help_text(f: dataclasses.Field[Any]) -> str:
    opt: Option = f.metadata["option"]
    return opt.help.format(default=f.default) if "{default" in opt.help else opt.help


def _add(parser: argparse.ArgumentParser, f: dataclasses.Field[Any], dest: str,
         required: bool = False) -> None:
    opt: Option = f.metadata["option"]
    kind = base_type(Limits if dest.startswith("limits.") else RunOptions, f.name)
    if opt.flag != "":
        name = flag(f)
        if kind is bool:
            parser.add_argument(name, dest=dest, action="store_true", default=argparse.SUPPRESS,
                                help=help_text(f))
        else:
            parser.add_argument(name, dest=dest, type=kind, required=required,
                                default=argparse.SUPPRESS, metavar=opt.metavar,
                                choices=opt.choices or None, help=help_text(f))
    if opt.off_flag:
        parser.add_argument(opt.off_flag, dest=dest, action="store_const",
                            const=False if kind is bool else None, default=argparse.SUPPRESS,
                            help=opt.off_help)


def add_arguments(parser: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """The flags of the run options (`only`: of these fields), each with its field's default.

    A flag left out of the command line is absent from the namespace, so `from_args` takes
    the default from here, the one place it lives.
    """
    for f in dataclasses.fields(RunOptions):
        if only is not None and f.name not in only:
            continue
        if f.name == "limits":
            for lf in dataclasses.fields(Limits):
                _add(parser, lf, "limits." + lf.name)
        elif flag(f):
            _add(parser, f, f.name, required=f.default is dataclasses.MISSING
                 and f.default_factory is dataclasses.MISSING)


def from_args(args: argparse.Namespace, **overrides: Any) -> RunOptions:
    """The run options of parsed flags (see `add_arguments`); `overrides` win."""
    given = vars(args)
    limits = {k.removeprefix("limits."): v for k, v in given.items() if k.startswith("limits.")}
    values: dict[str, Any] = {}
    for f in dataclasses.fields(RunOptions):
        if f.name in given:
            problem = check(f, given[f.name])
            if problem:
                raise ConfigError(f"{flag(f)} {problem}")
            values[f.name] = given[f.name]
    if limits:
        values["limits"] = Limits(**limits)
    return RunOptions(**{**values, **overrides})


#: Flags of other commands that take a run option under another name: their dest -> field.
FLAG_ALIASES = {"grace_hours": "gc_grace_hours", "days": "feed_days"}


def check_flags(args: argparse.Namespace) -> None:
    """The run options' checks on the flags of any command that has some of them, by their
    field's name or FLAG_ALIASES (`gc --out`, `gc --keep-generations`, `gc --grace-hours`,
    `status --out`, `rollback --state`): the same rules as `sitemaps run`."""
    fields = {f.name: f for f in dataclasses.fields(RunOptions)}
    for name, value in vars(args).items():
        f = fields.get(FLAG_ALIASES.get(name, name))
        if f is not None:
            problem = check(f, value)
            if problem:
                raise ConfigError(f"--{name.replace('_', '-')} {problem}")


#: The README lines around the options table (`options_table` writes what is between).
README_TABLE_BEGIN = ("<!-- options: made by `python -m pipeline.settings` from RunOptions; "
                      "tests/unit/test_settings.py checks it -->")
README_TABLE_END = "<!-- end of options -->"


def options_table() -> str:
    """The run options as a Markdown table: flag(s), site key, DAG param, help (with the
    default). One row per field that has a flag or a site key; Limits' fields are rows."""
    rows = ["| flag | site key | DAG param | meaning |", "| --- | --- | --- | --- |"]
    for f, cls in _documented_fields():
        opt: Option = f.metadata["option"]
        flags = []
        if opt.flag != "":
            kind = base_type(cls, f.name)
            arg = "" if kind is bool else " " + (
                opt.metavar or ("{" + ",".join(opt.choices) + "}" if opt.choices
                                else f.name.upper()))
            flags.append(f"`{flag(f)}{arg}`")
        if opt.off_flag:
            flags.append(f"`{opt.off_flag}`")
        meaning = help_text(f)
        if opt.off_flag and opt.off_help and opt.flag != "":
            meaning += f"; `{opt.off_flag}`: {opt.off_help}"
        elif opt.off_flag and opt.off_help:
            meaning = opt.off_help
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            meaning = "required: " + meaning
        key = site_key(f)
        rows.append(f"| {', '.join(flags) or '-'} | {f'`{key}`' if key else '-'} | "
                    f"{'yes' if opt.param else ''} | {_markdown(meaning)} |")
    return "\n".join(rows) + "\n"


def _documented_fields() -> list[tuple[dataclasses.Field[Any], type]]:
    out: list[tuple[dataclasses.Field[Any], type]] = []
    for f in dataclasses.fields(RunOptions):
        if f.name == "limits":
            out += [(lf, Limits) for lf in dataclasses.fields(Limits)]
        elif flag(f) or site_key(f):
            out.append((f, RunOptions))
    return out


def _markdown(text: str) -> str:
    """Help text in a table cell: placeholders such as `<out>/_state` as code (Markdown
    would take <out> for an HTML tag), flags as code."""
    text = re.sub(r"([^\s(]*<[^<>\s]+>[^\s,;)]*)", r"`\1`", text)
    text = re.sub(r"(?<![`\w])(--[a-z][a-z-]*)", r"`\1`", text)
    return text.replace("|", "\\|")


def readme_table(readme: str) -> str:
    """The options table as it stands in the README's text (between the two markers)."""
    begin = readme.index(README_TABLE_BEGIN) + len(README_TABLE_BEGIN)
    return readme[begin:readme.index(README_TABLE_END, begin)].strip("\n") + "\n"


#: The units of a memory size (`parse_bytes`), upper case; DuckDB's own, plus bytes.
_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
          "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}


def parse_bytes(text: str) -> int:
    """Bytes of a size such as "1.5GB", "512MiB" or "2000000"; at least 1 (a clear error
    otherwise): a number, then a unit; nothing else passes."""
    m = re.fullmatch(r"\s*([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*([A-Za-z]*)\s*", text)
    if m and m.group(2).upper() in _UNITS:
        size = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
        if size >= 1:
            return size
    raise ConfigError(f"not a memory size: {text!r} (e.g. 1.5GB, 512MiB)")


@dataclass(frozen=True)
class Environment:
    """The `SITEMAPS_*` environment variables, read by `environment()` when it is called."""

    #: SITEMAPS_SITES_FILE: the DAGs' site file (default: `sites.toml` beside the DAG file).
    sites_file: str | None = None
    #: SITEMAPS_MEMORY: the process's memory (default 1.5GB; DuckDB gets it less a reserve).
    memory: str | None = dataclasses.field(default=None, metadata={"size": True})
    #: SITEMAPS_DUCKDB_MEMORY: DuckDB's memory limit (overrides SITEMAPS_MEMORY).
    duckdb_memory: str | None = dataclasses.field(default=None, metadata={"size": True})
    #: SITEMAPS_TEMP_DIR: where DuckDB spills (default: <temp dir>/sitemaps-duckdb).
    temp_dir: str | None = None
    # A numeric variable's `minimum` is checked when it is read (`environment`), as its
    # command-line flag's is: a 0 or a negative number would fail deep inside a run.
    #: SITEMAPS_S3_ATTEMPTS: attempts of an S3 request (botocore's standard retry mode).
    s3_attempts: int = dataclasses.field(default=5, metadata={"minimum": 1})
    #: SITEMAPS_S3_CONNECT_TIMEOUT: seconds to connect to S3.
    s3_connect_timeout: float = dataclasses.field(default=5.0, metadata={"minimum": 0.001})
    #: SITEMAPS_GZIP_LEVEL: the sitemaps' gzip level (isal: at most 3; a higher one is 3).
    gzip_level: int = dataclasses.field(default=1, metadata={"minimum": 0})
    #: SITEMAPS_PLAN_SLICE_ROWS: rows planned at a time when the run does not say.
    plan_slice_rows: int = dataclasses.field(default=4_000_000, metadata={"minimum": 1})
    #: SITEMAPS_LOAD_GROUP_ROWS: inventory rows per mapped normalize task of the DAG.
    load_group_rows: int = dataclasses.field(default=20_000_000, metadata={"minimum": 1})
    #: SITEMAPS_DIFF_PARTITION_ROWS: valid rows per diff partition (0: automatic).
    diff_partition_rows: int = dataclasses.field(
        default=0, metadata={"minimum": 0, "zero": "automatic"})

    @staticmethod
    def variable(name: str) -> str:
        return "SITEMAPS_" + name.upper()


@functools.cache
def _environment_types() -> dict[str, Any]:
    """Environment's field types (resolving them took 0.2 ms, and render asks per file)."""
    return typing.get_type_hints(Environment)


def environment() -> Environment:
    """The environment's settings now; an empty variable counts as unset."""
    values: dict[str, Any] = {}
    hints = _environment_types()
    for f in dataclasses.fields(Environment):
        raw = os.environ.get(Environment.variable(f.name), "").strip()
        if not raw:
            continue
        kind = hints[f.name]
        if f.metadata.get("size"):  # checked here, so a bad one stops a run before any work
            try:
                parse_bytes(raw)
            except ConfigError:
                raise ConfigError(f"${Environment.variable(f.name)} = {raw!r} is not a memory "
                                  "size (a number and a unit, e.g. 1.5GB, 512MiB)") from None
        try:
            values[f.name] = kind(raw) if kind in (int, float) else raw
        except ValueError:
            raise ConfigError(f"${Environment.variable(f.name)} = {raw!r} is not a number") \
                from None
        if kind is float and not math.isfinite(values[f.name]):
            raise ConfigError(f"${Environment.variable(f.name)} = {raw!r} must be a finite "
                              "number")
        least = f.metadata.get("minimum")
        if least is not None and not values[f.name] >= least:
            zero = f" (0: {f.metadata['zero']})" if "zero" in f.metadata else ""
            raise ConfigError(f"${Environment.variable(f.name)} = {raw!r} must be at least "
                              f"{least:g}{zero}")
    return Environment(**values)


if __name__ == "__main__":
    print(options_table(), end="")
