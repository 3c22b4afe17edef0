"""Arrow tables in files, local or remote: what the stages write into the work directory and the
output folder (atomic per file, any URL).

Every Parquet file neardup writes goes through :class:`ParquetRows`, whose row groups of exactly
``ROW_GROUP`` rows make the same rows give the same bytes whichever engine produced them and
however they were batched (:func:`write_parquet` writes one table so). Arrow IPC files
(``.arrow``) are memory-mapped when local, so a lookup touches only the pages of its rows;
remote ones are read through the store (a seekable file: only the record batches read are
fetched). Parquet files are read with pyarrow's own code for local paths.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .fs import atomic_write, open_input, os_path

PARQUET_OPTS = dict(compression="zstd", use_dictionary=False, write_statistics=False)
ROW_GROUP = 65536


class ParquetRows:
    """Writes rows streamed in any batch sizes as row groups of exactly ROW_GROUP rows, so that
    the same rows give the same bytes whichever engine produced them and however they were
    batched. Appears whole on close (:func:`neardup.io.fs.atomic_write`: a local file under a
    temporary name renamed, an upload completed); a writer dropped unclosed, after an error,
    leaves nothing."""

    def __init__(self, path: str, schema: pa.Schema):
        self.path = path
        self.schema = schema
        self._upload = atomic_write(path)
        sink = self._upload.__enter__()
        try:
            self._writer = pq.ParquetWriter(sink, schema, **PARQUET_OPTS)
        except BaseException as exc:
            self._abort(exc)
            raise
        self._pending: List[pa.Table] = []
        self._pending_rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        table = table.select(self.schema.names)  # cast only when it is not of the schema (issue 32)
        self._pending.append(table if table.schema.equals(self.schema, check_metadata=True) else table.cast(self.schema))
        self._pending_rows += table.num_rows
        if self._pending_rows >= ROW_GROUP:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending)
        full = (table.num_rows // ROW_GROUP) * ROW_GROUP if not final else table.num_rows
        if full:
            self._writer.write_table(table.slice(0, full).combine_chunks(), row_group_size=ROW_GROUP)
        rest = table.slice(full)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def close(self) -> None:
        try:
            self._flush(final=True)
            self._writer.close()
        except BaseException as exc:
            self._abort(exc)
            raise
        upload, self._upload = self._upload, None
        upload.__exit__(None, None, None)  # the file appears now (renamed; an upload completed)

    def _abort(self, exc: BaseException) -> None:
        upload, self._upload = self._upload, None
        if upload is not None:
            upload.__exit__(type(exc), exc, None)

    def __del__(self):
        if getattr(self, "_upload", None) is not None:  # never closed: no half-written object
            self._abort(RuntimeError("abandoned"))


def write_parquet(table: pa.Table, path: str) -> None:
    """``table`` as a Parquet file at ``path`` (a local path or a URL), atomically, in the row
    groups of :class:`ParquetRows`."""
    w = ParquetRows(path, table.schema)
    w.write(table)
    w.close()


def stitch_parquet(path: str, schema: pa.Schema, parts: Sequence[str],
                   convert: Optional[Callable[[pa.Table], pa.Table]] = None) -> int:
    """One Parquet file at ``path`` of the rows of the files ``parts`` (Parquet or Arrow IPC), in
    that order (each read a batch at a time, :func:`iter_batches`; ``convert``-ed batch by batch, written through
    :class:`ParquetRows`): the bytes of :func:`write_parquet` of the parts' rows concatenated,
    in memory bounded by a few row groups whatever the total, no sort and nothing per row in
    Python. Returns the rows written."""
    w = ParquetRows(path, schema)
    n = 0
    for part in parts:
        for batch in iter_batches(part):
            table = pa.Table.from_batches([batch])
            table = convert(table) if convert is not None else table
            w.write(table)
            n += table.num_rows
    w.close()
    return n


def iter_batches(path: str) -> Iterator[pa.RecordBatch]:
    """The record batches of a Parquet file (a row group's worth at a time) or an Arrow IPC file
    (as written: :meth:`.folder.Folder.write_arrow` caps them at ROW_GROUP rows), one in memory
    at a time besides the reader's."""
    if path.endswith(".arrow"):
        local = os_path(path)
        with (pa.memory_map(local) if local is not None else open_input(path)) as f:
            reader = pa.ipc.open_file(f)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
        return
    f = parquet_file(path)
    try:
        yield from f.iter_batches(batch_size=ROW_GROUP)
    finally:
        f.close(force=True)  # a remote part: the file parquet_file opened


def write_arrow(table: pa.Table, path: str, max_chunksize: Optional[int] = None) -> None:
    """Write ``table`` as an uncompressed Arrow IPC file at ``path``, atomically."""
    with atomic_write(path) as f:
        with pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table, max_chunksize=max_chunksize)


def read_table(path: str, columns: Optional[List[str]] = None) -> pa.Table:
    """An Arrow IPC (``.arrow``, memory-mapped when local) or Parquet file as a table."""
    local = os_path(path)
    if path.endswith(".arrow"):
        if local is not None:
            with pa.memory_map(local) as f:
                table = pa.ipc.open_file(f).read_all()
        else:
            with open_input(path) as f:
                table = pa.ipc.open_file(f).read_all()
        return table.select(columns) if columns is not None else table
    # ParquetFile rather than pq.read_table: the dataset reader behind read_table imports pandas
    if local is not None:
        return pq.ParquetFile(local).read(columns=columns)
    with open_input(path) as f:
        return pq.ParquetFile(f).read(columns=columns)


def parquet_file(path: str) -> pq.ParquetFile:
    """``pyarrow.parquet.ParquetFile`` of a local path (pyarrow's own reader) or a URL."""
    local = os_path(path)
    if local is not None:
        return pq.ParquetFile(local)
    return pq.ParquetFile(open_input(path))
