"""Stage 4, render: write shards as gzipped sitemap files, each one independently.

The <url> lines come ready from the plan (one string column whose values end
in a newline), so a shard's body is the concatenation of Arrow buffers handed
straight to the compressor. A shard whose key (content digest) is already
published is skipped: not rendered, not uploaded.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage
from pipeline.plan import Shard
from pipeline.progress import QUIET, Progress

log = logging.getLogger(__name__)

#: ISA-L level 1: about 15x faster than zlib level 6, files about 15% larger.
GZIP_LEVEL = int(os.environ.get("SITEMAPS_GZIP_LEVEL", "1"))
_BATCH_ROWS = 65_536


@dataclass
class RenderedFile:
    """A shard as written: what the manifest records of it."""

    key: str
    section: str
    shard: int
    urls: int
    bytes: int
    gzip_bytes: int
    sha256: str
    lastmod: str | None
    written: bool


def _compressor() -> object:
    try:
        from isal import isal_zlib

        return isal_zlib.compressobj(min(GZIP_LEVEL, 3), isal_zlib.DEFLATED, 31)
    except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
        import zlib

        return zlib.compressobj(6, zlib.DEFLATED, 31)


class _GzipSink:
    """Compresses into a storage object, counting and hashing as it goes."""

    def __init__(self, out: storage.Storage, key: str) -> None:
        self._cm = out.open_write(key, cache_control=storage.CACHE_IMMUTABLE)
        self._f = self._cm.__enter__()
        self._z = _compressor()
        self.raw = 0
        self.gz = 0
        self._sha = hashlib.sha256()

    def write(self, data: bytes | memoryview | pa.Buffer) -> None:
        self.raw += len(data)
        self._emit(self._z.compress(data))  # type: ignore[attr-defined]

    def _emit(self, chunk: bytes) -> None:
        if chunk:
            self.gz += len(chunk)
            self._sha.update(chunk)
            self._f.write(chunk)

    def close(self) -> str:
        self._emit(self._z.flush())  # type: ignore[attr-defined]
        self._cm.__exit__(None, None, None)
        return self._sha.hexdigest()

    def abort(self, exc: BaseException) -> None:
        self._cm.__exit__(type(exc), exc, exc.__traceback__)


def _body_chunks(batch_lines: pa.Array) -> Iterator[pa.Buffer]:
    """The data buffer behind a slice of a string array: its lines, back to back."""
    arr = batch_lines
    if isinstance(arr, pa.ChunkedArray):
        for chunk in arr.chunks:
            yield from _body_chunks(chunk)
        return
    if arr.type != pa.string() and arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    if len(arr) == 0:
        return
    width = 8 if arr.type == pa.large_string() else 4
    _, offsets, data = arr.buffers()
    view = memoryview(offsets).cast("q" if width == 8 else "i")
    start, end = view[arr.offset], view[arr.offset + len(arr)]
    yield data.slice(start, end - start)


def _open_parquet(uri: str) -> pq.ParquetFile:
    if storage.is_s3(uri):
        return pq.ParquetFile(storage.s3_filesystem().open_input_file(uri.removeprefix("s3://")),
                              pre_buffer=False)
    return pq.ParquetFile(uri, pre_buffer=False)


def render(planned_uris: list[str] | str, shards: list[Shard], out_uri: str, *,
           only: set[str] | None = None, skip_keys: frozenset[str] = frozenset(),
           progress: Progress = QUIET) -> list[RenderedFile]:
    """Write shards from the planned parts; `shards` is the plan's whole list, in file order.

    `planned_uris` are the plan's part files (Shard.part indexes them; one URI is one
    part). `only` (shard uids) limits the work to one batch, as a mapped task does;
    shards whose key is in `skip_keys` (already published) are not written.
    """
    started = time.monotonic()
    uris = [planned_uris] if isinstance(planned_uris, str) else list(planned_uris)
    bad = [s.uid for s in shards if not 0 <= s.part < len(uris)]
    if bad:
        raise RuntimeError(f"shard {bad[0]} is in part {len(uris)} or later; "
                           f"the plan has {len(uris)} part(s)")
    mine = [s for s in shards if only is None or s.uid in only]
    todo = [s for s in mine if s.key not in skip_keys]
    skipped = [s for s in mine if s.key in skip_keys]
    results = [RenderedFile(key=s.key, section=s.section, shard=s.shard, urls=s.urls,
                            bytes=s.bytes, gzip_bytes=-1, sha256="", lastmod=s.lastmod,
                            written=False) for s in skipped]
    if todo:
        progress.step("render")
        out = storage.open_storage(out_uri)
        todo_uids = {s.uid for s in todo}
        counter = _Counter(len(todo), progress)
        for part, uri in enumerate(uris):
            in_part = [s for s in shards if s.part == part]
            if any(s.uid in todo_uids for s in in_part):
                results += _write_shards(_open_parquet(uri), in_part, todo_uids, out, counter)
    progress.done(f"{len(todo)} written, {len(skipped)} reused")
    written = [r for r in results if r.written]
    log.info("render: %d shards written (%d URLs, %d bytes, %d gzipped), %d reused (%.1f s)",
             len(written), sum(r.urls for r in written), sum(r.bytes for r in written),
             sum(r.gzip_bytes for r in written), len(skipped), time.monotonic() - started)
    return results


class _Counter:
    """Shards written so far, over every part, for the progress display."""

    def __init__(self, total: int, progress: Progress) -> None:
        self.done, self.total, self.progress = 0, total, progress

    def tick(self) -> None:
        self.done += 1
        self.progress.update(self.done, self.total, "shards")


def _row_ranges(shards: list[Shard]) -> dict[str, tuple[int, int]]:
    """Each shard's [first, end) row numbers in its part file (rows are in shard order).

    `shards` are one part's shards, in the plan's (file) order.
    """
    ranges, row = {}, 0
    for s in shards:
        ranges[s.uid] = (row, row + s.urls)
        row += s.urls
    return ranges


def _write_shards(pf: pq.ParquetFile, shards: list[Shard], todo: set[str],
                  out: storage.Storage, counter: _Counter) -> list[RenderedFile]:
    """Read only the row groups of one part that hold `todo` shards, in order, and cut
    them by row ranges; `shards` are every shard of that part, in file order."""
    ranges = _row_ranges(shards)
    meta = pf.metadata
    group_start = [0]
    for g in range(meta.num_row_groups):
        group_start.append(group_start[-1] + meta.row_group(g).num_rows)
    if group_start[-1] != sum(s.urls for s in shards):
        raise RuntimeError(f"planned rows ({group_start[-1]}) do not match the plan's shards "
                           f"({sum(s.urls for s in shards)}) in part {shards[0].part}")
    wanted = [s for s in shards if s.uid in todo]
    results: list[RenderedFile] = []
    for shard in wanted:
        first, end = ranges[shard.uid]
        groups = [g for g in range(meta.num_row_groups)
                  if group_start[g] < end and group_start[g + 1] > first]
        sink = _GzipSink(out, shard.key)
        try:
            sink.write(shard.header.encode())
            row = group_start[groups[0]]
            for batch in pf.iter_batches(batch_size=_BATCH_ROWS, row_groups=groups,
                                         columns=["section", "shard", "line"], use_threads=True):
                lo, hi = max(first - row, 0), min(end - row, batch.num_rows)
                if lo < hi:
                    part = batch.slice(lo, hi - lo)
                    _check_rows(part, shard)
                    for buf in _body_chunks(part.column(2)):
                        sink.write(buf)
                row += batch.num_rows
                if row >= end:
                    break
            sink.write(shard.footer.encode())
            sha = sink.close()
        except BaseException as exc:
            sink.abort(exc)
            raise
        if sink.raw != shard.bytes:  # plan and render disagree: never publish such a file
            raise RuntimeError(f"{shard.key}: wrote {sink.raw} bytes, planned {shard.bytes}")
        results.append(RenderedFile(key=shard.key, section=shard.section, shard=shard.shard,
                                    urls=shard.urls, bytes=sink.raw, gzip_bytes=sink.gz,
                                    sha256=sha, lastmod=shard.lastmod, written=True))
        counter.tick()
    return results


def _check_rows(part: pa.RecordBatch, shard: Shard) -> None:
    """The first and last row of a slice must belong to the shard being written (its rows
    carry the number it has in the planned part, `Shard.row_shard`)."""
    expected = (shard.section, shard.row_shard)
    for j in (0, part.num_rows - 1):
        if (part.column(0)[j].as_py(), part.column(1)[j].as_py()) != expected:
            raise RuntimeError(f"planned rows are out of order at shard {shard.uid}")


def rendered_to_dicts(files: list[RenderedFile]) -> list[dict[str, object]]:
    return [asdict(f) for f in files]
