"""The `sitemaps` command line: run, demo, diff, status, repair, rollback, validate, gc, robots,
feed, report, indexnow-key.

Every failure a user can cause ends in one `error:` line on stderr and a documented exit
code (EXIT_CODES); `--debug` shows the traceback of an unexpected error instead.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.config import Limits
from pipeline.errors import PipelineError, StorageError
from pipeline.layout import GENERATIONS_FOLDER, SNAPSHOT_KEY, default_state
from pipeline.limits import MAX_BYTES_PER_SITEMAP, MAX_SITEMAPS_PER_INDEX, MAX_URLS_PER_SITEMAP
from pipeline.progress import Progress

log = logging.getLogger("sitemaps")

EXIT_CODES = """\
exit codes:
  0    done
  1    status, gc: no generation at --out; status: the root index disagrees with the
       manifest; validate: problems found; an unexpected error (--debug: its traceback)
  2    bad input or configuration: fix it, a retry will not help (rollback: a generation
       not kept, or not intact)
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
    p.add_argument("--public-url", help="URL at which --out is served (default: --site-url)")
    p.add_argument("--state", help="state URI: snapshots between runs (default: <out>/_state)")
    p.add_argument("--work", help="work URI for intermediate files (default: a temp folder)")
    p.add_argument("--max-urls-per-sitemap", type=int, default=MAX_URLS_PER_SITEMAP, metavar="N",
                   help=f"URLs per sitemap file (default and most {MAX_URLS_PER_SITEMAP:,})")
    p.add_argument("--max-bytes-per-sitemap", type=int, default=MAX_BYTES_PER_SITEMAP,
                   metavar="N", help="uncompressed bytes per sitemap file (default and most "
                                     f"{MAX_BYTES_PER_SITEMAP:,})")
    p.add_argument("--max-sitemaps-per-index", type=int, default=MAX_SITEMAPS_PER_INDEX,
                   metavar="N", help="sitemaps per index file (default and most "
                                     f"{MAX_SITEMAPS_PER_INDEX:,}; more make more indexes)")
    p.add_argument("--section-depth", type=int, default=1, metavar="N",
                   help="path segments that name a section (default 1)")
    p.add_argument("--keep-deprecated-tags", action="store_true",
                   help="write the image tags Google stopped using in 2022 (caption, title, "
                        "geo_location, license); by default they are left out and counted")
    p.add_argument("--run-id", help="names the work folder (default: the generation id)")
    p.add_argument("--allow-shrink", action="store_true",
                   help="publish even if far fewer URLs than the live generation")
    p.add_argument("--shrink-threshold", type=float, default=0.10,
                   help="largest allowed drop in published URLs (default 0.10)")
    p.add_argument("--max-reject-share", type=float, default=0.05,
                   help="fail when more than this share of rows is rejected as bad data "
                        "(default 0.05; rows the indexability gate leaves out do not count)")
    p.add_argument("--force", action="store_true", help="rewrite every shard file")
    p.add_argument("--format", choices=("xml", "txt"), default="xml",
                   help="xml sitemaps (default) or plain-text ones, one URL a line")
    p.add_argument("--lease-seconds", type=float, default=0,
                   help="hold a lease on --out for this long (default 0: none)")
    p.add_argument("--keep-generations", type=int, default=3,
                   help="generations whose files gc keeps (default 3)")
    p.add_argument("--gc-grace-hours", type=float, default=48.0,
                   help="gc deletes only files older than this (default 48)")
    p.add_argument("--no-gc", action="store_true", help="do not garbage-collect after publishing")
    p.add_argument("--diff-partitions", type=int, metavar="N",
                   help="diff in N hash partitions of the URLs, one join at a time (default: "
                        "as many as keep each join in memory, at most 4; 1 on a first run)")
    p.add_argument("--plan-slice-rows", type=int, metavar="N",
                   help="plan at most about N URLs at a time (default 4,000,000, "
                        "SITEMAPS_PLAN_SLICE_ROWS): bounds plan's memory and temp disk")
    p.add_argument("--no-conditional-write-check", action="store_true",
                   help="do not probe that the S3 server refuses a failed conditional write "
                        "(only for a server known to honour If-Match / If-None-Match)")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.add_argument("--feed-days", type=float, default=7.0,
                   help="feed.atom lists the changes of this many days (default 7; 0: no feed)")
    p.add_argument("--no-report", action="store_true",
                   help="do not write the run report (<state>/generations/<id>/report.html)")
    p.add_argument("--report-to", metavar="URI",
                   help="where run reports go, <URI>/generations/<id>/report.html (default: "
                        "the state prefix); internal: not a served folder")
    p.add_argument("--indexnow-key", help="submit each generation's changed URLs to IndexNow "
                                          "with this key (default: off)")
    p.add_argument("--indexnow-key-location", help="URL of the key file "
                                                   "(default https://<host>/<key>.txt)")
    p.add_argument("--indexnow-endpoint",
                   help="where to submit (default https://api.indexnow.org/indexnow)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sitemaps", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{RUN_EXAMPLE}'sitemaps COMMAND --help' tells more.\n\n{EXIT_CODES}")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="warnings and errors only, no progress lines")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log every step (INFO) instead of progress lines on a terminal")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an unexpected error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str, example: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, epilog=_epilog(example),
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = add("run", "publish sitemaps for an inventory",
            "sitemaps run --inventory s3://inventory/urls/ --site-url https://www.example.com/ "
            "\\\n      --out s3://www-sitemaps/sitemaps/ "
            "--public-url https://www.example.com/sitemaps/")
    p.add_argument("--inventory", required=True,
                   help="Parquet file, glob or (Hive-partitioned) folder; local or s3://")
    p.add_argument("--site-url", required=True,
                   help="the site, scheme included, e.g. https://www.example.com/")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    _add_run_args(p)

    p = add("demo", "make a synthetic inventory and publish its sitemaps locally, as run does "
                    "(sitemaps, feed.atom, and the run report under _state/)",
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
    p.add_argument("--section-depth", type=int, default=1, metavar="N",
                   help="path segments that name a section (default 1)")
    p.add_argument("--keep-deprecated-tags", action="store_true",
                   help="as for run: the image tags Google no longer uses count as content")
    p.add_argument("--diff-partitions", type=int, metavar="N",
                   help="diff in N hash partitions (default: automatic, as for run)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    p = add("status", "the live generation of an output: counts, age, whether every file it "
                      "serves is in place and the root index agrees (exit 1 if not)",
            "sitemaps status --out s3://www-sitemaps/sitemaps/ --deep")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--deep", action="store_true",
                   help="also read every shard and check its sha256 against the manifest")
    p.add_argument("--json", action="store_true", help="print the status as JSON")

    p = add("repair", "make the newest intact generation live again when manifest.json is "
                      "empty or broken", "sitemaps repair --out s3://www-sitemaps/sitemaps/")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--state", help="state URI (default: <out>/_state)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = add("rollback", "make a kept generation live again (default: the one before the live "
                        "one), through the same conditional swap as a publish",
            "sitemaps rollback --out s3://www-sitemaps/sitemaps/ --to 20261201T030000Z-a1b2c3")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--to", metavar="GENERATION",
                   help="the generation to make live (default: the one before the live one; "
                        "`sitemaps status` lists the kept ones)")
    p.add_argument("--state", help="state URI (default: <out>/_state)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = add("validate", "check every live file against the sitemap XSDs and the protocol's "
                        "limits, the index references and the manifest's sizes and sha256s",
            "sitemaps validate --out s3://www-sitemaps/sitemaps/")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--max-problems", type=int, default=20, metavar="N",
                   help="stop after N problems (default 20)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = add("gc", "delete files no kept generation references",
            "sitemaps gc --out s3://www-sitemaps/sitemaps/ --dry-run")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--state", help="state URI (default: <out>/_state)")
    p.add_argument("--keep-generations", type=int, default=3, metavar="K",
                   help="generations whose files are kept (default 3)")
    p.add_argument("--grace-hours", type=float, default=48.0, metavar="H",
                   help="delete only files older than this (default 48)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    from pipeline import cli_notify

    cli_notify.add_parsers(sub, epilog=_epilog)
    return parser


def _options(args: argparse.Namespace) -> Any:
    from pipeline.run import RunOptions

    return RunOptions(
        inventory=args.inventory, site_url=args.site_url, out=args.out,
        public_url=args.public_url, state=args.state, work=args.work,
        limits=Limits(args.max_urls_per_sitemap, args.max_bytes_per_sitemap,
                      args.max_sitemaps_per_index),
        run_id=args.run_id, section_depth=args.section_depth, allow_shrink=args.allow_shrink,
        keep_deprecated_tags=args.keep_deprecated_tags,
        shrink_threshold=args.shrink_threshold, max_reject_share=args.max_reject_share,
        force=args.force, lease_seconds=args.lease_seconds, format=args.format,
        keep_generations=args.keep_generations,
        gc_grace_hours=None if args.no_gc else args.gc_grace_hours,
        feed_days=args.feed_days or None, report=not args.no_report, report_to=args.report_to,
        indexnow_key=args.indexnow_key, indexnow_key_location=args.indexnow_key_location,
        indexnow_endpoint=args.indexnow_endpoint, diff_partitions=args.diff_partitions,
        plan_slice_rows=args.plan_slice_rows,
        check_conditional_writes=not args.no_conditional_write_check)


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

        live = read_live(str(out)).generation
        report = Path(default_state(str(out))) / report_key(live) if live else None
        if report is not None and report.exists():
            print(f"open the report: {report.as_uri()}")
    return code


def cmd_status(args: argparse.Namespace) -> int:
    from pipeline.status import status

    report = status(args.out, deep=args.deep)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    elif report["live"] is not None:
        for k, v in report.items():
            if k != "generations":
                print(f"{k}: {v}")
        print("kept generations (newest first):")
        for g in report["generations"]:
            where = "live" if g["live"] else f"retired {g['retired'] or '?'}"
            files = "all files present" if not g["missing_files"] else \
                f"{g['missing_files']:,} file(s) missing"
            print(f"  {g['generation']}  {where:<28} {g['published']:>12,} URLs "
                  f"{g['sitemaps']:>7,} sitemaps  created {g['created']} "
                  f"({g['age_hours']:.1f} h ago)  {files}")
    if report["live"] is None:  # a typo in --out must not look like a healthy output
        print(f"error: no generation at {args.out}", file=sys.stderr)
        return 1
    return 0 if report["ok"] else 1


def cmd_repair(args: argparse.Namespace) -> int:
    from pipeline.status import repair

    report = repair(args.out, args.state)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    elif report["repaired"]:
        print(f"generation {report['live']} is live again (was: {report['previous'] or 'unreadable'})")
    else:
        print(f"generation {report['live']} is live and intact; nothing to repair")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from pipeline.status import rollback

    result = rollback(args.out, args.state, to=args.to)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(f"generation {result['live']} is live again ({result['published']:,} URLs in "
              f"{result['sitemaps']:,} sitemaps); was: {result['previous']}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from pipeline.validate import validate

    result = validate(args.out, max_problems=args.max_problems)
    if result.generation is None and not args.json:  # nothing to list: say it once
        print(f"error: {result.problems[0]}", file=sys.stderr)
        return 1
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


def cmd_diff(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from pipeline import storage
    from pipeline.errors import ConfigError
    from pipeline.publish import read_live
    from pipeline.run import RunOptions, dry_run

    if bool(args.out) == bool(args.state):
        raise ConfigError("give either --out (compare with its live generation) or --state")
    site_url = args.site_url
    scratch = None
    if args.out:
        live = read_live(args.out)
        site_url = site_url or (live.manifest or {}).get("site_url")
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
        report = dry_run(RunOptions(inventory=args.inventory, site_url=site_url, out=out,
                                    state=args.state, section_depth=args.section_depth,
                                    keep_deprecated_tags=args.keep_deprecated_tags,
                                    compare_snapshot=snapshot,
                                    diff_partitions=args.diff_partitions))
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

    result = gc(args.out, args.state or default_state(args.out),
                keep=args.keep_generations, grace_hours=args.grace_hours, dry_run=args.dry_run)
    result.setdefault("deleted_state", [])  # absent when there is no generation
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        verb = "would delete" if args.dry_run else "deleted"
        for key in result["deleted"] + result["deleted_state"]:
            print(f"{verb}: {key}")
        if result["kept_generations"]:
            print(f"{verb} {len(result['deleted']) + len(result['deleted_state'])} file(s); "
                  f"kept generations {', '.join(result['kept_generations'])}")
    if not result["kept_generations"]:  # a typo in --out must not look like a clean output
        print(f"error: no generation at {args.out}", file=sys.stderr)
        return 1
    return 0


COMMANDS = {"run": cmd_run, "demo": cmd_demo, "status": cmd_status, "diff": cmd_diff,
            "validate": cmd_validate, "gc": cmd_gc, "repair": cmd_repair,
            "rollback": cmd_rollback}


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
        BotoCoreError = NoCredentialsError = ()  # type: ignore[assignment,misc]
    if isinstance(exc, NoCredentialsError):
        from pipeline.preflight import NO_CREDENTIALS

        return StorageError.exit_code, NO_CREDENTIALS.format(uri="s3://")
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
