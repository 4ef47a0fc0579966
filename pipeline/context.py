"""The run context and one result type per step, each with the one line it is logged as.

`RunContext` is made once, by `pipeline.steps.begin`, and never changes: every step
reads it. It crosses process boundaries as a small JSON-able dict (`to_dict` /
`from_dict`): the DAG hands it to every task through XCom. What a step hands on to
the next (its parts, the live shard keys) is written under the work prefix, not here.

A step returns its result type; `line()` (its `summary()` and what it read and wrote, its
`io`: pipeline.taskio) is the line the CLI (`pipeline.run`, at INFO) and the DAG's task log
both write; `to_dict()` is what XCom and the run summary carry, `io` included.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipeline.settings import Limits, RunOptions
from pipeline.taskio import TaskIO


@dataclass(frozen=True)
class RunContext:
    """What every step of one run knows, fixed at begin: the run's options as given, and what
    begin made of them (the resolved URIs, the generation, the live version it started from).
    """

    #: The run options as given (a step reads its option here: `ctx.options.force`).
    options: RunOptions
    #: The site's URL prefix (normalised) and where the sitemaps are served.
    site_url: str
    public_url: str
    out: str
    #: The state prefix (snapshots, reports) and this run's work folder.
    state: str
    work: str
    #: The work folder is a temp folder this process made (finish removes it).
    own_work: bool
    #: The run's time, ISO 8601 (UTC, whole seconds): the generation's and new URLs' time.
    run_time: str
    generation: str
    #: The live manifest at begin: the commit is conditional on this version.
    live_etag: str | None
    live_generation: str | None
    #: The snapshot the diff compares with (None: a first run).
    snapshot: str | None
    #: The run holds the output's lease (as `lease_owner`), renewed at each step.
    lease: bool
    lease_owner: str
    warnings: tuple[str, ...]
    #: A dry run (the DAG's param): plan is the last step, nothing is published.
    dry_run: bool = False
    #: The identity of the run's input (pipeline.unchanged; None: none taken), and whether
    #: it is the live generation's own: then no stage runs and nothing is published.
    input_identity: str | None = None
    unchanged: bool = False
    #: begin took no identity (the run does the work whatever it is): load takes it from the
    #: rows it reads, and publish records load's.
    identity_at_load: bool = False
    #: What begin read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO)

    def summary(self) -> str:
        return (f"begin: generation {self.generation} at {self.run_time}, live "
                f"{self.live_generation or 'none'}, work {self.work}"
                + (" (dry run)" if self.dry_run else ""))

    @property
    def run_datetime(self) -> datetime:
        return datetime.fromisoformat(self.run_time)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: what XCom carries between tasks."""
        d = dataclasses.asdict(self)
        d["warnings"] = list(self.warnings)
        when = self.options.run_time
        d["options"]["run_time"] = when.isoformat() if when else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunContext:
        o = d["options"]
        options = RunOptions(**{**o, "limits": Limits(**o["limits"]), "run_time": (
            datetime.fromisoformat(o["run_time"]) if o["run_time"] else None)})
        return cls(**{**d, "options": options, "warnings": tuple(d["warnings"]),
                      "io": TaskIO.from_dict(d.get("io"))})

    def line(self) -> str:
        return f"{self.summary()}; {self.io.line()}"


class StepResult:
    """A step's result: `to_dict()` for XCom and the run summary, `line()` for the log.
    Every result type has a field `io`, what the step read and wrote (pipeline.taskio)."""

    io: TaskIO

    def to_dict(self) -> dict[str, Any]:
        assert dataclasses.is_dataclass(self)
        return dataclasses.asdict(self)

    def summary(self) -> str:
        raise NotImplementedError

    def line(self) -> str:
        """The step's one log line: its summary, then what it read and wrote."""
        return f"{self.summary()}; {self.io.line()}"


@dataclass(frozen=True)
class LoadCounts(StepResult):
    input_rows: int
    valid_rows: int
    #: Rejected rows by reason code.
    rejected: dict[str, int]
    rejected_rows: int
    not_indexable: int
    #: Optional fields dropped (the row kept), by reason code.
    dropped_fields: dict[str, int]
    seconds: float
    #: The diff's hash partitions: the run's option, else automatic.
    diff_partitions: int
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def summary(self) -> str:
        dropped = {k: v for k, v in self.dropped_fields.items() if v}
        return (f"load: {self.input_rows:,} input rows, {self.valid_rows:,} valid, "
                f"{self.rejected_rows:,} rejected" + (f" {self.rejected}" if self.rejected else "")
                + (f", dropped fields {dropped}" if dropped else "")
                + f" in {self.seconds:.1f} s")


@dataclass(frozen=True)
class LoadGroupCounts(StepResult):
    """One group of inventory files normalised (the DAG's normalize task)."""

    group: int
    rows: int
    files: int
    seconds: float
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def summary(self) -> str:
        return (f"normalize group {self.group}: {self.rows:,} rows of {self.files} file(s) "
                f"in {self.seconds:.1f} s")


@dataclass(frozen=True)
class DedupeCounts(StepResult):
    """One part of the duplicate search (the DAG's dedupe task)."""

    part: int
    #: The URL hashes it read (its own partitions' rows) and their files.
    rows: int
    files: int
    duplicates: int
    seconds: float
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def summary(self) -> str:
        return (f"dedupe part {self.part}: {self.duplicates:,} duplicate(s) among {self.rows:,} "
                f"rows of {self.files} file(s) in {self.seconds:.1f} s")


@dataclass(frozen=True)
class DiffCounts(StepResult):
    """The diff's counts (added, changed, unchanged, removed, ...) of one partition
    (`partition` set) or of all of them."""

    counts: dict[str, int]
    seconds: float
    partitions: int
    partition: int | None = None
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {**self.counts, "seconds": self.seconds, "io": self.io.to_dict()}
        if self.partition is not None:
            d["partition"] = self.partition
        d["partitions"] = self.partitions
        return d

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v:,}" for k, v in self.counts.items())
        if self.partition is None:
            return f"diff: {counts}"
        return f"diff partition {self.partition} of {self.partitions}: {counts}"


@dataclass(frozen=True)
class PlanSplitCounts(StepResult):
    """One unit of the diffed rows written by plan slice (the DAG's plan_split task)."""

    unit: int
    rows: int
    files: int
    seconds: float
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def summary(self) -> str:
        return (f"plan split {self.unit}: {self.rows:,} rows of {self.files} file(s) by slice "
                f"in {self.seconds:.1f} s")


@dataclass(frozen=True)
class PlanSliceCounts(StepResult):
    slice: int
    shards: int
    urls: int
    split: int
    merged: int
    seconds: float
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def summary(self) -> str:
        return (f"plan slice {self.slice}: {self.urls:,} URLs in {self.shards} shards "
                f"({self.split} split, {self.merged} merged) in {self.seconds:.1f} s")


@dataclass(frozen=True)
class PlanCounts(StepResult):
    shards: int
    to_render: int
    split: int
    merged: int
    seconds: float
    #: The render batches: lists of shard ids, about `render_batch_bytes` each.
    batches: list[list[str]] = field(default_factory=list)
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def counts(self) -> dict[str, Any]:
        """The counts without the batches, their number instead (XCom `summary`)."""
        return {**{k: v for k, v in self.to_dict().items() if k != "batches"},
                "batches": len(self.batches)}

    def summary(self) -> str:
        return (f"plan: {self.shards} shards, {self.to_render} to render in "
                f"{len(self.batches)} batches ({self.split} split, {self.merged} merged)")


@dataclass(frozen=True)
class DryRunReport(StepResult):
    live_generation: str | None
    counts: dict[str, Any]
    changes_uris: list[str]
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def summary(self) -> str:
        c = self.counts
        return (f"dry run: would publish {c['published']:,} URLs in {c['sitemaps']} sitemaps "
                f"({c['shards_to_write']} to write, {c['shards_reused']} reused, "
                f"{c['shards_removed']} removed): {c['added']:,} added, {c['changed']:,} "
                f"changed, {c['removed']:,} removed; nothing rendered or published")


@dataclass(frozen=True)
class RenderCounts(StepResult):
    #: The JSON list of the files written (under the work prefix), for publish.
    uri: str
    written: int
    urls: int
    bytes: int
    gzip_bytes: int
    name: str = "all"
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "name"}

    def summary(self) -> str:
        return (f"render {self.name}: {self.written} shards written, {self.urls:,} URLs, "
                f"{self.gzip_bytes:,} gzipped bytes")


@dataclass(frozen=True)
class StateCounts(StepResult):
    """What the state step stored (the snapshot's rows), or why it left it to publish."""

    #: The snapshot's rows; 0 when `deferred`.
    snapshot_rows: int = 0
    seconds: float = 0.0
    #: Why nothing was stored here ("" when it was): publish stores the state if it makes
    #: a generation.
    deferred: str = ""
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def summary(self) -> str:
        if self.deferred:
            return f"state: {self.deferred}; publish stores the state if it makes a generation"
        return (f"state: snapshot of {self.snapshot_rows:,} URLs, rejects and changes stored "
                f"({self.seconds:.1f} s)")


@dataclass(frozen=True)
class PublishSummary(StepResult):
    generation: str
    published: bool
    out: str
    root_indexes: list[str]
    root_index_files: list[str]
    counts: dict[str, Any]
    warnings: list[str]
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def summary(self) -> str:
        c = self.counts
        state = "published" if self.published else "unchanged, still live"
        return (f"publish: generation {self.generation} {state}: {c['published']:,} URLs in "
                f"{c['sitemaps']} sitemaps ({c['shards_written']} written, "
                f"{c['shards_reused']} reused), {c['added']:,} added, {c['changed']:,} "
                f"changed, {c['removed']:,} removed")


@dataclass(frozen=True)
class GcCounts(StepResult):
    #: True: the run does no gc (--no-gc); the counts are then 0.
    skipped: bool = False
    deleted: int = 0
    deleted_state: int = 0
    aborted_uploads: int = 0
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        if self.skipped:
            return {"skipped": True, "io": self.io.to_dict()}
        return {"deleted": self.deleted, "deleted_state": self.deleted_state,
                "aborted_uploads": self.aborted_uploads, "io": self.io.to_dict()}

    def summary(self) -> str:
        return "gc: " + ", ".join(f"{k} {v}" for k, v in self.to_dict().items() if k != "io")


@dataclass(frozen=True)
class NotifyCounts(StepResult):
    """What notify did (pipeline.notify.notify_step's counts: feed, report, IndexNow)."""

    counts: dict[str, Any]
    #: What the step read and wrote (pipeline.taskio).
    io: TaskIO = field(default_factory=TaskIO, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        return {**self.counts, "io": self.io.to_dict()}

    def summary(self) -> str:
        return "notify: " + ", ".join(f"{k} {v}" for k, v in self.counts.items())
