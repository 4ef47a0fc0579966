"""DuckDB connections and the named SQL statements in `sql/`.

Each statement lives in `sql/NAME.sql`, takes its values as `$name`
parameters, and reads from relations with fixed names (views created by the
stage that runs it), so no input is ever spliced into SQL text.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb

#: Beside the package in a checkout (editable install), else where a wheel puts it.
SQL_DIR = next((d for d in (Path(__file__).resolve().parent.parent / "sql",
                            Path(sys.prefix) / "share" / "sitemap-pipeline" / "sql")
                if d.is_dir()), Path(__file__).resolve().parent.parent / "sql")

def _default_memory_limit() -> str:
    """A quarter of the machine's memory (at least 1 GB): DuckDB spills to disk past it."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "2GB"
    return f"{max(1, total // 4 // 1024**3)}GB"


#: DuckDB's memory limit (SITEMAPS_DUCKDB_MEMORY, e.g. "4GB"); peak memory stays
#: bounded by it whatever the inventory's size, DuckDB spills to temp_directory past it.
DEFAULT_MEMORY_LIMIT = os.environ.get("SITEMAPS_DUCKDB_MEMORY") or _default_memory_limit()


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
    con = duckdb.connect(config={"allow_unsigned_extensions": False})
    con.execute(f"SET memory_limit = '{memory_limit or DEFAULT_MEMORY_LIMIT}'")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET preserve_insertion_order = {str(ordered).lower()}")
    # DuckDB's own progress bar shows a long statement's progress, on a terminal only.
    con.execute(f"SET enable_progress_bar = {str(sys.stderr.isatty()).lower()}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    spill = temp_dir or os.path.join(tempfile.gettempdir(), "sitemaps-duckdb")
    os.makedirs(spill, exist_ok=True)
    con.execute("SET temp_directory = ?", [spill])
    con.execute(load_sql("url_line"))  # the rendering macros, used by several stages
    return con


def first_row(con: duckdb.DuckDBPyConnection, query: str,
              params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first row of a query as a dict (column name to value)."""
    rel = con.sql(query, params=params)
    rows = rel.fetchall()
    return dict(zip(rel.columns, rows[0], strict=True)) if rows else {}


def scalar(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any] | None = None) -> Any:
    """The single value a query returns."""
    return con.sql(query, params=params).fetchall()[0][0]
