"""`sitemaps --version` prints the installed version, which is pyproject.toml's."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import pipeline
from pipeline.cli import main

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def project_version() -> str:
    return str(tomllib.loads(PYPROJECT.read_text())["project"]["version"])


def test_version_prints_pyprojects_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"sitemaps {project_version()}\n"


def test_the_packages_version_is_pyprojects() -> None:
    """The fallback of a checkout that was never installed says the same."""
    assert pipeline.__version__ == project_version()
