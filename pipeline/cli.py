"""The `sitemaps` command line: run, demo, diff, status, repair, gc."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.config import Limits
from pipeline.errors import PipelineError
from pipeline.limits import MAX_BYTES_PER_SITEMAP, MAX_SITEMAPS_PER_INDEX, MAX_URLS_PER_SITEMAP
from pipeline.progress import Progress

log = logging.getLogger("sitemaps")


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--public-url", help="URL at which --out is served (default: --site-url)")
    p.add_argument("--state", help="state URI: snapshots between runs (default: <out>/_state)")
    p.add_argument("--work", help="work URI for intermediate files (default: a temp folder)")
    p.add_argument("--max-urls-per-sitemap", type=int, default=MAX_URLS_PER_SITEMAP)
    p.add_argument("--max-bytes-per-sitemap", type=int, default=MAX_BYTES_PER_SITEMAP,
                   help="uncompressed bytes per sitemap file")
    p.add_argument("--max-sitemaps-per-index", type=int, default=MAX_SITEMAPS_PER_INDEX)
    p.add_argument("--section-depth", type=int, default=1,
                   help="path segments that name a section (default 1)")
    p.add_argument("--run-id", help="names the work folder (default: the generation id)")
    p.add_argument("--allow-shrink", action="store_true",
                   help="publish even if far fewer URLs than the live generation")
    p.add_argument("--shrink-threshold", type=float, default=0.10,
                   help="largest allowed drop in published URLs (default 0.10)")
    p.add_argument("--max-reject-share", type=float, default=0.05,
                   help="fail when more than this share of rows is rejected (default 0.05)")
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
                        "one per 50,000,000 valid rows, pipeline.diff.DIFF_PARTITION_ROWS)")
    p.add_argument("--plan-slice-rows", type=int, metavar="N",
                   help="plan at most about N URLs at a time (default 4,000,000, "
                        "SITEMAPS_PLAN_SLICE_ROWS): bounds plan's memory and temp disk")
    p.add_argument("--no-conditional-write-check", action="store_true",
                   help="do not probe that the S3 server refuses a failed conditional write "
                        "(only for a server known to honour If-Match / If-None-Match)")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.add_argument("--feed-days", type=float, default=7.0,
                   help="feed.atom lists the changes of this many days (default 7; 0: no feed)")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--indexnow-key", help="submit each generation's changed URLs to IndexNow "
                                          "with this key (default: off)")
    p.add_argument("--indexnow-key-location", help="URL of the key file "
                                                   "(default https://<host>/<key>.txt)")
    p.add_argument("--indexnow-endpoint", help="default https://api.indexnow.org/indexnow")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sitemaps", description=__doc__)
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="publish sitemaps for an inventory")
    p.add_argument("--inventory", required=True,
                   help="Parquet file, glob or (Hive-partitioned) folder; local or s3://")
    p.add_argument("--site-url", required=True, help="the site, e.g. https://www.example.com/")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    _add_run_args(p)

    p = sub.add_parser("demo", help="make a synthetic inventory and publish its sitemaps locally")
    p.add_argument("--urls", type=int, default=1_000_000, help="inventory rows (default 1,000,000)")
    p.add_argument("--out", default="sitemaps-demo", help="output folder (default ./sitemaps-demo)")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")

    p = sub.add_parser("diff", help="dry run: what a run would change, writing nothing")
    p.add_argument("--inventory", required=True)
    p.add_argument("--out", help="the output whose live generation to compare with")
    p.add_argument("--state", help="or: a state URI (its newest snapshot is compared with)")
    p.add_argument("--site-url", help="default: the live manifest's site URL")
    p.add_argument("--section-depth", type=int, default=1)
    p.add_argument("--diff-partitions", type=int, metavar="N",
                   help="diff in N hash partitions (default: automatic, as for run)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("status", help="the live generation of an output, and whether every "
                                      "file it serves is in place (exit 1 if not)")
    p.add_argument("--out", required=True)
    p.add_argument("--deep", action="store_true",
                   help="also read every shard and check its sha256 against the manifest")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("repair", help="make the newest intact generation live again when "
                                      "manifest.json is empty or broken")
    p.add_argument("--out", required=True)
    p.add_argument("--state", help="state URI (default: <out>/_state)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("gc", help="delete files no kept generation references")
    p.add_argument("--out", required=True)
    p.add_argument("--state", help="state URI (default: <out>/_state)")
    p.add_argument("--keep-generations", type=int, default=3)
    p.add_argument("--grace-hours", type=float, default=48.0)
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    p.add_argument("--json", action="store_true")

    from pipeline import cli_notify

    cli_notify.add_parsers(sub)
    return parser


def _options(args: argparse.Namespace) -> Any:
    from pipeline.run import RunOptions

    return RunOptions(
        inventory=args.inventory, site_url=args.site_url, out=args.out,
        public_url=args.public_url, state=args.state, work=args.work,
        limits=Limits(args.max_urls_per_sitemap, args.max_bytes_per_sitemap,
                      args.max_sitemaps_per_index),
        run_id=args.run_id, section_depth=args.section_depth, allow_shrink=args.allow_shrink,
        shrink_threshold=args.shrink_threshold, max_reject_share=args.max_reject_share,
        force=args.force, lease_seconds=args.lease_seconds, format=args.format,
        keep_generations=args.keep_generations,
        gc_grace_hours=None if args.no_gc else args.gc_grace_hours,
        feed_days=args.feed_days or None, report=not args.no_report,
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
    rejected = ", ".join(f"{k} {v:,}" for k, v in sorted(c["rejected"].items())) or "none"
    print(f"input rows {c['input_rows']:,}: published {c['published']:,}, "
          f"rejected {c['rejected_rows']:,} ({rejected})")
    print(f"changes: {c['added']:,} added, {c['changed']:,} changed, {c['removed']:,} removed, "
          f"{c['unchanged']:,} unchanged")
    print(f"sitemaps: {c['sitemaps']:,} ({c['shards_written']:,} written, "
          f"{c['shards_reused']:,} reused, {c['shards_removed']:,} removed), "
          f"{c['bytes_written']:,} gzipped bytes written, {summary['seconds']:.1f} s")
    for w in summary["warnings"]:
        print(f"warning: {w}")


def cmd_run(args: argparse.Namespace) -> int:
    from pipeline.run import run

    summary = run(_options(args), progress=Progress())
    _print_summary(summary, args.json)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pipeline.demo import DEMO_SITE, make_inventory
    from pipeline.run import RunOptions, run

    out = Path(args.out).absolute()
    inventory = make_inventory(out / "_demo" / "inventory.parquet", args.urls)
    summary = run(RunOptions(inventory=str(inventory), site_url=DEMO_SITE, out=str(out)),
                  progress=Progress())
    _print_summary(summary, args.json)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from pipeline.status import status

    report = status(args.out, deep=args.deep)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        for k, v in report.items():
            print(f"{k}: {v}")
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


def cmd_diff(args: argparse.Namespace) -> int:
    import tempfile

    from pipeline import storage
    from pipeline.errors import ConfigError
    from pipeline.publish import read_live
    from pipeline.run import RunOptions, dry_run

    if bool(args.out) == bool(args.state):
        raise ConfigError("give either --out (compare with its live generation) or --state")
    site_url = args.site_url
    if args.out:
        live = read_live(args.out)
        site_url = site_url or (live.manifest or {}).get("site_url")
        out = args.out
    else:
        out = tempfile.mkdtemp(prefix="sitemaps-diff-")
    if not site_url:
        raise ConfigError("--site-url is needed: no live manifest to take it from")
    snapshot = None
    if args.state:  # generation ids sort by time: the newest snapshot is the last
        snapshots = sorted(o.key for o in storage.open_storage(args.state).list("generations/")
                           if o.key.endswith("/snapshot.parquet"))
        snapshot = storage.join(args.state, snapshots[-1]) if snapshots else None
    report = dry_run(RunOptions(inventory=args.inventory, site_url=site_url, out=out,
                                state=args.state, section_depth=args.section_depth,
                                compare_snapshot=snapshot, diff_partitions=args.diff_partitions))
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
    from pipeline import storage
    from pipeline.gc import gc

    result = gc(args.out, args.state or storage.join(args.out, "_state"),
                keep=args.keep_generations, grace_hours=args.grace_hours, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        verb = "would delete" if args.dry_run else "deleted"
        for key in result["deleted"] + result["deleted_state"]:
            print(f"{verb}: {key}")
        print(f"{verb} {len(result['deleted']) + len(result['deleted_state'])} file(s); kept "
              f"generations {', '.join(result['kept_generations']) or '(none)'}")
    return 0


COMMANDS = {"run": cmd_run, "demo": cmd_demo, "status": cmd_status, "diff": cmd_diff,
            "gc": cmd_gc, "repair": cmd_repair}


def _notify_commands() -> None:
    from pipeline.cli_notify import COMMANDS as NOTIFY_COMMANDS

    COMMANDS.update(NOTIFY_COMMANDS)


_notify_commands()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    try:
        return COMMANDS[args.command](args)
    except PipelineError as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
