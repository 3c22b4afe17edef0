"""polars DataFrames in and out, and the marked rows (``dedup(..., mark=True)``) given back as the
type the user gave.

A polars ``DataFrame`` is read as its Arrow table (:func:`polars_input`; its ids by the rule of
a pyarrow table: an ``id`` column, else positions) and its kept rows are given back as polars,
taken from the user's own frame (every column, its dtypes, in order). A ``LazyFrame`` is
refused in one line: collecting it is the user's call (it may be larger than memory). Nothing
here imports polars, pandas or datasets unless the object came from them.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from ..kernels.arrays import arrow_take


def _from(source: Any, package: str) -> bool:
    return any((getattr(k, "__module__", "") or "").split(".")[0] == package for k in type(source).__mro__)


def polars_input(source: Any) -> Optional[Tuple[str, Dict[str, pa.Table]]]:
    """("polars", {"<table>": its Arrow table}) for a polars DataFrame; None for anything else."""
    if not _from(source, "polars"):
        return None
    import polars as pl
    if isinstance(source, pl.LazyFrame):
        raise ConfigError("dedup takes a polars DataFrame, not a LazyFrame: collect it first (dedup(lazy.collect()))")
    if isinstance(source, pl.DataFrame):
        return "polars", {"<table>": source.to_arrow()}
    return None


def polars_rows(source: Any, rows: np.ndarray):
    """The rows ``rows`` (ascending) of a polars DataFrame, every column as it was."""
    return source[np.asarray(rows, np.int64)]


def marked_of(kind: str, tables: Dict[str, pa.Table], source: Any, rows: Dict[str, np.ndarray],
              marks: Dict[str, pa.Table]):
    """The user's rows ``rows[name]`` (every one but the rejected) with their ``marks[name]``
    (MARKS_SCHEMA, a row each) appended, as the type given: a pyarrow Table, a pandas DataFrame
    (its own index), a datasets Dataset / DatasetDict, a polars DataFrame; a list of texts gives
    a pyarrow Table of ``text`` and the marks."""
    if kind == "hf":
        return _hf_marked(source, *_one(rows, marks))
    if kind == "hf_dict":
        return type(source)({name: _hf_marked(source[name], rows[name], marks[name]) for name in tables})
    r, m = _one(rows, marks)
    if kind == "polars":
        import polars as pl
        return pl.concat([polars_rows(source, r), pl.from_arrow(m)], how="horizontal")
    from .columns import INDEX_ID_COLUMN
    table = next(iter(tables.values()))
    if INDEX_ID_COLUMN in table.column_names:
        table = table.drop_columns([INDEX_ID_COLUMN])
    table = arrow_take(table, r)  # (view types too: string_view, binary_view)
    for field in m.schema:
        table = table.append_column(field, m.column(field.name))
    if kind != "pandas":
        return table
    out = source.iloc[r].copy()
    for field in m.schema:  # strings: None where null (``r["duplicate_of"] is None``); similarity: NaN
        col = m.column(field.name)
        out[field.name] = (col.to_numpy(zero_copy_only=False) if pa.types.is_floating(field.type)
                           else np.array(col.to_pylist() + [None], dtype=object)[:-1])  # ints and None: object
    return out


def _one(rows: Dict[str, np.ndarray], marks: Dict[str, pa.Table]):
    name = next(iter(rows))
    return rows[name], marks[name]


def _hf_marked(ds, rows: np.ndarray, marks: pa.Table):
    import datasets
    kept = ds if len(rows) == len(ds) else ds.select(rows.tolist())
    if len(kept) == 0:  # concatenate_datasets leaves an empty one out: the columns put in by hand
        table = pa.table(kept.flatten_indices().data.table if kept._indices is not None else kept.data.table)
        for field in marks.schema:
            table = table.append_column(field, marks.column(field.name))
        return datasets.Dataset(table)
    return datasets.concatenate_datasets([kept.flatten_indices() if kept._indices is not None else kept,
                                          datasets.Dataset(marks)], axis=1)
