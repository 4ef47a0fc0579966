"""The `sitemaps` command as a user meets it, in a real process: every bad input a user can
give ends in one `error:` line and its documented exit code, never a traceback; checks of
`--out` and S3 come before any work; the demo writes what a run writes; a terminal gets one
line per step."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.demo import make_inventory
from pipeline.layout import default_state
from tests.output_check import read_output, write_inventory

pytestmark = pytest.mark.integration
SITE = "https://www.example.com/"
ROOT = Path(__file__).resolve().parents[2]


def sitemaps(*args: str, env: dict[str, str] | None = None, quiet: bool = True
             ) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pipeline.cli", *(["-q"] if quiet else []), *args]
    return subprocess.run(cmd, cwd=ROOT, env=env or dict(os.environ), capture_output=True,
                          text=True, timeout=300)


def no_aws_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
               AWS_EC2_METADATA_DISABLED="true", **extra)
    return env


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_inventory(tmp_path_factory.mktemp("inv") / "inv.parquet", 500, site=SITE)


def unwritable_out(tmp: Path) -> str:
    """A folder no run can write: below a regular file (root ignores permission bits)."""
    (tmp / "a-file").write_text("not a folder\n")
    return str(tmp / "a-file" / "out")


#: (name, builds (args, env) from (tmp_path, inventory, s3 bucket), exit code, error text)
CASES: list[tuple[str, Callable[..., tuple[list[str], dict[str, str] | None]], int, str]] = [
    ("unwritable out", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", unwritable_out(t)], None),
     2, "is not writable"),
    ("S3 without credentials", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", b.url("out/")],
        no_aws_env(AWS_ENDPOINT_URL=b.endpoint_url)), 2, "no S3 credentials found"),
    ("S3 wrong secret", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", b.url("out/")],
        {**os.environ, "AWS_SECRET_ACCESS_KEY": "wrong"}), 2, "refused"),
    ("S3 bucket missing", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", "s3://no-such-bucket-x/o/"],
        None), 2, "does not exist"),
    ("S3 unreachable", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", b.url("out/")],
        {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "SITEMAPS_S3_ATTEMPTS": "1"}),
     75, "cannot reach the S3 endpoint"),
    ("site URL without scheme", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", "www.example.com", "--out", str(t / "o")],
        None), 2, "must start with https://"),
    ("CSV named .parquet", lambda t, inv, b: (
        ["run", "--inventory", str(csv(t)), "--site-url", SITE, "--out", str(t / "o")], None),
     2, "not a Parquet file"),
    ("inventory missing", lambda t, inv, b: (
        ["run", "--inventory", str(t / "none.parquet"), "--site-url", SITE, "--out",
         str(t / "o")], None), 2, "matches no Parquet file"),
    ("url column of a wrong type", lambda t, inv, b: (
        ["run", "--inventory", str(write_inventory(t / "int.parquet", {"url": [1, 2]})),
         "--site-url", SITE, "--out", str(t / "o")], None), 2, "must be a string"),
    ("limit out of range", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", str(t / "o"),
         "--max-urls-per-sitemap", "0"], None), 2, "--max-urls-per-sitemap must be"),
    ("unsupported storage", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", "gs://bucket/x"], None),
     2, "unsupported storage URI"),
    ("status of nothing", lambda t, inv, b: (["status", "--out", str(t / "typo")], None),
     1, "no generation at "),
    ("validate nothing", lambda t, inv, b: (["validate", "--out", str(t / "typo")], None),
     1, "no generation at "),
    ("gc of nothing", lambda t, inv, b: (["gc", "--out", str(t / "typo")], None),
     1, "no generation at "),
    ("report of nothing", lambda t, inv, b: (["report", "--out", str(t / "typo")], None),
     2, "no live generation yet"),
    ("robots of nothing", lambda t, inv, b: (
        ["robots", "--out", str(t / "typo"), "--robots", str(t / "robots.txt")], None),
     2, "no live generation yet"),
    ("diff without --out or --state", lambda t, inv, b: (
        ["diff", "--inventory", str(inv)], None), 2, "give either --out"),
    # read when the run starts, not when the modules are imported (a traceback before main)
    ("an environment variable not a number", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", str(t / "o")],
        {**os.environ, "SITEMAPS_PLAN_SLICE_ROWS": "many"}), 2, "is not a number"),
    ("an environment variable of 0", lambda t, inv, b: (
        ["run", "--inventory", str(inv), "--site-url", SITE, "--out", str(t / "o")],
        {**os.environ, "SITEMAPS_PLAN_SLICE_ROWS": "0"}), 2,
     "$SITEMAPS_PLAN_SLICE_ROWS = '0' must be at least 1"),
]


def csv(tmp: Path) -> Path:
    path = tmp / "urls.parquet"
    path.write_text("url,lastmod\nhttps://www.example.com/a,2026-01-01\n")
    return path


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_its_exit_code(
        case: tuple[str, Callable[..., Any], int, str], tmp_path: Path, inventory: Path,
        s3_bucket: Any) -> None:
    _, build, code, text = case
    args, env = build(tmp_path, inventory, s3_bucket)
    proc = sitemaps(*args, env=env)
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], proc.stderr
    assert proc.stdout == ""
    # Without -q: the logs of the work done before it, and the error still once.
    proc = sitemaps(*args, env=env, quiet=False)
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()] == [lines[0]]


@pytest.mark.parametrize("out", ["unwritable", "s3 without credentials"])
def test_out_and_credentials_are_checked_before_any_work(
        out: str, tmp_path: Path, inventory: Path, s3_bucket: Any) -> None:
    if out == "unwritable":
        args, env = ["--out", unwritable_out(tmp_path)], None
    else:
        args, env = ["--out", s3_bucket.url("out/")], no_aws_env(
            AWS_ENDPOINT_URL=s3_bucket.endpoint_url)
    proc = sitemaps("run", "--inventory", str(inventory), "--site-url", SITE, *args, env=env,
                    quiet=False)
    assert proc.returncode == 2
    assert not re.search(r"INFO pipeline\.(steps|load|diff|plan|render): ", proc.stderr), \
        proc.stderr


def test_diff_json_names_no_deleted_file(tmp_path: Path, inventory: Path) -> None:
    out = tmp_path / "out"
    assert sitemaps("run", "--inventory", str(inventory), "--site-url", SITE,
                    "--out", str(out)).returncode == 0
    for args in (["--out", str(out)], ["--state", default_state(str(out)), "--site-url", SITE]):
        proc = sitemaps("diff", "--inventory", str(inventory), *args, "--json")
        assert proc.returncode == 0, proc.stderr
        for path in re.findall(r'"(/[^"]+)"', proc.stdout):
            assert Path(path).exists(), f"diff --json names {path}, which does not exist"
        assert "changes_uris" not in proc.stdout and '"counts"' in proc.stdout


def test_demo_writes_what_a_run_writes(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = sitemaps("demo", "--urls", "2000", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    for name in ("sitemap_index.xml", "feed.atom", "robots-sitemaps.txt"):
        assert (out / name).is_file(), name
    # The run report is internal: under the state prefix, where the demo says it is.
    (report,) = Path(default_state(str(out)), "generations").glob("*/report.html")
    assert str(report) in proc.stdout
    assert "feed.atom" in (out / "robots-sitemaps.txt").read_text()
    inventory = tmp_path / "demo-inventory" / "inventory.parquet"
    assert inventory.is_file()
    assert not list(out.rglob("*inventory*")) and not (out / "_demo").exists()
    assert f"report: {report}" in proc.stdout
    assert f"open the report: {report.as_uri()}" in proc.stdout
    assert f"inventory: {inventory}" in proc.stdout
    result = read_output(str(out))
    assert sitemaps("validate", "--out", str(out)).returncode == 0
    # What the README says the demo inventory holds: 20 sections of skewed sizes, URLs that
    # need escaping, non-ASCII paths, a few rows to reject.
    counts = result.manifest["counts"]
    sizes: dict[str, int] = {}
    for s in result.manifest["sitemaps"]:
        sizes[s["section"]] = sizes.get(s["section"], 0) + s["urls"]
    assert len(sizes) == 20 and max(sizes.values()) > 5 * min(sizes.values()), sizes
    assert counts["input_rows"] == 2000 and 0 < counts["rejected_rows"] < 20
    assert any("%C3%A9" in loc for loc in result.locs)  # é, percent-encoded
    assert any("&" in loc for loc in result.locs)  # escaped as &amp; in the XML


def _on_a_terminal(args: list[str]) -> tuple[int, str]:
    """Runs the CLI with stdout and stderr on a pseudo-terminal; returns its code and screen."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=300), b"".join(chunks).decode(errors="replace")


def _screen_lines(raw: str) -> list[str]:
    """What a terminal shows: each line as left by its last carriage return and erase."""
    return [line.split("\r\x1b[K")[-1].rstrip("\r") for line in raw.split("\n") if line.strip()]


def test_a_terminal_gets_one_line_per_step_and_errors_once(tmp_path: Path,
                                                           inventory: Path) -> None:
    for again in (False, True):  # a first run, then the same inventory: no stage to run
        code, raw = _on_a_terminal(["run", "--inventory", str(inventory), "--site-url", SITE,
                                    "--out", str(tmp_path / "out")])
        assert code == 0, raw
        lines = _screen_lines(raw)
        assert not any(" INFO " in ln for ln in lines), lines
        steps = [ln.split(":")[0].split(" ")[0] for ln in lines if ln.startswith(
            ("begin", "load", "diff", "plan", "render", "publish", "notify", "gc"))]
        if again:  # pipeline.unchanged: the live generation's own input
            assert steps == ["begin", "publish", "notify", "gc"], lines
            assert any(ln.startswith("begin: ") and "are the live generation's" in ln
                       for ln in lines), lines
            assert any("unchanged, still live" in ln for ln in lines), lines
        else:
            assert steps == ["begin", "load", "diff", "plan", "render", "publish", "notify",
                             "gc"], lines
            assert any(ln.startswith("begin: ") and ln.endswith("live none") for ln in lines), \
                lines
        assert again or any(ln.startswith("report: ") for ln in lines), lines

    code, raw = _on_a_terminal(["run", "--inventory", str(csv(tmp_path)), "--site-url", SITE,
                                "--out", str(tmp_path / "out2")])
    assert code == 2
    lines = _screen_lines(raw)
    assert [ln for ln in lines if "error" in ln.lower()] == [
        ln for ln in lines if ln.startswith("error: ") and "not a Parquet file" in ln], lines
    assert len([ln for ln in lines if "error" in ln.lower()]) == 1, lines


#: The commands the README's table lists.
README_COMMANDS = ("run", "demo", "diff", "status", "validate", "repair", "rollback", "report",
                   "gc", "robots", "indexnow-key")


def test_every_command_has_help_with_its_exit_codes() -> None:
    for command in README_COMMANDS:
        proc = sitemaps(command, "--help")
        assert proc.returncode == 0, (command, proc.stderr)
        assert "exit codes:" in proc.stdout and "example:" in proc.stdout, command


def test_verbose_logs_on_a_terminal_too(tmp_path: Path, inventory: Path) -> None:
    """`-v`: the INFO log lines a pipe gets, on a terminal, where they are otherwise left out
    (test_a_terminal_gets_one_line_per_step_and_errors_once)."""
    code, raw = _on_a_terminal(["-v", "run", "--inventory", str(inventory), "--site-url", SITE,
                                "--out", str(tmp_path / "out")])
    assert code == 0, raw
    info = [ln for ln in _screen_lines(raw) if " INFO " in ln]
    assert any("publish" in ln for ln in info), info


def test_quiet_and_verbose_may_follow_the_command(tmp_path: Path, inventory: Path) -> None:
    """`sitemaps run ... -q` is `sitemaps -q run ...`; `-v` after a command is accepted too,
    and the flags given before the command are kept."""
    args = ["run", "--inventory", str(inventory), "--site-url", SITE, "--out",
            str(tmp_path / "out"), "--no-report"]
    logged = sitemaps(*args, quiet=False)
    assert logged.returncode == 0 and " INFO " in logged.stderr, logged.stderr
    for flags in (["-q"], ["--quiet", "--debug"]):
        proc = sitemaps(*args, "--rebuild", *flags, quiet=False)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    proc = sitemaps(*args, "--rebuild", "-v", quiet=True)  # -q before, -v after: both given
    assert proc.returncode == 0, proc.stderr
    proc = sitemaps("status", "--out", str(tmp_path / "out"), "-v", quiet=False)
    assert proc.returncode == 0, proc.stderr


def test_off_a_terminal_each_step_is_logged_once(tmp_path: Path, inventory: Path) -> None:
    """Through a pipe, each stage's result is one INFO line (its step's, with what it read
    and wrote), not that line and its module's own summary again; `sitemaps diff` too."""
    out = str(tmp_path / "out")
    proc = sitemaps("run", "--inventory", str(inventory), "--site-url", SITE, "--out", out,
                    "--no-report", quiet=False)
    assert proc.returncode == 0, proc.stderr
    messages = [ln.split(": ", 1)[1] for ln in proc.stderr.splitlines() if " INFO " in ln]
    results = {"load": r"load: ", "diff": r"diff: ", "plan": r"plan: \d+ shards",
               "render": r"render ", "publish": r"publish: generation ", "notify": r"notify: ",
               "gc": r"gc: "}
    for stage, pattern in results.items():
        lines = [m for m in messages if re.match(pattern, m)]
        assert len(lines) == 1 and "; read " in lines[0], (stage, lines)
    proc = sitemaps("diff", "--inventory", str(inventory), "--out", out, quiet=False)
    assert proc.returncode == 0, proc.stderr
    messages = [ln.split(": ", 1)[1] for ln in proc.stderr.splitlines() if " INFO " in ln]
    for stage in ("load", "diff", "plan"):
        lines = [m for m in messages if re.match(results[stage], m)]
        assert len(lines) == 1 and "; read " in lines[0], (stage, lines)


def _on_a_small_disk(folder: Path, size: str, *args: str,
                     env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`sitemaps ARGS` with a tmpfs of `size` mounted at `folder`, in user and mount
    namespaces of its own (util-linux's unshare; no root needed): a real full disk that
    nothing else on the machine sees."""
    mount_and_run = 'mkdir -p "$1" && mount -t tmpfs -o size="$2" tmpfs "$1" && shift 2 && exec "$@"'
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount_and_run, "sh",
           str(folder), size, sys.executable, "-m", "pipeline.cli", "-q", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env or dict(os.environ), capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("full", ["work", "out"])
def test_a_full_disk_names_its_folder_not_the_inventory(full: str, tmp_path: Path) -> None:
    # the work folder fills while load writes the rows; the output while state is written
    big = make_inventory(tmp_path / "big.parquet", 20_000, site=SITE)
    small = tmp_path / "small"
    folders = {"work": tmp_path / "work", "out": tmp_path / "out", full: small / full}
    proc = _on_a_small_disk(small, "1m", "run", "--inventory", str(big), "--site-url", SITE,
                            "--work", str(folders["work"]), "--out", str(folders["out"]))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert re.fullmatch(
        rf"error: no space left on the disk of {re.escape(str(small / full))}/\S+ "
        r"\(\d+ MiB free of 1 MiB\)\. Free space there, or give the run a folder on a larger "
        r"disk \(--work, --out, SITEMAPS_TEMP_DIR\)", lines[0]), lines[0]
    if full == "work":  # (a full output's tmpfs is gone with its namespace)
        assert not (folders["out"] / "manifest.json").exists()  # nothing was published


@pytest.mark.parametrize("run_id", ["..", ".", "a/b", "../x", "", "a\\b"])
def test_a_run_id_that_is_no_folder_name_is_refused_and_deletes_nothing(
        run_id: str, tmp_path: Path, inventory: Path) -> None:
    """`--work W --run-id ..` made the work folder W/.., and the end of the run deleted every
    file below it: the inventory and anything beside the work root."""
    top = tmp_path / "top"
    (top / "work").mkdir(parents=True)
    inv = top / "inv.parquet"
    inv.write_bytes(inventory.read_bytes())
    (top / "beside.txt").write_text("keep me\n")
    (top / "x").mkdir()
    (top / "x" / "inside.txt").write_text("keep me too\n")
    proc = sitemaps("run", "--inventory", str(inv), "--site-url", SITE, "--out", str(top / "o"),
                    "--work", str(top / "work"), "--run-id", run_id)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: --run-id ") and len(proc.stderr.splitlines()) == 1, \
        proc.stderr
    assert inv.is_file() and (top / "beside.txt").is_file() and (top / "x" / "inside.txt").is_file()
    assert not (top / "o").exists()  # refused before any work


def test_a_plain_run_id_names_the_work_folder_below_the_work_root(
        tmp_path: Path, inventory: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "other-run").mkdir()
    (tmp_path / "work" / "other-run" / "f").write_text("another run's file\n")
    proc = sitemaps("run", "--inventory", str(inventory), "--site-url", SITE,
                    "--out", str(tmp_path / "o"), "--work", str(tmp_path / "work"),
                    "--run-id", "manual__2026-12-06T12_00_00.5-a")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "work" / "other-run" / "f").is_file()
    # the run's own folder is emptied
    assert not [p for p in (tmp_path / "work" / "manual__2026-12-06T12_00_00.5-a").rglob("*")
                if p.is_file()]


@pytest.mark.parametrize("command, blank", [
    ("run", "--out"), ("run", "--state"), ("run", "--work"), ("run", "--inventory"),
    ("gc", "--out"), ("gc", "--state"), ("status", "--out"), ("rollback", "--state")])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_out_state_or_work_is_refused(command: str, blank: str, value: str,
                                               tmp_path: Path, inventory: Path) -> None:
    """`--out ""` published into the current folder and wrote the state to /_state."""
    given = {"--out": str(tmp_path / "o")}
    if command != "status":
        given["--state"] = str(tmp_path / "s")
    if command == "run":
        given |= {"--inventory": str(inventory), "--site-url": SITE,
                  "--work": str(tmp_path / "w")}
    given[blank] = value
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "-q", command,
         *[a for k, v in given.items() for a in (k, v)]],
        cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: {blank} must not be empty\n"
    assert list(cwd.iterdir()) == [] and not (tmp_path / "o").exists()


@pytest.mark.parametrize("variable", ["SITEMAPS_DUCKDB_MEMORY", "SITEMAPS_MEMORY"])
def test_a_bad_memory_size_stops_the_run_before_any_work(variable: str, tmp_path: Path,
                                                         inventory: Path) -> None:
    """`SITEMAPS_DUCKDB_MEMORY=lots` exited 1 after begin; a quote in it ran SQL."""
    proc = sitemaps("run", "--inventory", str(inventory), "--site-url", SITE,
                    "--out", str(tmp_path / "o"), env={**os.environ, variable: "lots"},
                    quiet=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"error: ${variable} = 'lots' is not a memory size (a number and a unit, e.g. 1.5GB, "
        "512MiB)")
    assert "INFO pipeline" not in proc.stderr and not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, message", [
    *[(["run", f"{flag}={v}"], f"{flag} must be a finite number, not {v}")
      for flag in ("--gc-grace-hours", "--feed-days", "--lease-seconds", "--shrink-threshold")
      for v in ("nan", "inf", "-inf")],
    (["gc", "--keep-generations", "0"], "--keep-generations must be at least 1, not 0"),
    *[(["gc", "--grace-hours", v], f"--grace-hours must be a finite number, not {v}")
      for v in ("nan", "inf")],
    (["gc", "--grace-hours", "-1"], "--grace-hours must be at least 0, not -1.0"),
    (["feed", "--days", "nan"], "--days must be a finite number, not nan"),
])
def test_a_number_that_is_nan_infinite_or_out_of_range_is_refused_before_any_work(
        args: list[str], message: str, tmp_path: Path, inventory: Path) -> None:
    """`run --gc-grace-hours nan` published and then exited 1 "(a bug)"; `gc --grace-hours -1`
    was accepted though run refuses it."""
    out = tmp_path / "o"
    command, *flags = args
    extra = ["--inventory", str(inventory), "--site-url", SITE] if command == "run" else []
    proc = sitemaps(command, "--out", str(out), *extra, *flags)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: {message}\n"
    assert not out.exists()
