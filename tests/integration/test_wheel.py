"""The wheel as a user gets it: built from the checkout, installed with its dependencies into
a fresh virtualenv outside it, and run from another folder: `sitemaps --version`, `sitemaps
demo` and `sitemaps validate` on what the demo wrote. The SQL (sql/*.sql) and the XSDs must
come with the wheel: nothing of the checkout is on the path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from: the rest of the checkout (tests, bench, dags) is not in it.
SOURCES = ("pyproject.toml", "README.md", "pipeline", "sql")


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    # Built from a copy, so the build leaves no build/ or *.egg-info in the checkout.
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    # No PYTHONPATH: the checkout (the tests run with it on the path) must not be importable.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "dist"),
                 str(src)], tmp_path, env)
    assert built.returncode == 0, built.stdout + built.stderr
    # setuptools' warnings about the configuration (e.g. a data folder that is no package)
    assert "Warning" not in built.stdout + built.stderr, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("sitemap_pipeline-*.whl")
    assert wheel.name.startswith(f"sitemap_pipeline-{version}-")
    names = zipfile.ZipFile(wheel).namelist()
    sql = {Path(n).name for n in names if n.endswith(".sql")}
    assert sql == {p.name for p in (ROOT / "sql").glob("*.sql")}
    assert "pipeline/schemas/sitemap.xsd" in names

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)  # no system site-packages, not the checkout's venv
    bin_dir = env_dir / "bin"
    installed = run([str(bin_dir / "python"), "-m", "pip", "install", str(wheel)], tmp_path, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run([str(bin_dir / "python"), "-c", "import pipeline.sql as s; print(s.__file__); "
                 "print(s.SQL_DIR)"], elsewhere, env)
    module_file, sql_dir = where.stdout.split()
    assert Path(module_file).is_relative_to(env_dir), where.stdout
    assert Path(sql_dir).is_relative_to(env_dir), where.stdout

    sitemaps = str(bin_dir / "sitemaps")
    shown = run([sitemaps, "--version"], elsewhere, env)
    assert (shown.returncode, shown.stdout) == (0, f"sitemaps {version}\n"), shown.stderr

    out = tmp_path / "demo-out"
    demo = run([sitemaps, "demo", "--urls", "20000", "--out", str(out)], elsewhere, env)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert (out / "manifest.json").is_file()

    checked = run([sitemaps, "validate", "--out", str(out)], elsewhere, env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith(f"valid: {out}: generation "), checked.stdout
    # The demo's inventory holds some rows it rejects on purpose: every published URL counts.
    published = sum(s["urls"] for s in json.loads((out / "manifest.json").read_text())["sitemaps"])
    assert 19_000 < published <= 20_000
    assert f", {published:,} URLs in " in checked.stdout, checked.stdout
    assert "problem:" not in checked.stdout
