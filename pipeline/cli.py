"""The `sitemaps` command line: run, demo, diff, status, repair, rollback, validate, verify,
explain, gc, robots, feed, report, indexnow-key.

Every failure a user can cause ends in one `error:` line on stderr and a documented exit
code (EXIT_CODES); `--debug` shows the traceback of an unexpected error instead.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline import settings
from pipeline.errors import OutOfSpace, PipelineError, StorageError, out_of_space
from pipeline.layout import GENERATIONS_FOLDER, SNAPSHOT_KEY
from pipeline.progress import Progress
from pipeline.settings import RunOptions

log = logging.getLogger("sitemaps")

EXIT_CODES = """\
exit codes:
  0    done
  1    status, gc: no generation at --out; status: the root index disagrees with the
       manifest; validate: problems found; explain: the URL is not published; an
       unexpected error (--debug: its traceback)
  2    bad input or configuration: fix it, a retry will not help (rollback: a generation
       not kept, or not intact); a full disk (the folder that filled is named)
  3    another generation was published since this run started (or another run holds
       the lease; rollback: published while rolling back)
  4    refused by the shrink guard (--allow-shrink to publish anyway)
  5    too many rejected rows (--max-reject-share)
  70   an internal error: a broken invariant of the pipeline (a bug: please report it)
  75   a transient storage error: retry
  130  interrupted"""

RUN_EXAMPLE = """\
example:
  sitemaps run --inventory s3://inventory/urls/ --site-url https://www.example.com/ \\
      --out s3://www-sitemaps/sitemaps/ --public-url https://www.example.com/sitemaps/

"""


def _epilog(example: str) -> str:
    return f"example:\n  {example}\n\n{EXIT_CODES}"


def _add_run_args(p: argparse.ArgumentParser) -> None:
    """The run options' flags (pipeline.settings: their help and defaults live there)."""
    settings.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")


def version() -> str:
    """The installed distribution's version (pyproject.toml's); pipeline.__version__ when
    the package runs from a checkout that was never installed."""
    try:
        return metadata.version("sitemap-pipeline")
    except metadata.PackageNotFoundError:
        from pipeline import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sitemaps", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{RUN_EXAMPLE}'sitemaps COMMAND --help' tells more.\n\n{EXIT_CODES}")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    _add_global_flags(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str, example: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, epilog=_epilog(example),
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = add("run", "publish sitemaps for an inventory",
            "sitemaps run --inventory s3://inventory/urls/ --site-url https://www.example.com/ "
            "\\\n      --out s3://www-sitemaps/sitemaps/ "
            "--public-url https://www.example.com/sitemaps/")
    _add_run_args(p)

    p = add("demo", "make a synthetic inventory and publish its sitemaps locally, as run does "
                    "(sitemaps and feed.atom; the run report in <out>.state/)",
            "sitemaps demo --urls 100000 --out sitemaps-demo")
    p.add_argument("--urls", type=int, default=1_000_000, metavar="N",
                   help="inventory rows (default 1,000,000)")
    p.add_argument("--out", default="sitemaps-demo", help="output folder (default ./sitemaps-demo)")
    p.add_argument("--inventory", metavar="PATH",
                   help="where the synthetic inventory goes (default <out>-inventory/"
                        "inventory.parquet, beside the output: never inside the served folder)")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")

    p = add("diff", "dry run: what a run would change, writing nothing",
            "sitemaps diff --inventory s3://inventory/urls/ --out s3://www-sitemaps/sitemaps/")
    p.add_argument("--inventory", required=True,
                   help="Parquet file, glob or (Hive-partitioned) folder; local or s3://")
    p.add_argument("--out", help="the output whose live generation to compare with")
    p.add_argument("--state", help="or: a state URI (its newest snapshot is compared with)")
    p.add_argument("--site-url", help="the site, e.g. https://www.example.com/ (default: the "
                                      "live manifest's site URL)")
    settings.add_arguments(p, only=("section_depth", "keep_deprecated_tags", "diff_partitions",
                                    "max_reject_share"))
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    p = add("status", "the live generation of an output: counts, age, whether every file it "
                      "serves is in place and the root index agrees (exit 1 if not)",
            "sitemaps status --out s3://www-sitemaps/sitemaps/ --deep")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--deep", action="store_true",
                   help="also read every shard and check its sha256 against the manifest")
    p.add_argument("--state", help=f"state URI (default: {settings.DEFAULT_STATE_HELP}); a "
                                   "warning when it is below --out, which is served")
    p.add_argument("--json", action="store_true", help="print the status as JSON")

    p = add("repair", "make the last committed intact generation live again when "
                      "manifest.json is empty or broken", "sitemaps repair --out s3://www-sitemaps/sitemaps/")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--state", help=f"state URI (default: {settings.DEFAULT_STATE_HELP})")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = add("rollback", "make a kept generation live again (default: the one before the live "
                        "one), through the same conditional swap as a publish",
            "sitemaps rollback --out s3://www-sitemaps/sitemaps/ --to 20261201T030000Z-a1b2c3")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--to", metavar="GENERATION",
                   help="the generation to make live (default: the one before the live one; "
                        "`sitemaps status` lists the kept ones)")
    p.add_argument("--state", help=f"state URI (default: {settings.DEFAULT_STATE_HELP})")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = add("validate", "check every live file against the sitemap XSDs and the protocol's "
                        "limits, the index references and the manifest's sizes and sha256s",
            "sitemaps validate --out s3://www-sitemaps/sitemaps/")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--max-problems", type=int, default=20, metavar="N",
                   help="stop after N problems (default 20)")
    p.add_argument("--state", help=f"state URI (default: {settings.DEFAULT_STATE_HELP}); a "
                                   "warning when it is below --out, which is served")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    from pipeline import verify

    p = add("verify", "fetch robots.txt, the root index(es) and a sample of the sitemaps as a "
                      "crawler does and check them against the live manifest",
            "sitemaps verify --out s3://www-sitemaps/sitemaps/ --site-url https://www.example.com/")
    p.add_argument("--out", required=True, help="the output whose live generation is served")
    p.add_argument("--site-url", help="fetch the same paths from this host (a staging host, "
                                      "a CDN's own name; default: the manifest's public URLs)")
    p.add_argument("--sample", type=int, default=verify.DEFAULT_SAMPLE, metavar="N",
                   help=f"sitemaps fetched, spread over the list (default {verify.DEFAULT_SAMPLE})")
    p.add_argument("--all", action="store_true", help="fetch every sitemap")
    p.add_argument("--stale-minutes", type=float, default=verify.DEFAULT_STALE_MINUTES,
                   metavar="M", help="minutes a served root index may lag the live generation "
                   f"(a cache) before it is a problem (default {verify.DEFAULT_STALE_MINUTES:g})")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = add("explain", "why one URL is (or is not) in the live sitemaps: its sitemap file and "
                       "index, or its reject reason, and its history over the kept generations "
                       "(exit 0 published, 1 not published)",
            "sitemaps explain 'https://WWW.example.com:443/shop/item-1' "
            "--out s3://www-sitemaps/sitemaps/")
    p.add_argument("url", metavar="URL", help="the URL, in any spelling (normalised as load does)")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--state", help=f"state URI (default: {settings.DEFAULT_STATE_HELP})")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")

    p = add("gc", "delete files no kept generation references",
            "sitemaps gc --out s3://www-sitemaps/sitemaps/ --dry-run")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--state", help=f"state URI (default: {settings.DEFAULT_STATE_HELP})")
    keep, grace = settings.default_of("keep_generations"), settings.default_of("gc_grace_hours")
    p.add_argument("--keep-generations", type=int, default=keep, metavar="K",
                   help=f"generations whose files are kept (default {keep})")
    p.add_argument("--grace-hours", type=float, default=grace, metavar="H",
                   help=f"delete only files older than this (default {grace:g})")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    from pipeline import cli_notify

    cli_notify.add_parsers(sub, epilog=_epilog)
    for command in sub.choices.values():  # `sitemaps run ... -q` as `sitemaps -q run ...`
        _add_global_flags(command, after_command=True)
    return parser


def _add_global_flags(parser: argparse.ArgumentParser, after_command: bool = False) -> None:
    """-q, -v and --debug: before the command, or after it (`after_command`: no default
    there, so one given before the command is not reset by the command's parser)."""
    default: Any = argparse.SUPPRESS if after_command else False
    parser.add_argument("-q", "--quiet", action="store_true", default=default,
                        help="warnings and errors only, no progress lines")
    parser.add_argument("-v", "--verbose", action="store_true", default=default,
                        help="log every step (INFO) instead of progress lines on a terminal")
    parser.add_argument("--debug", action="store_true", default=default,
                        help="show the traceback of an unexpected error")


def _options(args: argparse.Namespace) -> RunOptions:
    return settings.from_args(args)


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return
    c = summary["counts"]
    state = "published" if summary["published"] else "unchanged, still live"
    print(f"generation {summary['generation']} {state}")
    for f in summary["root_index_files"]:
        print(f"root index: {f}")
    notify = summary.get("notify") or {}
    if notify.get("feed"):
        print(f"feed: {notify['feed']}")
    if notify.get("report"):
        print(f"report: {notify['report']}")
    rejected = ", ".join(f"{k} {v:,}" for k, v in sorted(c["rejected"].items())) or "none"
    gate = (f", of which {c['not_indexable']:,} not indexable (the site's own signals)"
            if c.get("not_indexable") else "")
    print(f"input rows {c['input_rows']:,}: published {c['published']:,}, "
          f"rejected {c['rejected_rows']:,} ({rejected}){gate}")
    print(f"changes: {c['added']:,} added, {c['changed']:,} changed, {c['removed']:,} removed, "
          f"{c['unchanged']:,} unchanged")
    print(f"sitemaps: {c['sitemaps']:,} ({c['shards_written']:,} written, "
          f"{c['shards_reused']:,} reused, {c['shards_removed']:,} removed), "
          f"{c['bytes_written']:,} gzipped bytes written, {summary['seconds']:.1f} s")
    for w in summary["warnings"]:
        print(f"warning: {w}")


def _progress(args: argparse.Namespace) -> Progress:
    return getattr(args, "progress", None) or Progress(enabled=False)


def cmd_run(args: argparse.Namespace) -> int:
    from pipeline.run import run

    summary = run(_options(args), progress=_progress(args))
    _print_summary(summary, args.json)
    return 0


def demo_inventory_path(out: Path) -> Path:
    """The demo's inventory: beside the output folder, so it is never served with it."""
    return out.with_name(out.name + "-inventory") / "inventory.parquet"


def cmd_demo(args: argparse.Namespace) -> int:
    """A synthetic inventory, then exactly `sitemaps run` on it, with run's defaults."""
    from pipeline.demo import DEMO_SITE, make_inventory
    from pipeline.errors import ConfigError

    out = Path(args.out).absolute()
    inventory = Path(args.inventory).absolute() if args.inventory else demo_inventory_path(out)
    if inventory.is_relative_to(out):
        raise ConfigError(f"--inventory {inventory} is inside --out {out}, which is served: "
                          "put it elsewhere")
    progress = _progress(args)
    progress.step(f"demo inventory of {args.urls:,} URLs")
    make_inventory(inventory, args.urls)
    progress.done(str(inventory))
    run_args = build_parser().parse_args(
        ["run", "--inventory", str(inventory), "--site-url", DEMO_SITE, "--out", str(out),
         *(["--json"] if args.json else [])])
    run_args.progress = progress
    code = cmd_run(run_args)
    if not args.json:
        print(f"inventory: {inventory}")
        from pipeline.notify.report import report_key
        from pipeline.publish import read_live
        from pipeline.state_owner import resolve_state

        live = read_live(str(out)).generation
        report = Path(resolve_state(str(out), None)) / report_key(live) if live else None
        if report is not None and report.exists():
            print(f"open the report: {report.as_uri()}")
    return code


def cmd_status(args: argparse.Namespace) -> int:
    from pipeline.status import status

    report = status(args.out, deep=args.deep, state_uri=args.state)
    for warning in report.warnings:
        log.warning("%s", warning)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    elif report.live is not None:
        for k, v in report.to_dict().items():
            if k not in ("generations", "warnings"):  # the warnings are logged
                print(f"{k}: {v}")
        print("kept generations (newest first):")
        for g in report.generations:
            where = "live" if g.live else f"retired {g.retired or '?'}"
            files = "all files present" if not g.missing_files else \
                f"{g.missing_files:,} file(s) missing"
            print(f"  {g.generation}  {where:<28} {g.published:>12,} URLs "
                  f"{g.sitemaps:>7,} sitemaps  created {g.created} "
                  f"({g.age_hours:.1f} h ago)  {files}")
    if report.live is None:  # a typo in --out must not look like a healthy output
        print(f"error: no generation at {args.out}", file=sys.stderr)
        return 1
    return 0 if report.ok else 1


def cmd_repair(args: argparse.Namespace) -> int:
    from pipeline.status import repair

    report = repair(args.out, args.state)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    elif report.repaired:
        print(f"generation {report.live} is live again (was: {report.previous or 'unreadable'})")
    else:
        print(f"generation {report.live} is live and intact; nothing to repair")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from pipeline.status import rollback

    result = rollback(args.out, args.state, to=args.to)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        print(f"generation {result.live} is live again ({result.published:,} URLs in "
              f"{result.sitemaps:,} sitemaps); was: {result.previous}")
    return 0


def _warn_served_state(out: str, state: str | None) -> None:
    """Logs pipeline.status.served_state_warning: not a problem of the files, of serving."""
    from pipeline.status import served_state_warning

    warning = served_state_warning(out, state)
    if warning:
        log.warning("%s", warning)


def cmd_validate(args: argparse.Namespace) -> int:
    from pipeline.validate import validate

    result = validate(args.out, max_problems=args.max_problems)
    if result.generation is None and not args.json:  # nothing to list: say it once
        print(f"error: {result.problems[0]}", file=sys.stderr)
        return 1
    _warn_served_state(args.out, args.state)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, sort_keys=True))
    else:
        for problem in result.problems:
            print(f"problem: {problem}")
    if result.ok:
        if not args.json:
            print(f"valid: {args.out}: generation {result.generation}, {result.urls:,} URLs in "
                  f"{result.sitemaps:,} sitemaps, {result.indexes} index file(s)")
        return 0
    more = f" (stopped after the first {len(result.problems)})" if result.truncated else ""
    print(f"error: {args.out} is not valid: {len(result.problems)} problem(s){more}",
          file=sys.stderr)
    return 1


def cmd_verify(args: argparse.Namespace) -> int:
    from pipeline.errors import ConfigError
    from pipeline.verify import verify

    if args.sample < 1:
        raise ConfigError(f"--sample must be at least 1, not {args.sample}")
    result = verify(args.out, args.site_url, shards=None if args.all else args.sample,
                    stale_minutes=args.stale_minutes)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, sort_keys=True))
    else:
        for note in result.notes:
            print(f"note: {note}")
        for problem in result.problems:
            print(f"problem: {problem}")
    if result.ok:
        if not args.json:
            print(f"served: {result.site_url}: generation {result.generation}, "
                  f"{result.checked} file(s) fetched, as published")
        return 0
    print(f"error: the served copy of {args.out} has {len(result.problems)} problem(s)",
          file=sys.stderr)
    return 1


def cmd_explain(args: argparse.Namespace) -> int:
    from pipeline.explain import explain

    answer = explain(args.out, args.url, args.state)
    if args.json:
        print(json.dumps(answer.to_dict(), indent=2, sort_keys=True))
        return 0 if answer.published else 1
    print(f"url: {answer.normalized}" + ("" if answer.normalized == answer.url
                                         else f" (given as {answer.url})"))
    listing = answer.listing
    if listing is not None:
        print(f"published in generation {answer.generation} (live)")
        print(f"sitemap: {listing.sitemap_url} (section {listing.section}, shard {listing.shard})")
        print(f"index: {listing.index_url}")
        print(f"lastmod: {listing.lastmod or '-'}; first seen {listing.first_seen or '-'}, "
              f"last changed {listing.last_changed or '-'}"
              + (f"; unchanged since generation {answer.unchanged_since}"
                 if answer.unchanged_since else ""))
    elif answer.rejects:
        print(f"not published in generation {answer.generation} (live): rejected")
    else:
        print(f"not published in generation {answer.generation} (live): not in the inventory")
    for r in answer.rejects:
        lost = "lost" if r.reason == "duplicate" else "rejected"
        cause = r.cause()
        print(f"  row {r.row_id} {lost}: {r.reason}" + (f" ({cause})" if cause else "")
              + f": {r.why}; url as it came in {r.url!r}, "
              f"lastmod {r.lastmod or '-'}, changefreq {r.changefreq or '-'}, "
              f"priority {'-' if r.priority is None else r.priority}")
    print("history (newest first):")
    for g in answer.history:
        where = ("published" if g.published else "not published") if g.published is not None \
            else "its state is gone"
        print(f"  {g.generation}{' live' if g.live else ''}  {where}"
              + (f", {g.change}" if g.change else ""))
    return 0 if answer.published else 1


def cmd_diff(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from pipeline import storage
    from pipeline.errors import ConfigError
    from pipeline.publish import read_live
    from pipeline.run import dry_run

    if bool(args.out) == bool(args.state):
        raise ConfigError("give either --out (compare with its live generation) or --state")
    site_url = args.site_url
    scratch = None
    if args.out:
        live = read_live(args.out)
        site_url = site_url or (live.manifest["site_url"] if live.manifest else None)
        out = args.out
    else:
        out = scratch = tempfile.mkdtemp(prefix="sitemaps-diff-")
    try:
        if not site_url:
            raise ConfigError("--site-url is needed: no live manifest to take it from")
        snapshot = None
        if args.state:  # generation ids sort by time: the newest snapshot is the last
            snapshots = sorted(o.key for o in storage.open_storage(args.state).list(f"{GENERATIONS_FOLDER}/")
                               if o.key.endswith("/" + SNAPSHOT_KEY))
            snapshot = storage.join(args.state, snapshots[-1]) if snapshots else None
        report = dry_run(settings.from_args(args, site_url=site_url, out=out,
                                            compare_snapshot=snapshot))
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    # The changes' Parquet was in the run's work folder, removed when the dry run ended.
    report.pop("changes_uris", None)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True, default=str))
    else:
        c = report["counts"]
        print(f"compared with generation {report['live_generation'] or '(none)'}")
        print(f"would publish {c['published']:,} URLs: {c['added']:,} added, {c['changed']:,} "
              f"changed, {c['removed']:,} removed, {c['unchanged']:,} unchanged; "
              f"{c['rejected_rows']:,} rejected")
        print(f"sitemaps: {c['sitemaps']:,} ({c['shards_to_write']:,} to write, "
              f"{c['shards_reused']:,} reused, {c['shards_removed']:,} removed)")
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    from pipeline.gc import gc
    from pipeline.state_owner import resolve_state

    result = gc(args.out, resolve_state(args.out, args.state),
                keep=args.keep_generations, grace_hours=args.grace_hours, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    else:
        verb = "would delete" if args.dry_run else "deleted"
        for key in result.deleted + result.deleted_state:
            print(f"{verb}: {key}")
        if result.kept_generations:
            print(f"{verb} {len(result.deleted) + len(result.deleted_state)} file(s); "
                  f"kept generations {', '.join(result.kept_generations)}")
    if not result.kept_generations:  # a typo in --out must not look like a clean output
        print(f"error: no generation at {args.out}", file=sys.stderr)
        return 1
    return 0


COMMANDS = {"run": cmd_run, "demo": cmd_demo, "status": cmd_status, "diff": cmd_diff,
            "validate": cmd_validate, "verify": cmd_verify, "explain": cmd_explain, "gc": cmd_gc,
            "repair": cmd_repair, "rollback": cmd_rollback}


def _notify_commands() -> None:
    from pipeline.cli_notify import COMMANDS as NOTIFY_COMMANDS

    COMMANDS.update(NOTIFY_COMMANDS)


_notify_commands()


class _ProgressAwareHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Clears an unfinished progress line before a log record, so the two never run together."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(sys.stderr)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        self.progress.clear()
        super().emit(record)


def _configure_logging(args: argparse.Namespace, progress: Progress) -> None:
    # On a terminal the progress lines are the one line per step; INFO logs would repeat them.
    if args.verbose:
        level = logging.INFO
    elif args.quiet or progress.enabled:
        level = logging.WARNING
    else:
        level = logging.INFO
    handler = _ProgressAwareHandler(progress)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])  # a no-op when embedded (pytest)


def describe_unexpected(exc: BaseException) -> tuple[int, str]:
    """The exit code and one line for an exception no stage turned into a PipelineError."""
    try:
        from botocore.exceptions import BotoCoreError, NoCredentialsError
    except ImportError:  # pragma: no cover - boto3 is a dependency
        BotoCoreError = NoCredentialsError = ()  # type: ignore[assignment,misc,unused-ignore]
    if isinstance(exc, NoCredentialsError):
        from pipeline.preflight import NO_CREDENTIALS

        return StorageError.exit_code, NO_CREDENTIALS.format(uri="s3://")
    from pipeline import sql

    full = out_of_space(exc, sql.spill_dir_for_errors())
    if full is not None:
        return OutOfSpace.exit_code, str(full)
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return 2, f"{exc.strerror}{where}"
    if isinstance(exc, BotoCoreError):
        return 75, f"S3: {exc}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return 1, (f"unexpected {type(exc).__name__}{': ' + text if text else ''} "
               "(a bug: run again with --debug for the traceback, and report it)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    progress = Progress(enabled=False) if args.quiet or args.verbose else Progress()
    args.progress = progress
    _configure_logging(args, progress)
    try:
        settings.check_flags(args)
        return COMMANDS[args.command](args)
    except PipelineError as exc:
        code, message = exc.exit_code, str(exc)
    except KeyboardInterrupt:
        code, message = 130, "interrupted"
    except Exception as exc:  # noqa: BLE001 - no traceback reaches the terminal
        if args.debug:
            progress.clear()
            raise
        code, message = describe_unexpected(exc)
    progress.clear()
    print(f"error: {message}", file=sys.stderr)  # once: the library does not log it
    return code


if __name__ == "__main__":
    sys.exit(main())
