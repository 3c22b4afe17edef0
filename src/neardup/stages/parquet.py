"""Parquet files of the work directory and of the output, the same bytes from the same rows.

:class:`ParquetRows` writes rows streamed in any batch sizes as row groups of exactly
``ROW_GROUP`` rows, so that the same rows give the same bytes whichever engine produced them
and however they were batched; :func:`write_parquet` writes one table so.
"""

from __future__ import annotations

from typing import List

import pyarrow as pa
import pyarrow.parquet as pq

from ..io import fs

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
        self._upload = fs.atomic_write(path)
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
        self._pending.append(table.select(self.schema.names).cast(self.schema))
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
    w = ParquetRows(path, table.schema)
    w.write(table)
    w.close()
