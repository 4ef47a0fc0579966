"""Parquet files of the inventory, the work and the state prefixes, on any storage.

Read with pyarrow (`open_parquet`, `read_table`) or as DuckDB views (`register_parquet`),
written from a DuckDB relation (`write_parquet`; `write_partitioned`: one folder a value).
`pre_buffer=False` keeps memory flat: pyarrow's default pre-buffering holds a whole file's
column chunks at once.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage

#: Row ids in inventory order (file number, row in file): a reject's row, and the last tie
#: of the duplicate rule (rows of one content, sql/dedupe_rows.sql).
ROW_ID = "_row_id"


def open_parquet(uri: str) -> pq.ParquetFile:
    """A Parquet file to read in row groups or batches."""
    store, name = storage.open_file(uri)
    return pq.ParquetFile(store.arrow_input(name), pre_buffer=False)


def read_table(uri: str, columns: Sequence[str], *, use_threads: bool = True) -> pa.Table:
    """Some columns of one Parquet file, whole (for narrow columns of a bounded part)."""
    return open_parquet(uri).read(columns=list(columns), use_threads=use_threads)


def register_parquet(con: duckdb.DuckDBPyConnection, name: str, files: list[str],
                     *, row_ids: bool = False, first_file: int = 0,
                     partition_base: str | None = None, hive: bool = True,
                     every_schema: bool = False) -> None:
    """Make the Parquet `files` (local or on a store) queryable as the view `name`.

    With `row_ids`, the view has a ROW_ID column numbering rows in file order, from
    `first_file` << 40 (`files` that follow `first_file` others: a group of load's,
    pipeline.load.LoadPlan; each group's ids are its own, and in file order after the
    earlier groups'). `partition_base`: the folder below which a store's Hive folders are
    read (default: the files' common folder). `hive`: read `key=value` folders as columns
    (not for files that hold every column themselves: an Iceberg table's).
    `every_schema`: the view's columns are those of every file (an inventory's files may
    differ: a column added later), as DuckDB reads local files; a store's are otherwise
    those of the first file alone (pyarrow's dataset), and a column the first file lacks
    would be dropped from every file. It reads every file's footer.
    """
    filesystem, paths = storage.arrow_files(files)
    if filesystem is not None:
        import pyarrow.dataset as ds

        fmt = ds.ParquetFileFormat(
            default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))
        common = (storage.arrow_files([partition_base])[1][0] if partition_base
                  else os.path.commonpath(paths))
        schema = None
        if every_schema and len(paths) > 1:
            factory = ds.FileSystemDatasetFactory(
                filesystem, paths, fmt, ds.FileSystemFactoryOptions(
                    partition_base_dir=common if hive else None,
                    partitioning=ds.HivePartitioning.discover() if hive else None))
            # "permissive": an int column in one file and a double in another is a double,
            # as DuckDB's union_by_name makes it
            schema = factory.inspect(promote_options="permissive", fragments=None)
        dataset = ds.dataset(paths, schema=schema, format=fmt, filesystem=filesystem,
                             partitioning="hive" if hive else None,
                             partition_base_dir=common if hive else None)
        if row_ids:  # a dataset has no file_row_number: number the scan (one thread)
            con.register(f"{name}_dataset", dataset)
            con.sql(f"SELECT *, ({int(first_file)}::BIGINT << 40) + row_number() OVER () AS {ROW_ID} "
                    f"FROM {name}_dataset").create_view(name, replace=True)
        else:
            con.register(name, dataset)
    else:
        rel = con.read_parquet(files, hive_partitioning=hive, union_by_name=True)
        if row_ids:  # DuckDB's virtual columns: no window, the scan stays parallel
            rel = rel.select(f"*, ((file_index + {int(first_file)})::BIGINT << 40) "
                             f"+ file_row_number AS {ROW_ID}")
        rel.create_view(name, replace=True)


def write_parquet(rel: duckdb.DuckDBPyRelation, store: storage.Storage, key: str, *,
                  compression: str = "lz4_raw") -> str:
    """Write a relation as one Parquet object under `store`; returns its URI.

    Work files are read once, soon: LZ4 writes fastest. State that is kept uses zstd, but
    for the snapshot (pipeline.snapshot: written and read on every run's hot path).
    """
    with store.local_output(key) as path:
        _copy_to(rel, path, compression)
    return store.uri(key)


#: How many distinct values DuckDB's writer puts in a column chunk's dictionary before it
#: writes the chunk plain. Its default is far larger, and a column of unique values (URLs,
#: hashes, row ids, times) is hashed into a dictionary until that limit, then written plain
#: anyway, which cost about a sixth of a write's CPU for files of the same size. The columns of
#: few values (sections, changefreq, priority, line lengths, reasons) still get one.
DICTIONARY_SIZE_LIMIT = 4096


def _copy_to(rel: duckdb.DuckDBPyRelation, path: Path, compression: str,
             partition_by: str | None = None, file_prefix: str = "") -> None:
    """COPY the relation to Parquet at `path` (a folder of Hive partitions by `partition_by`):
    the relation API's write_parquet, with the dictionary limit it does not take."""
    options = [f"FORMAT parquet, COMPRESSION {compression}",
               f"DICTIONARY_SIZE_LIMIT {DICTIONARY_SIZE_LIMIT}"]
    if partition_by:
        options.append(f'PARTITION_BY ("{partition_by}"), OVERWRITE_OR_IGNORE true')
        if file_prefix:
            options.append(f"FILENAME_PATTERN '{file_prefix}data_{{i}}'")
    target = str(path).replace("'", "''")
    rel.query("rows_to_write",
              f"COPY (SELECT * FROM rows_to_write) TO '{target}' ({', '.join(options)})")


#: Rows DuckDB's partitioned write holds per partition before it writes them (its default
#: 524,288), which ran out of memory at 33 partitions ("failed to pin block"); 16,384
#: bounds it.
PARTITIONED_FLUSH_ROWS = 16_384


def write_partitioned(con: duckdb.DuckDBPyConnection, rel: duckdb.DuckDBPyRelation,
                      store: storage.Storage, folder: str, by: str, *,
                      compression: str = "lz4_raw", file_prefix: str = "") -> dict[str, list[str]]:
    """Write a relation in one pass as Hive partitions `folder/<by>=<value>/*.parquet` under
    `store` (written locally, then uploaded to a store that is not a local folder); returns
    each value's file URIs. No rows: no files. `con` is the relation's connection.
    `file_prefix`: the files' names start with it, so that several writers (load's groups)
    share the folders; a writer's earlier files of that prefix are removed first (a retry)."""
    files: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="sitemaps-") as tmp:
        local = store.local_dir / folder if store.local_dir else Path(tmp)
        local.parent.mkdir(parents=True, exist_ok=True)  # DuckDB makes the last folder only
        pattern = f"{by}=*/{file_prefix}*.parquet"
        for stale in local.glob(pattern):
            stale.unlink()
        con.execute(f"SET partitioned_write_flush_threshold = {PARTITIONED_FLUSH_ROWS}")
        try:
            _copy_to(rel, local, compression, partition_by=by, file_prefix=file_prefix)
        finally:
            con.execute("RESET partitioned_write_flush_threshold")
        for path in sorted(local.glob(pattern)):
            key = f"{folder}/{path.parent.name}/{path.name}"
            if not store.local_dir:
                store.upload_file(path, key)
            files.setdefault(path.parent.name.removeprefix(f"{by}="), []).append(store.uri(key))
    return files
