"""The memory budget: SITEMAPS_MEMORY for the process, DuckDB's share of it, clear errors."""

from __future__ import annotations

import pytest

from pipeline import sql
from pipeline.errors import ConfigError


def test_parse_bytes_units() -> None:
    assert sql.parse_bytes("1.5GB") == 1_500_000_000
    assert sql.parse_bytes("512MiB") == 512 * 1024**2
    assert sql.parse_bytes(" 2000000 ") == 2_000_000
    for bad in ("", "lots", "1.5 parsecs", "-1GB"):
        with pytest.raises(ConfigError, match="not a memory size"):
            sql.parse_bytes(bad)


def test_duckdb_gets_the_budget_less_the_reserve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SITEMAPS_DUCKDB_MEMORY", raising=False)
    monkeypatch.setenv("SITEMAPS_MEMORY", "2GiB")
    assert sql.duckdb_memory_limit() == f"{(2 * 1024**3 - sql.PROCESS_RESERVE) // 1024**2}MB"
    monkeypatch.setenv("SITEMAPS_MEMORY", "300MB")  # never below 256 MB
    assert sql.duckdb_memory_limit() == "256MB"
    monkeypatch.delenv("SITEMAPS_MEMORY")
    assert sql.duckdb_memory_limit() == f"{(1_500_000_000 - sql.PROCESS_RESERVE) // 1024**2}MB"
    monkeypatch.setenv("SITEMAPS_DUCKDB_MEMORY", "3GB")  # an explicit DuckDB limit wins
    assert sql.duckdb_memory_limit() == "3GB"
    con = sql.connect()
    assert con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0].startswith("2.7")


def test_spill_folder_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("SITEMAPS_TEMP_DIR", str(tmp_path / "spill"))
    con = sql.connect()
    assert con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0] == str(
        tmp_path / "spill")
