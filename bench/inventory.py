"""The benchmark's realistic inventory (bench/realistic_inventory.sql) and its statistics.

    .venv/bin/python bench/inventory.py --urls 1000000 --out /tmp/inv-1m.parquet --stats

Deterministic: the same --seed and --urls give the same Parquet (one DuckDB version).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SITE = "https://www.example.com/"
DEFAULT_SEED = 20261206

#: One row's statistics, then aggregated by stats(): what the issue asks the inventory to hold.
_STATS_SQL = r"""
WITH r AS (
    SELECT url, lastmod, changefreq, priority,
           starts_with(url, $site) AS on_site,
           length(url) AS len,
           -- path segments below the site (a trailing query excluded)
           CASE WHEN starts_with(url, $site)
                THEN len(string_split(split_part(substr(url, length($site) + 1), '?', 1), '/'))
           END AS depth,
           CASE WHEN starts_with(url, $site)
                     AND contains(split_part(substr(url, length($site) + 1), '?', 1), '/')
                THEN split_part(substr(url, length($site) + 1), '/', 1) ELSE '' END AS section
    FROM read_parquet($p)
)
SELECT
    count(*) AS rows,
    round(avg(len), 1) AS mean_url_length,
    max(len) AS max_url_length,
    quantile_disc(len, 0.5) AS median_url_length,
    quantile_disc(len, 0.99) AS p99_url_length,
    round(avg((len > 300)::INT), 4) AS share_over_300,
    round(avg((url LIKE '%&%' OR url LIKE '%''%')::INT), 4) AS share_xml_escape,
    round(avg(regexp_matches(url, '[^\x00-\x7f]')::INT), 4) AS share_raw_utf8,
    round(avg(regexp_matches(url, '%[0-9A-Fa-f]{2}')::INT), 4) AS share_percent_encoded,
    round(avg(contains(url, '?')::INT), 4) AS share_query,
    round(avg((lastmod IS NULL)::INT), 4) AS share_lastmod_null,
    round(avg((length(lastmod) = 10)::INT), 4) AS share_lastmod_date_only,
    min(lastmod) AS lastmod_min, max(lastmod) AS lastmod_max,
    round(avg((changefreq IS NULL)::INT), 4) AS share_changefreq_null,
    round(avg((priority IS NULL)::INT), 4) AS share_priority_null,
    round(avg(coalesce(NOT on_site, true)::INT), 4) AS share_not_on_site,
    round(1 - count(DISTINCT url) / count(*), 4) AS share_duplicate_urls
FROM r
"""

_GROUPS_SQL = """
WITH r AS (
    SELECT substr(url, length($site) + 1) AS rest FROM read_parquet($p)
    WHERE starts_with(url, $site)
)
SELECT {key} AS k, round(count(*) / sum(count(*)) OVER (), 4) AS share
FROM r GROUP BY 1 ORDER BY 2 DESC
"""


def make(path: Path, urls: int, seed: int = DEFAULT_SEED, site: str = SITE) -> float:
    """Writes the inventory Parquet to `path`; returns the seconds it took."""
    sys.path.insert(0, str(HERE.parent))
    from pipeline import sql

    started = time.monotonic()
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sql.connect(ordered=True)  # rows in the order of range(): the same file each time
    con.execute((HERE / "realistic_macros.sql").read_text(encoding="utf-8"))
    con.execute("CREATE TEMP TABLE inv_ids AS SELECT i FROM range($urls) t(i)", {"urls": urls})
    query = (HERE / "realistic_inventory.sql").read_text(encoding="utf-8")
    con.sql(query, params={"seed": seed, "site": site.rstrip("/")}
            ).write_parquet(str(path), compression="zstd")
    con.close()
    return round(time.monotonic() - started, 3)


def stats(path: Path, site: str = SITE) -> dict[str, Any]:
    """Length, depth, section, escape/UTF-8/percent and column shares of an inventory."""
    sys.path.insert(0, str(HERE.parent))
    from pipeline import sql

    con = sql.connect()
    params = {"p": str(path), "site": site}
    rel = con.sql(_STATS_SQL, params=params)
    out: dict[str, Any] = dict(zip(rel.columns, rel.fetchall()[0], strict=True))
    depth = "len(string_split(split_part(rest, '?', 1), '/'))"
    section = ("CASE WHEN contains(split_part(rest, '?', 1), '/') "
               "THEN split_part(rest, '/', 1) ELSE '(root level)' END")
    for name, key in (("depth", depth), ("sections", section)):
        out[name] = {str(k): float(v) for k, v in
                     con.sql(_GROUPS_SQL.format(key=key), params=params).fetchall()}
    out["parquet_mib"] = round(path.stat().st_size / 2**20, 1)
    con.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--urls", type=int, required=True)
    p.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--stats", action="store_true", help="print its statistics as JSON")
    args = p.parse_args(argv)
    seconds = make(args.out, args.urls, args.seed)
    print(f"# {args.urls:,} rows in {seconds} s: {args.out}", file=sys.stderr)
    if args.stats:
        print(json.dumps({"seconds": seconds, **stats(args.out)}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
