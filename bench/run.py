"""Benchmark harness: `sitemaps run` end to end against sitemap.js and a pure-Python baseline.

For each inventory size (the realistic inventory of bench/inventory.py by default, the demo
inventory of pipeline.demo.make_inventory with --inventory demo):

* runs `sitemaps run --json` in a subprocess, to a local folder, and records the
  wall time, URLs/s, CPU time, peak RSS (wait4 rusage of that very child), the
  bytes it wrote (/proc/<pid>/io, read before the child is reaped), an RSS
  timeline (polled from /proc/<pid>/status) and the summary's `stage_seconds`;
* splits the render stage into gzip / sha256 / write / rest by re-doing the
  gzip, hash and write of the files the run produced, outside the pipeline;
* with --incremental: changes 0.1% of the rows at random (half get a new
  lastmod, half a new changefreq: both change the row's fingerprint), runs
  again into the same output and compares time and bytes written;
* runs the peer, sitemap.js v9 (npm `sitemap`, SitemapAndIndexStream, createGzip, one Node
  thread), on the same rows exported to NDJSON before its timing starts; installed into
  ~/.cache/sitemap-pipeline-bench/sitemapjs when missing, skipped with a note when it cannot be;
* runs bench/baseline.py (the simplest correct pure-Python writer) the same
  way, fully or, when that would take too long, on a sample, extrapolated.

Prints a markdown table; --json FILE writes everything measured.

    /work/venv-probe/bin/python bench/run.py --urls 1000000 10000000 --incremental --json r.json

A benchmark, never a timed test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SITE = "https://www.example.com/"
STAGES = ("load", "diff", "plan", "render", "publish", "notify")
#: Seconds per stage for a 10M-URL first run that the hot-path work aims at (20 s in all).
BUDGET_10M = {"load": 4.0, "diff": 1.0, "plan": 5.0, "render": 4.0, "publish": 3.0,
              "notify": 1.0}
#: Log lines that end a stage (pipeline loggers: "<logger>: <stage>: ...").
_LOG_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ [\w.]+: (begin|load|diff|plan|render|run): ")
_MARKER_STAGE = {"begin": "startup", "load": "load", "diff": "diff", "plan": "plan",
                 "render": "render", "run": "publish"}


# --------------------------------------------------------------------------- measuring a child

def _proc_kib(pid: int, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _proc_io(pid: int) -> dict[str, int]:
    try:
        with open(f"/proc/{pid}/io") as f:
            return {k: int(v) for k, v in (line.split(": ") for line in f if ": " in line)}
    except OSError:
        return {}


def _busy_seconds() -> float:
    """CPU seconds spent by the whole machine (all cores, not idle/iowait) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def run_measured(cmd: list[str], *, env: dict[str, str], log_dir: Path, name: str,
                 poll: float = 0.2) -> dict[str, Any]:
    """Runs `cmd`; wall time, rusage of this child alone, its I/O counters, an RSS timeline."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = log_dir / f"{name}.stdout", log_dir / f"{name}.stderr"
    load_before = os.getloadavg()
    busy_before = _busy_seconds()
    # A child's rusage peak starts at this process's own peak (a fork copies the high-water
    # mark, and exec keeps it): after an in-process DuckDB export or inventory it would report
    # this harness's peak, not the child's. Kept to tell which figure to trust.
    own_kib = _proc_kib(os.getpid(), "VmHWM") or 0
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        started_epoch = time.time()
        t0 = time.monotonic()
        # Not in the repository: `python -m` puts the working directory first on sys.path,
        # so a --sitemaps wrapper running another checkout (PYTHONPATH=<tree>) would import
        # this checkout's pipeline instead.
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(log_dir))
    samples: list[tuple[float, int]] = []
    hwm = [0]  # the child's own VmHWM (its high-water mark since exec), as last seen
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            rss = _proc_kib(proc.pid, "VmRSS")
            if rss is not None:
                samples.append((time.time(), rss))
            hwm[0] = max(hwm[0], _proc_kib(proc.pid, "VmHWM") or 0)
            stop.wait(poll)

    poller = threading.Thread(target=sample, daemon=True)
    poller.start()
    # Wait for the exit without reaping, so that /proc/<pid>/io is still readable.
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    wall = time.monotonic() - t0
    stop.set()
    poller.join()
    io = _proc_io(proc.pid)
    busy = _busy_seconds() - busy_before
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    # rusage, unless it is no more than this process's own peak at the fork (then the child's
    # VmHWM, sampled every `poll` seconds: a lower bound by at most the last interval's growth)
    inherited = ru.ru_maxrss <= own_kib * 1.02
    peak_kib = max(hwm[0], max((r for _, r in samples), default=0)) if inherited \
        else ru.ru_maxrss
    return {
        "cmd": cmd, "returncode": proc.returncode, "wall_seconds": round(wall, 3),
        "started": started_epoch,
        "user_seconds": round(ru.ru_utime, 3), "sys_seconds": round(ru.ru_stime, 3),
        "cpu_util": round((ru.ru_utime + ru.ru_stime) / wall, 2) if wall else None,
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "peak_rss_source": "VmHWM (sampled)" if inherited else "rusage",
        "rusage_maxrss_mib": round(ru.ru_maxrss / 1024, 1),
        "harness_peak_rss_mib_at_spawn": round(own_kib / 1024, 1),
        "io_write_mib": round(io.get("wchar", 0) / 2**20, 1),
        "io_read_mib": round(io.get("rchar", 0) / 2**20, 1),
        "loadavg_before": [round(x, 2) for x in load_before],
        # Cores kept busy by other processes meanwhile (the machine is shared: 0 is quiet).
        "other_cpu_cores": round(max(busy - ru.ru_utime - ru.ru_stime, 0.0) / wall, 2),
        "rss_samples": samples,
        "stdout": str(stdout_path), "stderr": str(stderr_path),
    }


def stage_peaks(stderr_path: str, samples: list[tuple[float, int]], started: float
                ) -> dict[str, float]:
    """Peak RSS (MiB) per stage, from the log lines that end each stage."""
    marks: list[tuple[float, str]] = []
    for line in Path(stderr_path).read_text(errors="replace").splitlines():
        m = _LOG_LINE.match(line)
        if m:
            t = time.mktime(time.strptime(m.group(1)[:19], "%Y-%m-%d %H:%M:%S"))
            marks.append((t + int(m.group(1)[20:]) / 1000, _MARKER_STAGE[m.group(2)]))
    peaks: dict[str, float] = {}
    lo = started
    for t, stage in marks + [(float("inf"), "exit")]:
        inside = [rss for ts, rss in samples if lo <= ts <= t]
        if inside:
            peaks[stage] = round(max(inside) / 1024, 1)
        lo = t
    return peaks


def _tail(path: str, n: int = 30) -> str:
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])


# --------------------------------------------------------------------------- inventories

INVENTORIES = ("realistic", "demo")


def make_inventory(path: Path, urls: int, kind: str = "realistic",
                   seed: int | None = None) -> float:
    """Writes the `kind` inventory of `urls` rows; returns the seconds it took."""
    t = time.monotonic()
    if kind == "demo":
        from pipeline.demo import make_inventory as demo_inventory

        demo_inventory(path, urls)
    else:
        sys.path.insert(0, str(ROOT / "bench"))
        import inventory

        inventory.make(path, urls, inventory.DEFAULT_SEED if seed is None else seed, SITE)
    return round(time.monotonic() - t, 3)


def _bump_sql(con: Any, src: Path) -> str:
    """The new lastmod ($bump) in the inventory's own lastmod type: the realistic inventory
    holds W3C strings, the demo timestamps."""
    types = dict(con.sql("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                         "read_parquet($p))", params={"p": str(src)}).fetchall())
    if types.get("lastmod") == "VARCHAR":
        return "strftime($bump::TIMESTAMPTZ, '%Y-%m-%dT%H:%M:%SZ')"
    return "$bump::TIMESTAMPTZ"


def clustered_change(src: Path, dst: Path, changed: int = 10_000, added: int = 5_000
                     ) -> dict[str, Any]:
    """A copy of `src` where `changed` rows of one contiguous URL range of the largest
    section get a new lastmod (an hour ago) and `added` new URLs land at the end of that
    section: the change a nightly run of a real site most often sees. The range is of the
    site's own URLs: sorted by their text, the demo's rejected rows (ftp:// and other hosts)
    come first, and a range among them changed nothing published (at 100M, none of the
    10,000 rows; at 10M, 1,193)."""
    from pipeline import sql

    t = time.monotonic()
    con = sql.connect()
    con.sql("SELECT *, split_part(url, '/', 4) AS sec FROM read_parquet($p)",
            params={"p": str(src)}).create_view("inv")
    section = sql.scalar(con, "SELECT sec FROM inv GROUP BY sec ORDER BY count(*) DESC LIMIT 1")
    lo, hi = con.sql("""
        SELECT min(url), max(url) FROM (
            SELECT url FROM inv WHERE sec = $s AND starts_with(url, $site)
            ORDER BY url LIMIT $n OFFSET 1000)""",
                     params={"s": section, "n": changed, "site": SITE}).fetchall()[0]
    bump = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    site = SITE.rstrip("/")
    new = _bump_sql(con, src)
    con.sql(f"""
        SELECT * EXCLUDE (sec) REPLACE (
            CASE WHEN sec = $s AND url BETWEEN $lo AND $hi THEN {new}
                 ELSE lastmod END AS lastmod)
        FROM inv
        UNION ALL
        SELECT $site || '/' || $s || '/zzz-new-' || i AS url, {new} AS lastmod,
               NULL AS changefreq, NULL AS priority
        FROM range($added) t(i)
    """, params={"s": section, "lo": lo, "hi": hi, "bump": bump, "site": site,
                 "added": added}).write_parquet(str(dst), compression="zstd")
    con.close()
    return {"rows": int(sql.scalar(sql.connect(), "SELECT count(*) FROM read_parquet($p)",
                                   {"p": str(dst)})),
            "changed_rows": changed, "added_rows": added, "section": section,
            "seconds": round(time.monotonic() - t, 3)}


def mutate_inventory(src: Path, dst: Path, share: float, seed: int) -> dict[str, Any]:
    """A copy of `src` with `share` of its rows changed at random (same order, same schema).

    Half of the chosen rows get a new lastmod (an hour ago: a real, recent change),
    the other half a different changefreq (a payload change; the demo inventory has
    no content_hash, so the payload is the row's fingerprint).
    """
    import pyarrow as pa

    from pipeline import sql

    t = time.monotonic()
    con = sql.connect()
    n = int(sql.scalar(con, "SELECT count(*) FROM read_parquet($p)", {"p": str(src)}))
    k = max(1, round(n * share))
    rng = random.Random(seed)
    rows = rng.sample(range(n), k)
    con.register("chosen", pa.table({"rn": pa.array(rows, pa.int64()),
                                     "mode": pa.array([i % 2 for i in range(k)], pa.int8())}))
    bump = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    con.sql(f"""
        SELECT
            i.* REPLACE (
                CASE WHEN c.mode = 0 THEN {_bump_sql(con, src)} ELSE i.lastmod END AS lastmod,
                CASE WHEN c.mode = 1 THEN CASE i.changefreq WHEN 'daily' THEN 'weekly'
                                                            WHEN 'weekly' THEN 'monthly'
                                                            ELSE 'daily' END
                     ELSE i.changefreq END AS changefreq)
        FROM read_parquet($p, file_row_number = true) i
        LEFT JOIN chosen c ON c.rn = i.file_row_number
        ORDER BY i.file_row_number
    """, params={"p": str(src), "bump": bump}).project(
        "* EXCLUDE (file_row_number)").write_parquet(str(dst), compression="zstd")
    con.close()
    return {"rows": n, "changed_rows": k, "lastmod_changed": (k + 1) // 2,
            "changefreq_changed": k // 2, "seed": seed, "seconds": round(time.monotonic() - t, 3)}


# --------------------------------------------------------------------------- outputs

def listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """path -> (size, inode, mtime_ns) of every file below `root` (work/tmp folders excluded)."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (st.st_size, st.st_ino, st.st_mtime_ns)
    return out


def new_files(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]
              ) -> dict[str, int]:
    return {k: v[0] for k, v in after.items() if before.get(k) != v}


def render_breakdown(files: list[Path], scratch: Path) -> dict[str, Any]:
    """Re-does, outside the pipeline, the gzip (same codec and level), sha256 and write
    of the given output files: an estimate of render's share spent in each."""
    from isal import igzip, isal_zlib

    level = min(int(os.environ.get("SITEMAPS_GZIP_LEVEL", "1")), 3)
    scratch.mkdir(parents=True, exist_ok=True)
    gz_s = sha_s = write_s = 0.0
    raw_bytes = gz_bytes = 0
    for f in files:
        raw = igzip.decompress(f.read_bytes())
        raw_bytes += len(raw)
        t = time.perf_counter()
        z = isal_zlib.compressobj(level, isal_zlib.DEFLATED, 31)
        data = z.compress(raw) + z.flush()
        t2 = time.perf_counter()
        hashlib.sha256(data).hexdigest()
        t3 = time.perf_counter()
        fd, tmp = tempfile.mkstemp(dir=scratch)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, scratch / "last.xml.gz")
        t4 = time.perf_counter()
        gz_s, sha_s, write_s = gz_s + t2 - t, sha_s + t3 - t2, write_s + t4 - t3
        gz_bytes += len(data)
    shutil.rmtree(scratch, ignore_errors=True)
    return {"files": len(files), "raw_mib": round(raw_bytes / 2**20, 1),
            "gzip_mib": round(gz_bytes / 2**20, 1), "gzip_level": level,
            "gzip_seconds": round(gz_s, 3), "sha256_seconds": round(sha_s, 3),
            "write_seconds": round(write_s, 3),
            "gzip_mb_per_s": round(raw_bytes / 1e6 / gz_s, 1) if gz_s else None}


# --------------------------------------------------------------------------- one pipeline run

def pipeline_run(sitemaps: str, inventory: Path, out: Path, env: dict[str, str], logs: Path,
                 name: str) -> dict[str, Any]:
    before = listing(out) if out.exists() else {}
    cmd = [sitemaps, "run", "--inventory", str(inventory), "--site-url", SITE,
           "--out", str(out), "--json"]
    m = run_measured(cmd, env=env, log_dir=logs, name=name)
    if m["returncode"] != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({m['returncode']}):\n{_tail(m['stderr'])}")
    summary = json.loads(Path(m["stdout"]).read_text())
    changed = new_files(before, listing(out))
    shard_files = [out / k for k in changed if k.startswith("sitemaps/") and k.endswith(".xml.gz")]
    m["summary"] = summary
    m["stage_peak_rss_mib"] = stage_peaks(m["stderr"], m["rss_samples"], m["started"])
    m["files_written"] = len(changed)
    m["bytes_on_disk_written"] = sum(changed.values())
    m["shard_gzip_bytes_written"] = summary["counts"]["bytes_written"]
    m["render_breakdown"] = render_breakdown(shard_files, out.parent / f".scratch-{name}")
    m["rss_samples"] = _thin(m["rss_samples"])
    return m


def _thin(samples: list[tuple[float, int]], keep: int = 200) -> list[tuple[float, float]]:
    """At most `keep` (seconds since start, RSS MiB) points, for the JSON."""
    if not samples:
        return []
    t0 = samples[0][0]
    step = max(1, len(samples) // keep)
    return [(round(t - t0, 2), round(r / 1024, 1)) for t, r in samples[::step]]


def shares(m: dict[str, Any]) -> dict[str, float]:
    """Each stage's share of the end-to-end wall time; render split by the breakdown."""
    wall = m["wall_seconds"]
    st = m["summary"].get("stage_seconds", {})
    out = {s: st.get(s, 0.0) / wall for s in STAGES}
    b = m["render_breakdown"]
    render = st.get("render", 0.0)
    out["render.gzip"] = min(b["gzip_seconds"], render) / wall
    out["render.write"] = min(b["write_seconds"] + b["sha256_seconds"],
                              max(render - b["gzip_seconds"], 0.0)) / wall
    out["render.rest"] = max(render - b["gzip_seconds"] - b["write_seconds"]
                             - b["sha256_seconds"], 0.0) / wall
    out["other"] = max(wall - sum(st.get(s, 0.0) for s in STAGES), 0.0) / wall
    return {k: round(v, 4) for k, v in out.items()}


# --------------------------------------------------------------------------- baseline

def baseline_run(inventory: Path, out: Path, env: dict[str, str], logs: Path, size: int,
                 limit: int | None, level: int) -> dict[str, Any]:
    cmd = [sys.executable, str(ROOT / "bench" / "baseline.py"), "--inventory", str(inventory),
           "--out", str(out), "--site-url", SITE, "--gzip-level", str(level)]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    m = run_measured(cmd, env=env, log_dir=logs, name=f"baseline-{size}")
    if m["returncode"] != 0:
        raise SystemExit(f"baseline failed ({m['returncode']}):\n{_tail(m['stderr'])}")
    m["summary"] = json.loads(Path(m["stdout"]).read_text())
    m["rss_samples"] = _thin(m["rss_samples"])
    rows = m["summary"]["input_rows"]
    m["mode"] = ("full" if limit is None or rows >= size
                 else f"sample of {rows:,} rows, extrapolated")
    m["seconds"] = round(m["wall_seconds"] * size / rows, 1) if rows else None
    shutil.rmtree(out, ignore_errors=True)
    return m


def baseline_limit(size: int, args: argparse.Namespace, done: list[dict[str, Any]]) -> int | None:
    """None: run the baseline fully; else the sample size."""
    if args.baseline_max_urls is not None:
        return args.baseline_max_urls if size > args.baseline_max_urls else None
    full = [r for r in done if r.get("baseline", {}).get("mode") == "full"]
    if not full:
        return None
    ref = max(full, key=lambda r: r["urls"])
    projected = ref["baseline"]["wall_seconds"] * size / ref["urls"]
    return None if projected <= args.baseline_budget else ref["urls"]


# --------------------------------------------------------------------------- the peer: sitemap.js

SITEMAPJS_SPEC = "sitemap@9"
SITEMAPJS_CACHE = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                   / "sitemap-pipeline-bench" / "sitemapjs")


def sitemapjs_install(cache: Path = SITEMAPJS_CACHE) -> tuple[Path | None, str]:
    """(the folder holding node_modules/sitemap, "") or (None, why the peer is skipped)."""
    if shutil.which("node") is None:
        return None, "no `node` on PATH"
    pkg = cache / "node_modules" / "sitemap" / "package.json"
    if not pkg.is_file():
        if shutil.which("npm") is None:
            return None, "no `npm` on PATH to install sitemap.js"
        cache.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix",
                                   str(cache), SITEMAPJS_SPEC], capture_output=True, text=True,
                                  timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"`npm install {SITEMAPJS_SPEC}` failed: {e}"
        if done.returncode != 0 or not pkg.is_file():
            said = [line for line in (done.stderr or done.stdout).splitlines()
                    if line.strip() and "complete log" not in line]
            return None, f"`npm install {SITEMAPJS_SPEC}` failed: {said[0] if said else '?'}"
    version = json.loads(pkg.read_text()).get("version", "")
    if not version.startswith("9."):
        return None, f"{pkg} is sitemap {version}, not 9.x; remove {cache} to reinstall"
    return cache, ""


def export_rows(inventory: Path, dst: Path) -> float:
    """The inventory's url, lastmod (a W3C string), changefreq and priority as NDJSON, for
    the peer to stream; done before its timing starts. Returns the seconds it took."""
    from pipeline import sql

    t = time.monotonic()
    con = sql.connect(ordered=True)
    types = dict(con.sql("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                         "read_parquet($p))", params={"p": str(inventory)}).fetchall())
    cols = ["url"]
    if "lastmod" in types:
        cols.append("lastmod" if types["lastmod"] == "VARCHAR" else
                    "strftime(lastmod::TIMESTAMPTZ, '%Y-%m-%dT%H:%M:%SZ') AS lastmod")
    cols += [c for c in ("changefreq", "priority") if c in types]
    con.execute(f"COPY (SELECT {', '.join(cols)} FROM read_parquet($p)) TO $dst "
                "(FORMAT json)", {"p": str(inventory), "dst": str(dst)})
    con.close()
    return round(time.monotonic() - t, 3)


def sitemapjs_run(module_dir: Path, rows: Path, out: Path, env: dict[str, str], logs: Path,
                  size: int, level: int) -> dict[str, Any]:
    cmd = ["node", str(ROOT / "bench" / "sitemapjs_peer.js"), str(module_dir), str(rows),
           str(out), SITE, str(level)]
    m = run_measured(cmd, env=env, log_dir=logs, name=f"sitemapjs-{size}")
    if m["returncode"] != 0:
        raise SystemExit(f"sitemap.js failed ({m['returncode']}):\n{_tail(m['stderr'])}")
    m["summary"] = json.loads(Path(m["stdout"]).read_text())
    m["rss_samples"] = _thin(m["rss_samples"])
    shutil.rmtree(out, ignore_errors=True)
    return m


# --------------------------------------------------------------------------- report

def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"commit {meta['commit']}, pipeline/sql changes: {meta['dirty'] or 'none'} "
             f"(at the end: {meta.get('commit_at_end', '?')}, "
             f"{meta.get('dirty_at_end') or 'none'}); "
             + (f"the code run: {meta['sitemaps']} (the commit is the harness's own); "
                if meta.get("sitemaps") else "") +
             f"{meta['cpus']} cores, Python {meta['python']}, DuckDB {meta['duckdb']}, "
             f"pyarrow {meta['pyarrow']}, gzip level {meta['gzip_level']} (isal); "
             f"inventory: {meta['inventory']}", ""]
    lines += _peer_table(results, meta)
    lines += ["| inventory | URLs | pipeline s | URLs/s | peak RSS MiB | CPU (cores) | load | diff | plan "
              "| render (gzip / write+sha / rest) | publish | other | others' CPU | baseline s "
              "| baseline RSS MiB | baseline / pipeline |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        p, s = r["pipeline"], r["shares"]
        b = r.get("baseline")
        if b:
            bcells = (f"{b['seconds']:.1f}" + ("" if b["mode"] == "full" else " (est.)"),
                      f"{b['peak_rss_mib']:.0f}" + ("" if b["mode"] == "full" else " (sample)"),
                      f"{b['seconds'] / p['wall_seconds']:.1f}x")
        else:
            bcells = ("-", "-", "-")
        cells = [r["inventory"], f"{r['urls']:,}", f"{p['wall_seconds']:.1f}",
                 f"{r['urls'] / p['wall_seconds']:,.0f}", f"{p['peak_rss_mib']:.0f}",
                 f"{p['cpu_util']:.2f}", _pct(s["load"]), _pct(s["diff"]), _pct(s["plan"]),
                 f"{_pct(s['render'])} ({_pct(s['render.gzip'])} / {_pct(s['render.write'])} / "
                 f"{_pct(s['render.rest'])})", _pct(s["publish"]), _pct(s["other"]),
                 f"{p['other_cpu_cores']:.2f}", *bcells]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Seconds per stage against the budget of the hot-path issue (10M URLs: 20 s in "
              "all; scaled linearly to each size):", "",
              "| URLs | " + " | ".join(f"{k} s (budget)" for k in BUDGET_10M) + " | total s (budget) |",
              "|---:|" + "---:|" * (len(BUDGET_10M) + 1)]
    for r in results:
        st = r["pipeline"]["summary"].get("stage_seconds", {})
        scale = r["urls"] / 10_000_000
        cells = [f"{st.get(k, 0):.1f} ({b * scale:.1f})" for k, b in BUDGET_10M.items()]
        lines.append(f"| {r['urls']:,} | " + " | ".join(cells) + f" | "
                     f"{r['pipeline']['wall_seconds']:.1f} ({20 * scale:.1f}) |")
    lines += ["", "CPU seconds per stage (the pipeline process's user and system time, every "
              "thread): each size's first run, then each change's second run:", "",
              "| URLs | run | begin | " + " | ".join(STAGES) + " | all (process) |",
              "|---:|---|" + "---:|" * (len(STAGES) + 2)]
    for r in results:
        runs = [("first", r["pipeline"])] + [
            (i["mutation"].get("change", "random"), i["run"])
            for i in r.get("incrementals") or ([r["incremental"]] if r.get("incremental") else [])]
        for label, m in runs:
            cpu = m["summary"].get("stage_cpu_seconds", {})
            cells = [f"{cpu[k]:.1f}" if k in cpu else "-" for k in ("begin", *STAGES)]
            lines.append(f"| {r['urls']:,} | {label} | " + " | ".join(cells)
                         + f" | {m['user_seconds'] + m['sys_seconds']:.1f} |")
    notes = [f"baseline at {r['urls']:,}: {r['baseline']['mode']}, "
             f"{r['baseline']['summary']['urls']:,} URLs written "
             f"(pipeline published {r['pipeline']['summary']['counts']['published']:,})"
             for r in results if r.get("baseline")]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    inc = [(r, i) for r in results for i in r.get("incrementals") or
           ([r["incremental"]] if r.get("incremental") else [])]
    if inc:
        lines += ["", "| URLs | change | changed rows | run 1 s | run 2 s | run 2 / run 1 "
                  "| run 1 gzip bytes | run 2 gzip bytes | bytes ratio | shards written (run 2) "
                  "| run 2 stages s |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r, i in inc:
            a, b = r["pipeline"], i["run"]
            c = b["summary"]["counts"]
            st = b["summary"].get("stage_seconds", {})
            lines.append(
                f"| {r['urls']:,} | {i['mutation'].get('change', 'random')} | "
                f"{i['mutation']['changed_rows']:,} "
                f"({c['changed']:,} seen changed) | {a['wall_seconds']:.1f} | "
                f"{b['wall_seconds']:.1f} | {b['wall_seconds'] / a['wall_seconds']:.2f} | "
                f"{a['shard_gzip_bytes_written']:,} | {b['shard_gzip_bytes_written']:,} | "
                f"{b['shard_gzip_bytes_written'] / max(a['shard_gzip_bytes_written'], 1):.3f} | "
                f"{c['shards_written']:,} of {c['sitemaps']:,} | "
                + ", ".join(f"{k} {st[k]:.1f}" for k in STAGES if k in st) + " |")
    return "\n".join(lines)


def _peer_table(results: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """The pipeline beside sitemap.js (and the baseline), the same rows, the same sitting."""
    lines = ["First run against the peer, sitemap.js "
             f"{meta.get('sitemapjs') or '(skipped: ' + str(meta.get('sitemapjs_note')) + ')'} "
             "(one Node thread, SitemapAndIndexStream + createGzip level "
             f"{meta.get('peer_gzip_level')} fed in 64 KiB writes, ErrorLevel.SILENT: no validation, "
             "no diff, no state; its rows read from NDJSON exported from the Parquet before its "
             "timing), "
             "and the pure-Python baseline:", "",
             "| inventory | URLs | pipeline s | pipeline RSS MiB | sitemap.js s "
             "| sitemap.js RSS MiB | sitemap.js / pipeline (time) | sitemap.js / pipeline (RSS) "
             "| baseline s | baseline / pipeline (time) | others' CPU (pipeline / sitemap.js) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        p, j, b = r["pipeline"], r.get("sitemapjs"), r.get("baseline")
        jc = ((f"{j['wall_seconds']:.1f}", f"{j['peak_rss_mib']:.0f}",
               f"{j['wall_seconds'] / p['wall_seconds']:.2f}x",
               f"{j['peak_rss_mib'] / p['peak_rss_mib']:.2f}x") if j else ("-",) * 4)
        bc = ((f"{b['seconds']:.1f}" + ("" if b["mode"] == "full" else " (est.)"),
               f"{b['seconds'] / p['wall_seconds']:.2f}x") if b else ("-", "-"))
        others = f"{p['other_cpu_cores']:.2f} / " + (f"{j['other_cpu_cores']:.2f}" if j else "-")
        lines.append("| " + " | ".join([r["inventory"], f"{r['urls']:,}",
                                        f"{p['wall_seconds']:.1f}", f"{p['peak_rss_mib']:.0f}",
                                        *jc, *bc, others]) + " |")
    notes = [f"sitemap.js at {r['urls']:,}: {r['sitemapjs']['summary']['urls']:,} URLs written "
             f"in {r['sitemapjs']['summary']['files']:,} files (every row with a URL: it "
             "rejects nothing), rows exported in "
             f"{r['sitemapjs']['export_seconds']} s (not timed)"
             for r in results if r.get("sitemapjs")]
    return lines + [""] + [f"- {n}" for n in notes] + ([""] if notes else [])


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError:
        return "?"


def metadata() -> dict[str, Any]:
    import duckdb
    import pyarrow

    return {"commit": _git("rev-parse", "--short", "HEAD"),
            "dirty": " ".join(_git("status", "--short", "pipeline", "sql").split("\n")).strip(),
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "duckdb": duckdb.__version__, "pyarrow": pyarrow.__version__,
            "gzip_level": int(os.environ.get("SITEMAPS_GZIP_LEVEL", "1")),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "process_memory": os.environ.get("SITEMAPS_MEMORY", "1.5GB (default)"),
            "duckdb_memory_limit": _duckdb_memory_limit()}


def _duckdb_memory_limit() -> str:
    from pipeline.sql import duckdb_memory_limit

    return duckdb_memory_limit()


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--urls", type=int, nargs="+", default=[1_000_000, 10_000_000],
                   help="inventory sizes (default: 1000000 10000000)")
    p.add_argument("--out-dir", type=Path,
                   help="where inventories and outputs go, kept (default: a temp dir, removed)")
    p.add_argument("--baseline-max-urls", type=int,
                   help="run the baseline on a sample of N rows for larger sizes, extrapolated "
                        "(default: full, unless the projection from a smaller size exceeds "
                        "--baseline-budget)")
    p.add_argument("--baseline-budget", type=float, default=300.0,
                   help="seconds a full baseline run may be projected to take (default 300)")
    p.add_argument("--baseline-gzip-level", type=int, default=6)
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--inventory", choices=INVENTORIES, default="realistic",
                   help="realistic (bench/realistic_inventory.sql, the default) or demo "
                        "(sql/demo_inventory.sql)")
    p.add_argument("--inventory-seed", type=int,
                   help="the realistic inventory's seed (default: bench/inventory.py's)")
    p.add_argument("--no-peer", action="store_true", help="do not run sitemap.js")
    p.add_argument("--peer-gzip-level", type=int, default=1,
                   help="sitemap.js's createGzip level (default 1, the pipeline's default)")
    p.add_argument("--incremental", action="store_true",
                   help="second run on the same output after changing the inventory (--change)")
    p.add_argument("--change", choices=("random", "clustered", "none", "untouched"), nargs="+",
                   default=["random"],
                   help="what --incremental changes: --change-share of the rows at random "
                        "(default), 10,000 rows of one URL range and 5,000 new URLs at the end "
                        "of one section (clustered), nothing (none: a copy of the same inventory, "
                        "whose rows begin reads), or nothing at all (untouched: the very same "
                        "file, which begin finds unchanged from its listing: the common "
                        "nightly case); several run one after the other on "
                        "the same output, each against the first inventory")
    p.add_argument("--change-share", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=20261202)
    default_sitemaps = str(Path(sys.executable).parent / "sitemaps")
    p.add_argument("--sitemaps", default=default_sitemaps,
                   help="the sitemaps executable (default: beside this Python)")
    p.add_argument("--json", type=Path, help="write all results as JSON to this file")
    args = p.parse_args(argv)
    if not Path(args.sitemaps).exists():
        p.error(f"no sitemaps executable at {args.sitemaps}; pass --sitemaps")

    sys.path.insert(0, str(ROOT))
    own = args.out_dir is None
    base = Path(tempfile.mkdtemp(prefix="sitemaps-bench-")) if own else args.out_dir.absolute()
    base.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["TMPDIR"] = str(base / "tmp")  # work folders and DuckDB spill stay inside `base`
    (base / "tmp").mkdir(exist_ok=True)
    meta = metadata()
    meta["inventory"] = args.inventory
    meta["peer_gzip_level"] = args.peer_gzip_level
    peer_dir: Path | None = None
    if not args.no_peer:
        peer_dir, note = sitemapjs_install()
        if peer_dir is None:
            meta["sitemapjs_note"] = note
            print(f"# sitemap.js skipped: {note}", file=sys.stderr)
        else:
            meta["sitemapjs"] = json.loads(
                (peer_dir / "node_modules" / "sitemap" / "package.json").read_text())["version"]
            meta["node"] = subprocess.run(["node", "--version"], capture_output=True, text=True,
                                          check=False).stdout.strip()
    else:
        meta["sitemapjs_note"] = "--no-peer"
    if args.sitemaps != default_sitemaps:
        meta["sitemaps"] = args.sitemaps
    results: list[dict[str, Any]] = []
    print(f"# sitemaps bench in {base} (commit {meta['commit']})", file=sys.stderr)
    try:
        for size in sorted(args.urls):
            r: dict[str, Any] = {"urls": size, "inventory": args.inventory}
            inv = base / "inventories" / f"inventory-{args.inventory}-{size}.parquet"
            r["inventory_seconds"] = make_inventory(inv, size, args.inventory, args.inventory_seed)
            r["inventory_mib"] = round(inv.stat().st_size / 2**20, 1)
            print(f"# {size:,}: inventory {r['inventory_seconds']} s", file=sys.stderr)
            out = base / f"pipeline-{size}"
            r["pipeline"] = pipeline_run(args.sitemaps, inv, out, env, base / "logs",
                                         f"pipeline-{size}")
            r["shares"] = shares(r["pipeline"])
            print(f"# {size:,}: pipeline {r['pipeline']['wall_seconds']} s, "
                  f"{r['pipeline']['peak_rss_mib']} MiB", file=sys.stderr)
            if args.incremental:
                r["incrementals"] = []
                for change in args.change:
                    inv2 = base / "inventories" / f"inventory-{size}-{change}.parquet"
                    if change == "clustered":
                        mutation = clustered_change(inv, inv2)
                    elif change == "untouched":  # the very file again: not even copied
                        inv2 = inv
                        mutation = {"rows": size, "changed_rows": 0, "seconds": 0.0}
                    elif change == "none":
                        shutil.copyfile(inv, inv2)
                        mutation = {"rows": size, "changed_rows": 0, "seconds": 0.0}
                    else:
                        mutation = mutate_inventory(inv, inv2, args.change_share, args.seed)
                    mutation["change"] = change
                    run2 = pipeline_run(args.sitemaps, inv2, out, env, base / "logs",
                                        f"pipeline-{size}-{change}")
                    r["incrementals"].append({"mutation": mutation, "run": run2})
                    print(f"# {size:,}: {change} change: {run2['wall_seconds']} s",
                          file=sys.stderr)
                    if inv2 != inv:
                        inv2.unlink()
                r["incremental"] = r["incrementals"][0]
            if peer_dir is not None:
                rows = base / "inventories" / f"rows-{args.inventory}-{size}.ndjson"
                export = export_rows(inv, rows)
                r["sitemapjs"] = sitemapjs_run(peer_dir, rows, base / f"sitemapjs-{size}", env,
                                               base / "logs", size, args.peer_gzip_level)
                r["sitemapjs"]["export_seconds"] = export
                rows.unlink()
                print(f"# {size:,}: sitemap.js {r['sitemapjs']['wall_seconds']} s, "
                      f"{r['sitemapjs']['peak_rss_mib']} MiB", file=sys.stderr)
            if not args.no_baseline:
                limit = baseline_limit(size, args, results)
                r["baseline"] = baseline_run(inv, base / f"baseline-{size}", env, base / "logs",
                                             size, limit, args.baseline_gzip_level)
                print(f"# {size:,}: baseline {r['baseline']['wall_seconds']} s "
                      f"({r['baseline']['mode']})", file=sys.stderr)
            results.append(r)
            if own:
                shutil.rmtree(out, ignore_errors=True)
                inv.unlink()
        meta["commit_at_end"] = _git("rev-parse", "--short", "HEAD")
        meta["dirty_at_end"] = " ".join(
            _git("status", "--short", "pipeline", "sql").split("\n")).strip()
        table = markdown(results, meta)
        print(table)
        if args.json:
            args.json.write_text(json.dumps({"meta": meta, "results": results, "markdown": table},
                                            indent=1, default=str))
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
