"""The repository holds everything its tests need: a clone anywhere runs them.

The XSDs used to be read from a folder beside the repository, which only this machine has;
these tests fail when anything reaches outside again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from pipeline.validate import SCHEMAS, schema
from tests import output_check

ROOT = Path(__file__).resolve().parents[2]
#: Where the project's code, tests and tooling live.
CHECKED = ("pipeline", "tests", "dags", "sql", "infra", "bench", ".ci", "Makefile",
           "pyproject.toml")
#: Paths outside the repository that only the development machine has (spelled in two
#: parts so that this file does not match itself).
OUTSIDE = re.compile(r"\.\./" + r"shared|/work/" + r"shared")


def _text_files() -> list[Path]:
    files: list[Path] = []
    for name in CHECKED:
        p = ROOT / name
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            files += [f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts
                      and f.suffix not in (".pyc", ".parquet", ".gz", ".png")]
    return files


def test_no_file_refers_outside_the_repository() -> None:
    files = _text_files()
    assert len(files) > 50
    offenders = [f"{f.relative_to(ROOT)}:{n}" for f in files
                 for n, line in enumerate(f.read_text(errors="replace").splitlines(), start=1)
                 if OUTSIDE.search(line)]
    assert offenders == []


def _imports(xsd: Path) -> set[str]:
    doc = etree.parse(str(xsd))
    return {e.get("schemaLocation") for e in doc.iter("{http://www.w3.org/2001/XMLSchema}import",
                                                       "{http://www.w3.org/2001/XMLSchema}include")
            if e.get("schemaLocation")}


def test_every_schema_the_checks_use_is_in_the_repository() -> None:
    assert SCHEMAS.is_relative_to(ROOT) and output_check.SCHEMAS == SCHEMAS
    needed, todo = set(), ["sitemap.xsd", "siteindex.xsd", "all.xsd"]
    while todo:
        name = todo.pop()
        path = SCHEMAS / name
        assert path.is_file(), f"{name} is not vendored in {SCHEMAS}"
        assert not urlish(name), f"{name} would be fetched from the network"
        needed.add(name)
        todo += sorted(_imports(path) - needed)
    assert needed == {p.name for p in SCHEMAS.glob("*.xsd")}
    readme = (SCHEMAS / "README.md").read_text()
    for name in needed:  # each with its source noted
        assert f"`{name}`" in readme
        schema(name)  # compiles offline (the parser has no network)


def urlish(location: str) -> bool:
    return "://" in location


@pytest.mark.integration
def test_a_clone_in_a_temp_folder_runs_the_tests(tmp_path: Path) -> None:
    """The committed tree, cloned elsewhere, passes the tests that read the schemas."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, '.'); import pipeline.validate as v; "
                               "print(v.SCHEMAS)"],
        cwd=clone, env=env, capture_output=True, text=True, check=True, timeout=120)
    assert Path(where.stdout.strip()).is_relative_to(clone)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/unit/test_self_contained.py", "tests/integration/test_validate.py",
         "tests/integration/test_run_local.py::test_escaping_and_non_ascii",
         "-k", "not clone and not s3"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
