"""Parquet files of the work and state prefixes, local or on S3, read with pyarrow.

`pre_buffer=False` keeps memory flat: pyarrow's default pre-buffering holds a whole
file's column chunks at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage


def open_parquet(uri: str) -> pq.ParquetFile:
    """A Parquet file to read in row groups or batches."""
    store, name = storage.open_file(uri)
    return pq.ParquetFile(store.arrow_input(name), pre_buffer=False)


def read_table(uri: str, columns: Sequence[str]) -> pa.Table:
    """Some columns of one Parquet file, whole (for narrow columns of a bounded part)."""
    return open_parquet(uri).read(columns=list(columns), use_threads=True)
