"""Arrow tables in files, local or remote: what the stages write into the work directory and the
output folder, through :mod:`neardup.io.fs` (atomic per file, any URL).

Arrow IPC files (``.arrow``) are memory-mapped when local, so a lookup touches only the pages of
its rows; remote ones are read through the store (a seekable file: only the record batches read
are fetched). Parquet files are read and written with pyarrow's own code for local paths.
"""

from __future__ import annotations

from typing import List, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from . import fs


def write_parquet(table: pa.Table, path: str, **options) -> None:
    """Write ``table`` as a Parquet file at ``path`` (a local path or a URL), atomically;
    ``options`` go to ``pyarrow.parquet.write_table`` (compression, row_group_size, ...)."""
    with fs.atomic_write(path) as f:
        pq.write_table(table, f, **options)


def write_arrow(table: pa.Table, path: str, max_chunksize: Optional[int] = None) -> None:
    """Write ``table`` as an uncompressed Arrow IPC file at ``path``, atomically."""
    with fs.atomic_write(path) as f:
        with pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table, max_chunksize=max_chunksize)


def read_table(path: str, columns: Optional[List[str]] = None) -> pa.Table:
    """An Arrow IPC (``.arrow``, memory-mapped when local) or Parquet file as a table."""
    if path.endswith(".arrow"):
        if not fs.is_url(path):
            with pa.memory_map(path) as f:
                table = pa.ipc.open_file(f).read_all()
        else:
            with fs.open_input(path) as f:
                table = pa.ipc.open_file(f).read_all()
        return table.select(columns) if columns is not None else table
    # ParquetFile rather than pq.read_table: the dataset reader behind read_table imports pandas
    if not fs.is_url(path):
        return pq.ParquetFile(path).read(columns=columns)
    with fs.open_input(path) as f:
        return pq.ParquetFile(f).read(columns=columns)


def parquet_file(path: str) -> pq.ParquetFile:
    """``pyarrow.parquet.ParquetFile`` of a local path (pyarrow's own reader) or a URL."""
    if not fs.is_url(path):
        return pq.ParquetFile(path)
    return pq.ParquetFile(fs.open_input(path))
