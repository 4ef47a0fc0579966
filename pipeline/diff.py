"""Stage 2, diff: this run's valid rows against the live generation's snapshot.

Classifies every URL as added, changed, unchanged or removed, and gives each a
truthful lastmod (see sql/diff_rows.sql). Writes `diffed.parquet` (every row
to publish) and `changes.parquet` (added, changed and removed URLs) under the
work prefix.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

import duckdb

from pipeline import sql, storage
from pipeline.extensions import NEWS_MAX_AGE_DAYS, NEWS_SECTION
from pipeline.load import register_parquet, write_parquet

log = logging.getLogger(__name__)

DIFFED_KEY = "diffed.parquet"
CHANGES_KEY = "changes.parquet"

#: The snapshot's columns: what the next run needs of this one.
SNAPSHOT_COLUMNS = ("url", "section", "shard", "fingerprint", "lastmod", "first_seen",
                    "last_changed")
_EMPTY_SNAPSHOT = (
    "SELECT NULL::VARCHAR AS url, NULL::VARCHAR AS section, NULL::INTEGER AS shard, "
    "NULL::VARCHAR AS fingerprint, NULL::TIMESTAMPTZ AS lastmod, "
    "NULL::TIMESTAMPTZ AS first_seen, NULL::TIMESTAMPTZ AS last_changed WHERE false"
)


@dataclass
class DiffResult:
    """Counts of the diff, and where its outputs are."""

    added: int
    changed: int
    unchanged: int
    removed: int
    lastmod_clamped: int
    news_articles: int
    diffed_uri: str
    changes_uri: str
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        return {"added": self.added, "changed": self.changed, "unchanged": self.unchanged,
                "removed": self.removed, "lastmod_clamped": self.lastmod_clamped,
                "news_articles": self.news_articles}


def register_snapshot(con: duckdb.DuckDBPyConnection, snapshot_uri: str | None) -> None:
    """The view `previous_rows`: the snapshot at `snapshot_uri`, or an empty one."""
    if snapshot_uri:
        register_parquet(con, "previous_rows", [snapshot_uri])
    else:
        con.sql(_EMPTY_SNAPSHOT).create_view("previous_rows", replace=True)


def diff_relation(con: duckdb.DuckDBPyConnection, valid_uri: str, snapshot_uri: str | None,
                  run_time: datetime, with_news: bool = True) -> duckdb.DuckDBPyRelation:
    """The diffed rows (sql/diff_rows.sql) as a relation, not yet run."""
    register_parquet(con, "current_rows", [valid_uri])
    register_snapshot(con, snapshot_uri)
    return con.sql(sql.load_sql("diff_rows"), params={
        "run_time": run_time, "news_section": NEWS_SECTION,
        "news_max_age_days": NEWS_MAX_AGE_DAYS, "with_news": with_news})


def diff(valid_uri: str, snapshot_uri: str | None, run_time: datetime, work_uri: str, *,
         with_news: bool = True, con: duckdb.DuckDBPyConnection | None = None) -> DiffResult:
    """Diff the valid rows against the snapshot; write diffed and changed rows."""
    started = time.monotonic()
    con = con or sql.connect()
    work = storage.open_storage(work_uri)
    # Streamed straight to Parquet: the diffed rows are never all held in memory.
    diffed_uri = write_parquet(diff_relation(con, valid_uri, snapshot_uri, run_time, with_news),
                               work, DIFFED_KEY)
    register_parquet(con, "diffed", [diffed_uri])
    counts = {k: int(v) for k, v in sql.first_row(con, sql.load_sql("diff_counts")).items()}
    changes_uri = write_parquet(con.sql(sql.load_sql("changed_rows")), work, CHANGES_KEY)
    result = DiffResult(**counts, diffed_uri=diffed_uri, changes_uri=changes_uri,
                        seconds=time.monotonic() - started)
    log.info("diff: %d added, %d changed, %d unchanged, %d removed, %d future lastmods clamped "
             "(%.1f s)", result.added, result.changed, result.unchanged, result.removed,
             result.lastmod_clamped, result.seconds)
    return result


def save_state(planned_uris: list[str], work_uri: str, state_uri: str, generation: str
               ) -> dict[str, str]:
    """Store the generation's snapshot (from every planned part), rejects and changes."""
    from pipeline.load import REJECTS_KEY

    state = storage.open_storage(state_uri)
    work = storage.open_storage(work_uri)
    prefix = f"generations/{generation}"
    con = sql.connect()
    register_parquet(con, "planned", list(planned_uris))
    files = {"snapshot": write_parquet(
        con.sql(f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM planned"), state,
        f"{prefix}/snapshot.parquet", compression="zstd")}
    for name, key in (("rejects", REJECTS_KEY), ("changes", CHANGES_KEY)):
        with work.local_path(key) as path:
            state.upload_file(path, f"{prefix}/{key}")
        files[name] = state.uri(f"{prefix}/{key}")
    return files
