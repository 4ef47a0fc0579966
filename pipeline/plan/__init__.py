"""Stage 3, plan: bucket rows into shards by section, within every limit, stably.

A shard keeps the URL range it had in the last generation, so a small change rewrites
few shards; the plan works slice by slice, so its memory is bounded by a slice, not by
the inventory. Its modules:

- `model`: the shard (`Shard`: its key, sizes and place in a planned part) and the
  plan's results;
- `slices`: choosing the slices (`prepare`), their provisional shard numbers, and
  gathering the planned slices under their final numbers (`combine`);
- `packing`: planning one slice (`plan_slice`): keep, merge or repack each previous
  shard's rows, write them sorted as one part, cut the repacked groups into shards;
  `plan_slices` plans every slice in one process, cutting one while the next is sorted.

`plan` runs the three steps in one process: prepare, every slice (plan_slices), combine.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from pipeline import sql
from pipeline.config import Limits
from pipeline.diffed import DiffedView
from pipeline.errors import ConfigError
from pipeline.layout import SLICES_KEY
from pipeline.plan.model import (
    PlanResult,
    SliceResult,
    load_shards,
    section_limits,
    shard_digest,
)
from pipeline.plan.packing import (
    MERGE_BELOW,
    SPLIT_FILL,
    Group,
    pack_subs,
    plan_slice,
    plan_slices,
)
from pipeline.plan.slices import (
    PROVISIONAL_SHIFT,
    SAMPLES_PER_SLICE,
    SLICE_ROWS,
    SPLIT_INPUT_SLICES,
    Slice,
    combine,
    prepare,
    provisional_base,
)
from pipeline.settings import FORMATS
from pipeline.shards import Shard
from pipeline.snapshot import register_assigned

__all__ = [
    "FORMATS", "MERGE_BELOW", "PROVISIONAL_SHIFT", "SAMPLES_PER_SLICE", "SLICES_KEY",
    "SLICE_ROWS", "SPLIT_FILL", "SPLIT_INPUT_SLICES", "Group",
    "PlanResult", "Shard", "Slice", "SliceResult", "combine", "load_shards", "pack_subs",
    "plan", "plan_slice", "plan_slices", "prepare", "provisional_base", "register_assigned",
    "section_limits", "shard_digest",
]


def plan(diffed_uris: str | Sequence[str], snapshot_uri: str | None, work_uri: str,
         limits: Limits, *, output_format: str = "xml",
         con: duckdb.DuckDBPyConnection | None = None, slice_rows: int | None = None,
         reuse_keys: frozenset[str] = frozenset(),
         view: DiffedView | None = None, run_time: str | None = None,
         ext_empty: bool = False) -> PlanResult:
    """Assign every row a shard: prepare, every slice one after the other, combine.
    `view`: a first run's diffed rows not written (the diff's result's `view`); `run_time`
    and `ext_empty`: see prepare."""
    if output_format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {output_format!r}")
    con = con or sql.connect()
    slices = prepare(diffed_uris, snapshot_uri, work_uri, con=con, slice_rows=slice_rows,
                     keeps_shards=bool(reuse_keys), output_format=output_format, view=view,
                     run_time=run_time, ext_empty=ext_empty)
    plan_slices(work_uri, len(slices), limits, output_format=output_format, con=con,
                reuse_keys=reuse_keys)
    return combine(work_uri)
