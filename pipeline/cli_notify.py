"""The notify subcommands of `sitemaps`: robots, feed, report, indexnow-key.

`pipeline.cli` registers them with `add_parsers(sub)` and dispatches through
`COMMANDS`; each command reads the live manifest of `--out` and writes nothing
but its own file.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pipeline.notify import DEFAULT_FEED_ENTRIES
from pipeline.settings import DEFAULT_STATE_HELP, default_of

#: The feed's days: the run option's default.
DEFAULT_FEED_DAYS: float = default_of("feed_days")


def add_robots_parser(sub: Any) -> None:
    p = sub.add_parser("robots", help="merge the live root index(es) into a robots.txt")
    p.add_argument("--out", required=True, help="the output whose live generation to list")
    p.add_argument("--robots", required=True,
                   help="the robots.txt to update: a local path or s3://bucket/robots.txt "
                        "(created when missing; other lines are kept byte for byte)")


def cmd_robots(args: argparse.Namespace) -> int:
    from pipeline.notify import robots_for_output

    changed = robots_for_output(args.out, args.robots)
    print(f"{args.robots}: {'updated' if changed else 'already up to date'}")
    return 0


def add_feed_parser(sub: Any) -> None:
    p = sub.add_parser("feed", help="write feed.atom: URLs added or changed recently")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--days", type=float, default=DEFAULT_FEED_DAYS,
                   help=f"generations of this many days (default {DEFAULT_FEED_DAYS:g})")
    p.add_argument("--max-entries", type=int, default=DEFAULT_FEED_ENTRIES, metavar="N",
                   help=f"newest entries kept (default {DEFAULT_FEED_ENTRIES:,})")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def cmd_feed(args: argparse.Namespace) -> int:
    from pipeline.notify import write_feed

    result = write_feed(args.out, days=args.days, max_entries=args.max_entries)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(f"{result['uri']}: {result['entries']:,} entries from "
              f"{len(result['generations'])} generation(s)")
    return 0


def add_report_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="write the live generation's HTML run report (internal: "
                                      "under the state prefix) and say where it is")
    p.add_argument("--out", required=True, help="local folder or s3://bucket/prefix/")
    p.add_argument("--state", help="state URI, where the report goes (default: "
                                   f"{DEFAULT_STATE_HELP})")
    p.add_argument("--generation", help="another kept generation instead of the live one")
    p.add_argument("--report-to", metavar="URI",
                   help="where reports go, as for run (default: the state prefix)")
    p.add_argument("--save", metavar="FILE",
                   help="also save a copy to this local file, to open in a browser (an S3 "
                        "report is not served)")


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pipeline import storage
    from pipeline.notify.report import write_generation_report

    uri = write_generation_report(args.out, args.generation, state_uri=args.state,
                                  report_to=args.report_to)
    print(uri)
    store, key = storage.open_file(uri)
    if args.save:
        target = Path(args.save).absolute()
        target.write_bytes(store.read_bytes(key))
        print(f"open the report: {target.as_uri()}")
    elif store.local_dir is not None:
        print(f"open the report: {Path(uri).as_uri()}")
    return 0


def add_indexnow_key_parser(sub: Any) -> None:
    p = sub.add_parser("indexnow-key", help="publish the IndexNow key file")
    p.add_argument("--out", required=True,
                   help="the output (or the storage of the site's root, with --site-root)")
    p.add_argument("--key", required=True)
    p.add_argument("--key-location", help="URL of the key file (default https://host/<key>.txt)")
    p.add_argument("--site-root", action="store_true",
                   help="--out is the storage served at the host's root, not an output")


def cmd_indexnow_key(args: argparse.Namespace) -> int:
    from pipeline import storage
    from pipeline.notify import publish_indexnow_key

    target = storage.open_storage(args.out) if args.site_root else args.out
    print(publish_indexnow_key(target, args.key, args.key_location))
    return 0


COMMANDS = {"robots": cmd_robots, "feed": cmd_feed, "report": cmd_report,
            "indexnow-key": cmd_indexnow_key}


EXAMPLES = {
    "robots": "sitemaps robots --out s3://www-sitemaps/sitemaps/ --robots s3://www-root/robots.txt",
    "feed": "sitemaps feed --out s3://www-sitemaps/sitemaps/ --days 7",
    "report": "sitemaps report --out s3://www-sitemaps/sitemaps/ --save report.html",
    "indexnow-key": "sitemaps indexnow-key --out s3://www-sitemaps/sitemaps/ --key KEY",
}


def add_parsers(sub: Any, epilog: Any = None) -> None:
    """Register every notify subcommand on the `sitemaps` subparsers; `epilog(example)`
    gives each its help's closing text (an example and the exit codes)."""
    add_robots_parser(sub)
    add_feed_parser(sub)
    add_report_parser(sub)
    add_indexnow_key_parser(sub)
    for name, example in EXAMPLES.items():
        p = sub.choices[name]
        p.description = p.description or _help_of(sub, name)
        if epilog is not None:
            p.epilog = epilog(example)
            p.formatter_class = argparse.RawDescriptionHelpFormatter


def _help_of(sub: Any, name: str) -> str | None:
    return next((a.help for a in sub._choices_actions if a.dest == name), None)
