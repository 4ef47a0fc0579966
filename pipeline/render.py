"""Stage 4, render: write shards as gzipped sitemap files, each one independently.

Each line is built once, here: DuckDB renders a row group of the planned part
(sql/url_line.sql) into one string column whose values end in a newline, so a
shard's body is the concatenation of Arrow buffers handed straight to the
compressor. Its size must be what the plan budgeted, to the byte. A shard whose
key (content digest) is already published is skipped: not rendered, not uploaded.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import sql, storage
from pipeline.errors import InternalError
from pipeline.parquet import open_parquet
from pipeline.progress import QUIET, Progress
from pipeline.settings import environment
from pipeline.shards import Shard

log = logging.getLogger(__name__)


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

        # SITEMAPS_GZIP_LEVEL, default 1: about 15x faster than zlib level 6, files about
        # 15% larger; ISA-L's levels end at 3.
        return isal_zlib.compressobj(min(environment().gzip_level, 3), isal_zlib.DEFLATED, 31)
    except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
        import zlib

        return zlib.compressobj(6, zlib.DEFLATED, 31)


class _GzipSink:
    """Compresses one file into a storage object, counting and hashing as it goes.

    The compressor gets the same calls whatever pieces render writes the body in: the
    header, the whole body, the footer. ISA-L's output for the same bytes cut into other
    calls differs, and render's pieces follow the planned part's row groups and the batch
    being rendered, so a file's gzip bytes (its sha256 and size in the manifest) would
    otherwise depend on how render was cut, not only on its content.
    """

    def __init__(self, out: storage.Storage, key: str, header: bytes = b"") -> None:
        self._cm = out.open_write(key, cache_control=storage.CACHE_IMMUTABLE)
        self._f = self._cm.__enter__()
        self._z = _compressor()
        self.raw = 0
        self.gz = 0
        self._sha = hashlib.sha256()
        #: The body so far: its one piece as given (the usual case, never copied), or a copy
        #: of its pieces once there are two (at most the file's size, --max-bytes-per-sitemap).
        self._body: memoryview | bytearray | None = None
        self.raw += len(header)
        self._emit(self._z.compress(header))  # type: ignore[attr-defined]

    def write(self, data: bytes | memoryview | pa.Buffer) -> None:
        """A piece of the body; compressed whole at close."""
        view = memoryview(data).cast("B")
        self.raw += len(view)
        if self._body is None:
            self._body = view
        else:
            if isinstance(self._body, memoryview):
                self._body = bytearray(self._body)
            self._body += view

    def _emit(self, chunk: bytes) -> None:
        if chunk:
            self.gz += len(chunk)
            self._sha.update(chunk)
            self._f.write(chunk)

    def close(self, footer: bytes = b"") -> str:
        if self._body is not None:
            self._emit(self._z.compress(self._body))  # type: ignore[attr-defined]
            self._body = None
        self.raw += len(footer)
        self._emit(self._z.compress(footer))  # type: ignore[attr-defined]
        self._emit(self._z.flush())  # type: ignore[attr-defined]
        self._cm.__exit__(None, None, None)
        return self._sha.hexdigest()

    def abort(self, exc: BaseException) -> None:
        self._body = None
        self._cm.__exit__(type(exc), exc, exc.__traceback__)


def _body_chunks(lines: pa.Array | pa.ChunkedArray) -> Iterator[pa.Buffer]:
    """The data buffer behind a slice of a string array: its lines, back to back."""
    arr = lines
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


#: The planned part's columns a line is made of (sql/url_line.sql). A part without `ext`
#: (no row of the inventory has extension XML: pipeline.plan leaves it out) has '' there.
#: Read as plain strings: DuckDB writes the section and the changefreq from ENUM codes, and
#: a dictionary page holding '' for each value no row uses, which pyarrow's
#: `read_dictionary` misreads (other values, indices out of range; pyarrow 26).
LINE_COLUMNS = ["section", "url", "lastmod", "changefreq", "priority", "ext"]


def render_lines(con: duckdb.DuckDBPyConnection, rows: pa.Table, output_format: str
                 ) -> pa.ChunkedArray:
    """The <url> lines (or, for txt, the URLs) of `rows`, in their order, newline included."""
    con.register("render_rows", rows)
    try:
        ext = "ext" if "ext" in rows.column_names else "''"
        expr = ("url || chr(10)" if output_format == "txt"
                else f"url_line(url, lastmod, changefreq, priority, {ext})")
        return con.sql(f"SELECT {expr} AS line FROM render_rows").to_arrow_table().column(0)
    finally:
        con.unregister("render_rows")


def render(planned_uris: list[str] | str, shards: list[Shard], out_uri: str, *,
           only: set[str] | None = None, skip_keys: frozenset[str] = frozenset(),
           progress: Progress = QUIET) -> list[RenderedFile]:
    """Write shards from the planned parts; `shards` is the plan's whole list.

    `planned_uris` are the plan's part files (Shard.part indexes them; one URI is one
    part). `only` (shard uids) limits the work to one batch, as a mapped task does;
    shards whose key is in `skip_keys` (already published) are not written.
    """
    started = time.monotonic()
    uris = [planned_uris] if isinstance(planned_uris, str) else list(planned_uris)
    bad = [s.uid for s in shards if s.part is not None and not 0 <= s.part < len(uris)]
    if bad:
        raise InternalError(f"shard {bad[0]} is in part {len(uris)} or later; "
                            f"the plan has {len(uris)} part(s)")
    mine = [s for s in shards if only is None or s.uid in only]
    todo = [s for s in mine if s.key not in skip_keys]
    skipped = [s for s in mine if s.key in skip_keys]
    unplanned = [s.uid for s in todo if s.reused]
    if unplanned:
        raise InternalError(f"shard {unplanned[0]} must be written but the plan kept it "
                            "without its rows (planned with other live keys?)")
    results = [RenderedFile(key=s.key, section=s.section, shard=s.shard, urls=s.urls,
                            bytes=s.bytes, gzip_bytes=-1, sha256="", lastmod=s.lastmod,
                            written=False) for s in skipped]
    if todo:
        progress.step("render")
        out = storage.open_storage(out_uri)
        counter = _Counter(len(todo), progress)
        con = sql.connect(ordered=True)  # lines in the order of their rows
        for part, uri in enumerate(uris):
            in_part = sorted((s for s in shards if s.part == part),
                             key=lambda s: s.row_start or 0)
            wanted = [s for s in todo if s.part == part]
            if wanted:
                results += _write_part(con, open_parquet(uri), in_part, wanted, out, counter)
    progress.done(f"{len(todo)} written, {len(skipped)} reused")
    written = [r for r in results if r.written]
    log.debug("render: %d shards written (%d URLs, %d bytes, %d gzipped), %d reused (%.1f s)",
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


def _write_part(con: duckdb.DuckDBPyConnection, pf: pq.ParquetFile, in_part: list[Shard],
                wanted: list[Shard], out: storage.Storage, counter: _Counter
                ) -> list[RenderedFile]:
    """Write the `wanted` shards of one part: read only the row groups that hold them, in
    order, render their lines once and cut them by the shards' row ranges."""
    meta = pf.metadata
    planned = sum(s.urls for s in in_part)
    if meta.num_rows != planned:
        raise InternalError(f"planned rows ({meta.num_rows}) do not match the plan's shards "
                            f"({planned}) in part {in_part[0].part}")
    group_start = [0]
    for g in range(meta.num_row_groups):
        group_start.append(group_start[-1] + meta.row_group(g).num_rows)
    wanted = sorted(wanted, key=lambda s: s.row_start or 0)
    groups = sorted({g for s in wanted for g in range(meta.num_row_groups)
                     if group_start[g] < (s.row_start or 0) + s.urls
                     and group_start[g + 1] > (s.row_start or 0)})
    results: list[RenderedFile] = []
    todo = iter(wanted)
    shard: Shard | None = next(todo, None)
    sink: _GzipSink | None = None
    written_rows = 0
    blocks = list(_blocks(groups))
    output_format = wanted[0].format if wanted else "xml"

    columns = [c for c in LINE_COLUMNS if c in pf.schema_arrow.names]

    def read_and_render(block: list[int]) -> tuple[pa.Table, pa.ChunkedArray]:
        table = pf.read_row_groups(block, columns=columns)
        return table, render_lines(con, table, output_format)

    # One thread reads and renders the next block while this one compresses and writes the
    # current one: DuckDB, pyarrow and ISA-L release the GIL, so the two overlap.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="render")
    ahead = pool.submit(read_and_render, blocks[0]) if blocks else None
    try:
        for i, block in enumerate(blocks):
            if shard is None:
                break
            assert ahead is not None
            table, lines = ahead.result()
            ahead = pool.submit(read_and_render, blocks[i + 1]) if i + 1 < len(blocks) else None
            base = group_start[block[0]]
            while shard is not None:
                first = shard.row_start or 0
                end = first + shard.urls
                lo, hi = max(first - base, 0), min(end - base, table.num_rows)
                if lo >= table.num_rows:
                    break  # the shard starts in a later row group
                if sink is None:
                    _check_section(table, lo, shard)
                    sink = _GzipSink(out, shard.key, shard.header.encode())
                    written_rows = 0
                if lo < hi:
                    for buf in _body_chunks(lines.slice(lo, hi - lo)):
                        sink.write(buf)
                    written_rows += hi - lo
                if end - base > table.num_rows:
                    break  # the shard goes on in the next row group
                _check_section(table, hi - 1, shard)
                sha = sink.close(shard.footer.encode())
                done, sink = sink, None
                if done.raw != shard.bytes or written_rows != shard.urls:
                    # plan and render disagree: never publish such a file
                    raise InternalError(f"{shard.key}: wrote {written_rows} URLs in {done.raw} "
                                        f"bytes, planned {shard.urls} in {shard.bytes}")
                results.append(RenderedFile(
                    key=shard.key, section=shard.section, shard=shard.shard, urls=shard.urls,
                    bytes=done.raw, gzip_bytes=done.gz, sha256=sha, lastmod=shard.lastmod,
                    written=True))
                counter.tick()
                shard = next(todo, None)
    except BaseException as exc:
        if sink is not None:
            sink.abort(exc)
        raise
    finally:
        if ahead is not None:
            ahead.cancel()
        pool.shutdown(wait=True)
    if shard is not None:
        raise InternalError(f"shard {shard.uid} ends past the rows of part {shard.part}")
    return results


#: Row groups rendered by one DuckDB query: one record batch each, so two keep both of
#: DuckDB's threads busy (one leaves a core idle); few enough that the block's buffers
#: (about 30 MB of lines) are reused from block to block instead of mapped fresh from the
#: kernel for each (8 took about twice the page faults).
BLOCK_ROW_GROUPS = 2


def _blocks(groups: list[int]) -> Iterator[list[int]]:
    """Runs of consecutive row group numbers, at most BLOCK_ROW_GROUPS each."""
    block: list[int] = []
    for g in groups:
        if block and (g != block[-1] + 1 or len(block) == BLOCK_ROW_GROUPS):
            yield block
            block = []
        block.append(g)
    if block:
        yield block


def _check_section(table: pa.Table, row: int, shard: Shard) -> None:
    """A shard's first and last rows must be of its section (the part is in plan order)."""
    if table.column(0)[row].as_py() != shard.section:
        raise InternalError(f"planned rows are out of order at shard {shard.uid}")
