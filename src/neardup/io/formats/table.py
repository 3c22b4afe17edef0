"""In-memory tables (``pyarrow.Table``, :func:`neardup.io.sources.table_source`): their reader.
Their kept rows are not written here: the caller takes them from the table."""

from __future__ import annotations

from typing import Iterator, List

import pyarrow as pa

from ..batch import Batch, ReadContext
from ..sources import Source
from .columnar import arrow_batch, column_problem, wanted_columns


def read_table(ctx: ReadContext) -> Iterator[Batch]:
    """An in-memory table: one document a row."""
    table = ctx.src.table
    if not isinstance(table, pa.Table):
        raise TypeError(f"source {ctx.src.name} of format 'table' has no pyarrow.Table")
    reason = column_problem(ctx, table.schema)
    if reason:
        yield from ctx.problem(reason)
        return
    if table.num_rows == 0:
        yield from ctx.problem("empty table (no records)")
        return
    cols = wanted_columns(ctx)
    sel = table.select(cols)
    for row0 in range(0, sel.num_rows, ctx.batch_size):
        part = sel.slice(row0, ctx.batch_size)
        parts = arrow_batch(ctx, {c: part.column(c) for c in cols}, row0)
        yield from ctx.emit(*parts)


def field_names(src: Source) -> List[str]:
    """The columns of an in-memory table."""
    return src.table.column_names
