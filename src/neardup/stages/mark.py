"""``--mark`` (``dedup(..., mark=True)``): every document written to ``marked/`` (instead of the kept
ones to ``kept/``) with the columns of :mod:`neardup.io.formats.marked` saying what the run
found: the write stage's part for it.

The marks come from the members of the clusters (MEMBERS_SCHEMA rows), range-partitioned by
document and sorted like the removed rows (kind ``marks`` of
:func:`neardup.stages.write.write_members`), so that each call of the write stage reads only
the ranges of its own blocks and every engine writes the same bytes. A document that is in no
part is in no cluster: kept, its marks null. removed.parquet, clusters.parquet and the stats are
written as without ``--mark``: the stats count the kept documents (those not marked), and list
the files written under ``marked/`` as ``marked_files``.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..io.formats.marked import AGAINST_INDEX, MARK_COLUMNS, MARKS_SCHEMA, NEAR_DUPLICATE, refuse_marked, write_marked
from ..io.inputs import INDEX_ID_COLUMN
from ..io.sources import Source, marked_relpath
from ..io.storage.folder import Folder
from ..kernels.arrays import arrow, arrow_take, to_numpy

MARKED = "marked"  # the output's folder of marked files (kept/ holds only kept documents: never both)
MARK_MEMBER_COLUMNS = ["source", "row", "cluster", "removed", "cluster_id", "representative_id", "similarity"]


def member_marks(work: Folder, parts: Sequence[str], group: Sequence[int]) -> Dict[int, pa.Table]:
    """The member rows (MARK_MEMBER_COLUMNS) of each source of ``group``, by row: one a
    document (a removed row first, should a document be both a cluster's and an index's match)."""
    tables = [work.read_table(name, MARK_MEMBER_COLUMNS) for name in parts]
    if not tables:
        return {}
    import pyarrow.compute as pc  # here, not at the start: --mark only (issue 32)

    t = pa.concat_tables(tables)
    t = t.filter(pc.is_in(t.column("source"), value_set=pa.array(list(group), t.schema.field("source").type)))
    out: Dict[int, pa.Table] = {}
    for si in group:
        mine = t.filter(pc.equal(t.column("source"), si)).sort_by([("row", "ascending"), ("removed", "descending")])
        if mine.num_rows:
            rows = to_numpy(mine.column("row").combine_chunks())
            first = np.concatenate(([True], rows[1:] != rows[:-1]))
            out[si] = mine.filter(arrow(first)) if not first.all() else mine
    return out


def marks_of(members: Optional[pa.Table], keep: np.ndarray) -> Tuple[pa.Table, int]:
    """MARKS_SCHEMA rows for the rows ``keep`` of a source whose member rows are ``members``
    (by row, one a row; None: none), and how many of them are marked as duplicates."""
    import pyarrow.compute as pc  # (--mark only)

    n = len(keep)
    if members is None or members.num_rows == 0:
        return pa.table([pa.nulls(n, f.type) for f in MARKS_SCHEMA], schema=MARKS_SCHEMA), 0
    rows = to_numpy(members.column("row").combine_chunks())
    at = np.searchsorted(rows, keep)
    found = (at < len(rows)) & (rows[np.minimum(at, len(rows) - 1)] == keep)
    take = arrow(np.where(found, at, -1)).cast(pa.int64())
    take = pc.if_else(pc.greater_equal(take, 0), take, pa.scalar(None, pa.int64()))
    m = members.take(take)
    removed = pc.fill_null(m.column("removed"), False)
    nothing = pa.scalar(None, pa.string())
    against = pc.equal(m.column("cluster"), -1)
    reason = pc.if_else(removed, pc.if_else(against, AGAINST_INDEX, NEAR_DUPLICATE), nothing)
    table = pa.table({"duplicate_of": pc.if_else(removed, m.column("representative_id"), nothing),
                      "cluster": m.column("cluster_id"),
                      "similarity": pc.if_else(removed, m.column("similarity"), pa.scalar(None, pa.float64())),
                      "duplicate_reason": reason}, schema=MARKS_SCHEMA)
    return table, int(pc.sum(removed).as_py() or 0)


def write_marked_source(sources: Sequence[Source], si: int, keep: np.ndarray, members: Optional[pa.Table],
                        folder: Folder, table_name: str) -> Tuple[Optional[str], int, int]:
    """Source ``si``'s documents at ``keep`` (every row but the rejected ones) with their marks,
    under ``folder`` (``marked/``): an in-memory table as ``table_name``, a file under its own
    name (a text file's with ``.jsonl``). Returns (its name there or None, documents written,
    documents kept: those not marked as duplicates)."""
    src = sources[si]
    marks, duplicates = marks_of(members, keep)
    if src.format == "table":
        table = arrow_take(src.table, keep)
        if INDEX_ID_COLUMN in table.column_names:
            table = table.drop_columns([INDEX_ID_COLUMN])
        refuse_marked(src.name, table.column_names)
        for name in MARK_COLUMNS:
            table = table.append_column(MARKS_SCHEMA.field(name), marks.column(name))
        folder.write_parquet(table_name, table)
        return table_name, len(keep), len(keep) - duplicates
    if len(keep) == 0:
        return None, 0, 0
    rel = marked_relpath(src)
    n = write_marked(src, keep, marks, folder.join(rel))
    return rel, n, n - duplicates


def marked_result(kind: str, tables: Dict[str, pa.Table], source, out: Folder, rejected: pa.Table):
    """``DedupResult.kept`` of an in-memory input run with ``mark``: the user's rows (all but the
    rejected ones) with the marks the run wrote for them (``marked/``'s table files), as the type
    given (:func:`neardup.io.frames.marked_of`); the ids of a DataFrame's index or a list's
    positions typed as the user's (:func:`neardup.io.inputs.typed_ids`)."""
    from ..io.frames import marked_of
    from ..io.inputs import kept_rows, typed_ids
    from ..kernels.arrays import empty_table
    from .outputs import REMOVED_SCHEMA, table_kept_name

    rows, marks = {}, {}
    for si, (name, t) in enumerate(tables.items()):
        rows[name] = kept_rows(t.num_rows, name, empty_table(REMOVED_SCHEMA), rejected)
        m = out.read_table(f"{MARKED}/{table_kept_name(si, len(tables))}", list(MARK_COLUMNS))
        marks[name] = typed_ids(kind, tables, source, m, ("duplicate_of", "cluster"))
    return marked_of(kind, tables, source, rows, marks)
