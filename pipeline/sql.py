"""DuckDB connections and the named SQL statements in `sql/`.

Each statement lives in `sql/NAME.sql`, takes its values as `$name`
parameters, and reads from relations with fixed names (views created by the
stage that runs it), so no input is ever spliced into SQL text.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from pipeline.errors import PipelineError
from pipeline.settings import environment
from pipeline.settings import parse_bytes as parse_bytes  # re-exported: diff and the tests use it

#: Beside the package in a checkout (editable install), else where a wheel puts it.
SQL_DIR = next((d for d in (Path(__file__).resolve().parent.parent / "sql",
                            Path(sys.prefix) / "share" / "sitemap-pipeline" / "sql")
                if d.is_dir()), Path(__file__).resolve().parent.parent / "sql")

#: The whole process's memory budget (SITEMAPS_MEMORY, e.g. "1.5GB"): DuckDB gets it less
#: what Python, pyarrow and the render buffers need beside it (PROCESS_RESERVE), and spills
#: to SITEMAPS_TEMP_DIR past that, so peak memory does not grow with the inventory.
DEFAULT_PROCESS_MEMORY = "1.5GB"
#: Memory kept out of DuckDB's limit for the rest of the process.
PROCESS_RESERVE = 512 * 1024**2


def duckdb_memory_limit() -> str:
    """DuckDB's memory_limit: SITEMAPS_DUCKDB_MEMORY in bytes, else SITEMAPS_MEMORY (default
    1.5GB) less PROCESS_RESERVE, at least 256 MB."""
    env = environment()
    if env.duckdb_memory:  # as bytes: parsed, never pasted as given
        return f"{parse_bytes(env.duckdb_memory)}B"
    total = parse_bytes(env.memory or DEFAULT_PROCESS_MEMORY)
    return f"{max(256 * 1024**2, total - PROCESS_RESERVE) // 1024**2}MB"


def spill_dir() -> str:
    """Where DuckDB spills past its memory limit (SITEMAPS_TEMP_DIR, default the temp dir)."""
    return environment().temp_dir or os.path.join(tempfile.gettempdir(), "sitemaps-duckdb")


def spill_dir_for_errors() -> str | None:
    """spill_dir(), or None where the environment naming it is unreadable: for an error's
    words, which must not fail on it."""
    try:
        return spill_dir()
    except PipelineError:
        return None


@functools.cache
def load_sql(name: str) -> str:
    """The text of `sql/NAME.sql`."""
    path = SQL_DIR / f"{name}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"no SQL statement named {name!r} at {path}")
    return path.read_text(encoding="utf-8")


def connect(memory_limit: str | None = None, threads: int | None = None,
            temp_dir: str | None = None, ordered: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with a memory limit, UTC, and a spill folder.

    `ordered`: results of a query without ORDER BY come in the order of its input (render
    needs it); without, DuckDB may reorder them, which streams writes with less memory.
    """
    # The limit as a config value, not SQL text; and parsed (bytes) in any case.
    limit = f"{parse_bytes(memory_limit)}B" if memory_limit else duckdb_memory_limit()
    con = duckdb.connect(config={"allow_unsigned_extensions": False, "memory_limit": limit})
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET preserve_insertion_order = {str(ordered).lower()}")
    # DuckDB's own progress bar shows a long statement's progress, on a terminal only.
    con.execute(f"SET enable_progress_bar = {str(sys.stderr.isatty()).lower()}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    spill = temp_dir or spill_dir()
    os.makedirs(spill, exist_ok=True)
    con.execute("SET temp_directory = ?", [spill])
    con.execute(load_sql("url_line"))  # the rendering macros, used by several stages
    return con


@contextlib.contextmanager
def insertion_order(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Within: results keep the order of their input, e.g. a projection of sorted rows."""
    before = scalar(con, "SELECT current_setting('preserve_insertion_order')")
    con.execute("SET preserve_insertion_order = true")
    try:
        yield
    finally:
        con.execute(f"SET preserve_insertion_order = {str(bool(before)).lower()}")


def first_row(con: duckdb.DuckDBPyConnection, query: str,
              params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first row of a query as a dict (column name to value)."""
    rel = con.sql(query, params=params)
    rows = rel.fetchall()
    return dict(zip(rel.columns, rows[0], strict=True)) if rows else {}


def scalar(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> Any:
    """The single value a query returns."""
    return con.sql(query, params=params).fetchall()[0][0]
