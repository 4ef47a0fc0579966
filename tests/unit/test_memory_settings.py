"""The memory budget: SITEMAPS_MEMORY for the process, DuckDB's share of it, clear errors."""

from __future__ import annotations

import re

import pytest

from pipeline import sql
from pipeline.errors import ConfigError
from pipeline.settings import environment


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
    assert sql.duckdb_memory_limit() == "3000000000B"
    con = sql.connect()
    assert con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0].startswith("2.7")


def test_spill_folder_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("SITEMAPS_TEMP_DIR", str(tmp_path / "spill"))
    con = sql.connect()
    assert con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0] == str(
        tmp_path / "spill")


@pytest.mark.parametrize("value", [
    "lots", "1.5 parsecs", "-1GB", "0GB", "0", "nan", "inf", "infGB", "1e3GB", "4 GB GB", "80%",
    "1GB'; COPY (SELECT 1) TO 'INJECTED' (FORMAT csv); SET memory_limit = '1GB",
    "1GB' --"])
@pytest.mark.parametrize("variable", ["SITEMAPS_DUCKDB_MEMORY", "SITEMAPS_MEMORY"])
def test_a_memory_size_is_parsed_strictly_and_never_reaches_sql(
        variable: str, value: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """SITEMAPS_DUCKDB_MEMORY was pasted into `SET memory_limit = '<value>'`: a quote in it
    ran any DuckDB statement (a COPY writing a file)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    message = f"\\${variable} = {re.escape(repr(value))} is not a memory size"
    with pytest.raises(ConfigError, match=message):
        environment()
    with pytest.raises(ConfigError, match=message):
        sql.connect()
    with pytest.raises(ConfigError, match="not a memory size"):
        sql.connect(memory_limit=value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("value", "limit"), [
    ("4GB", "4000000000B"), ("512MiB", f"{512 * 1024**2}B"), (" 2.5 GiB ", f"{5 * 1024**3 // 2}B"),
    ("3000000000", "3000000000B")])
def test_a_memory_size_reaches_duckdb_as_bytes(value: str, limit: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SITEMAPS_DUCKDB_MEMORY", value)
    assert sql.duckdb_memory_limit() == limit
    con = sql.connect()
    assert con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0] == \
        sql.connect(memory_limit=limit).sql("SELECT current_setting('memory_limit')"
                                             ).fetchall()[0][0]
