"""A pipeline process turns transparent huge pages off where the kernel gives them on request
only (pipeline.hugepages), and leaves them as they are anywhere else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import hugepages

#: Runs in a process of its own (the flag is the process's, for good): what
#: decline_on_request returned, then the flag as the kernel reads it back.
_PROBE = ("import ctypes; from pipeline import hugepages; done = hugepages.decline_on_request(); "
          "print(done, ctypes.CDLL(None).prctl(hugepages.PR_GET_THP_DISABLE, 0, 0, 0, 0))")


@pytest.mark.parametrize("text, mode", [
    ("always [madvise] never\n", "madvise"),
    ("[always] madvise never\n", "always"),
    ("always madvise [never]\n", "never"),
    ("no brackets\n", None),
])
def test_thp_mode_reads_the_bracketed_word(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           text: str, mode: str | None) -> None:
    (tmp_path / "enabled").write_text(text)
    monkeypatch.setattr(hugepages, "THP_MODE_FILE", tmp_path / "enabled")
    assert hugepages.thp_mode() == mode


def test_thp_mode_without_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hugepages, "THP_MODE_FILE", tmp_path / "missing")
    assert hugepages.thp_mode() is None


def test_the_process_declines_huge_pages_only_in_madvise_mode() -> None:
    if sys.platform != "linux":  # no prctl and no THP: nothing is turned off
        assert hugepages.decline_on_request() is False
        return
    got = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2]).stdout.split()
    if hugepages.thp_mode() == "madvise":
        assert got == ["True", "1"]
    else:
        assert got == ["False", "0"]


def test_another_mode_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "enabled").write_text("[always] madvise never\n")
    monkeypatch.setattr(hugepages, "THP_MODE_FILE", tmp_path / "enabled")
    hugepages.decline_on_request.cache_clear()
    try:
        assert hugepages.decline_on_request() is False
    finally:
        hugepages.decline_on_request.cache_clear()
