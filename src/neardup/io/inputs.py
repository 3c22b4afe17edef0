"""What the user holds, as inputs, and the kept rows given back in the same form.

:func:`in_memory` turns an in-memory input (a pyarrow Table or RecordBatch, a pandas DataFrame,
a Hugging Face ``Dataset`` or ``DatasetDict``, a list of texts) into named Arrow tables, or says
that the input is paths; :func:`kept_of` gives the kept rows back as the type given. Nothing
here imports pandas or datasets unless the object came from them.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from ..kernels.arrays import arrow_take
from .columns import INDEX_ID_COLUMN  # noqa: F401  (neardup.io.inputs.INDEX_ID_COLUMN, as before)



def looks_like_paths(items: Sequence) -> bool:
    """A list of strings is a list of paths when each one looks like a path: no white space, and
    an existing file or folder, a glob, a path separator or a file extension (a dot and 1 to 16
    letters or digits: ``a.jsonl``, not the ``Yes.`` or ``ok!.`` of a one-word text). Otherwise
    it is a list of texts."""
    for s in items:
        if isinstance(s, os.PathLike):
            continue
        if not isinstance(s, str) or not s or any(c.isspace() for c in s) or len(s) > 4096:
            return False
        ext = os.path.splitext(s)[1][1:]
        if not (os.path.exists(s) or any(c in s for c in "*?[/" + os.sep) or (0 < len(ext) <= 16 and ext.isalnum())):
            return False
    return True


def _with_index_ids(table: pa.Table, ids) -> pa.Table:
    return table.append_column(INDEX_ID_COLUMN, pa.array([str(x) for x in ids], pa.string()))


def in_memory(source) -> Tuple[Optional[str], Optional[Dict[str, pa.Table]]]:
    """(kind, {name: pyarrow Table}) for in-memory inputs, or (None, None) for paths. ``kind``
    is ``arrow``, ``pandas``, ``polars``, ``hf``, ``hf_dict`` or ``texts``."""
    if isinstance(source, pa.Table):
        return "arrow", {"<table>": source}
    if isinstance(source, pa.RecordBatch):
        return "arrow", {"<table>": pa.Table.from_batches([source])}
    mod = type(source).__module__ or ""
    # pandas (0.1-0.2 s to import) only when the object comes from it: a path never pays for it
    # (a subclass of DataFrame defined elsewhere has pandas in its MRO)
    if any((getattr(k, "__module__", "") or "").split(".")[0] == "pandas" for k in type(source).__mro__):
        import pandas as pd
        if isinstance(source, pd.DataFrame):
            _index_as_arrow(source.index)  # given back with its type (typed_ids): checked before any work
            return "pandas", {"<table>": _with_index_ids(_from_pandas(source), source.index)}
    from .frames import polars_input
    polars = polars_input(source)  # a polars DataFrame: its Arrow table (a LazyFrame is refused)
    if polars is not None:
        return polars
    if mod.startswith("datasets") and type(source).__name__ == "DatasetDict":
        return "hf_dict", {name: _hf_table(split) for name, split in source.items()}
    if mod.startswith("datasets") and hasattr(source, "data") and hasattr(source, "select"):
        return "hf", {"<table>": _hf_table(source)}
    if isinstance(source, (list, tuple)) and source and not looks_like_paths(source):
        if not all(isinstance(t, str) for t in source):
            bad = next(t for t in source if not isinstance(t, str))
            raise ConfigError(f"a list given to dedup must hold texts (str) or paths; found a {type(bad).__name__}")
        return "texts", {"<texts>": _with_index_ids(pa.table({"text": pa.array(source, pa.string())}),
                                                    range(len(source)))}
    return None, None


def _from_pandas(df) -> pa.Table:
    """A DataFrame as a pyarrow Table; a column of mixed Python types (ids ``1`` and ``"1"``) is
    refused in one line naming it (Arrow's own error was a tuple of two messages)."""
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        column = next((str(c) for c in df.columns if df[c].dtype == object
                       and len({type(v) for v in df[c] if v is not None}) > 1), None)
        if column is None:
            raise ConfigError(f"the DataFrame cannot be read as Arrow columns: {str(exc).splitlines()[0]}") from None
        kinds = sorted({type(v).__name__ for v in df[column] if v is not None})
        raise ConfigError(f"DataFrame column {column!r} mixes {' and '.join(kinds)} values: a column holds one type "
                          f"(an id column: strings or integers; convert it, e.g. df[{column!r}].astype(str))") from None


def _index_as_arrow(index) -> None:
    """Whether a DataFrame's index can be one Arrow array, as :func:`typed_ids` gives its values
    back; an index Arrow cannot hold as one column (mixed types, a MultiIndex of them) is refused
    in one line."""
    try:
        pa.array(index, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise ConfigError(f"the DataFrame's index cannot be one column of ids ({str(exc).splitlines()[0]}): its "
                          f"values are the ids, one type a row; number the rows instead (df.reset_index()), or "
                          f"make them one type (df.index = df.index.map(str))") from None


def typed_ids(kind: str, tables: Dict[str, pa.Table], source: Any, table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``table`` (removed or clusters) with its id ``columns`` as the user's own ids when the ids
    were a DataFrame's index or a list's positions (:data:`INDEX_ID_COLUMN`, stored as text):
    the index's values with its type (``df.index.isin(result.removed["id"].to_pylist())`` holds), a list's
    positions as integers. A column holding an id of elsewhere (an ``--against`` index's) stays
    text."""
    if kind not in ("pandas", "texts"):
        return table
    ids = next(iter(tables.values()))
    if INDEX_ID_COLUMN not in ids.column_names:
        return table
    if kind == "texts":
        values = pa.array(np.arange(ids.num_rows, dtype=np.int64))
    else:
        values = pa.array(source.index, from_pandas=True)
    import pyarrow.compute as pc
    as_text = ids.column(INDEX_ID_COLUMN).combine_chunks()
    for name in columns:
        if name not in table.column_names:
            continue
        col = table.column(name).combine_chunks()
        at = pc.index_in(col, value_set=as_text)
        if at.null_count != col.null_count:
            continue  # not all of them the input's ids
        table = table.set_column(table.column_names.index(name), name, values.take(at))
    return table


def _hf_table(ds) -> pa.Table:
    if getattr(ds, "_indices", None) is not None:  # a shuffled/selected view
        ds = ds.flatten_indices()
    return pa.table(ds.data.table if hasattr(ds.data, "table") else ds.data)


def kept_rows(n: int, name: str, removed: pa.Table, rejected: pa.Table) -> np.ndarray:
    """The rows (ascending) of the table ``name`` of ``n`` rows that a run kept: every row but
    those removed.parquet and rejected.parquet list for it (the run's own record of what it
    took away, so that what is given back is what was published)."""
    gone = [_rows_of(removed, name), _rows_of(rejected, name)]
    keep = np.ones(n, bool)
    for rows in gone:
        keep[rows[(rows >= 0) & (rows < n)]] = False
    return np.flatnonzero(keep)


def _rows_of(table: pa.Table, name: str) -> np.ndarray:
    if table.num_rows == 0:
        return np.zeros(0, np.int64)
    source = np.asarray(table.column("source").to_pylist(), dtype=object)
    row = table.column("row").to_numpy(zero_copy_only=False)
    mine = (source == name) & ~np.isnan(row.astype(np.float64))
    return row[mine].astype(np.int64)


def kept_of(kind: str, tables: Dict[str, pa.Table], source: Any, removed: pa.Table, rejected: pa.Table):
    """The kept rows of in-memory ``tables`` (of ``kind``, from :func:`in_memory`) as the type
    the user gave: a list of the indexes kept (texts), a Dataset or DatasetDict (``select``), a
    pandas DataFrame (its own index), a polars DataFrame, or a pyarrow Table."""
    rows = [kept_rows(t.num_rows, name, removed, rejected) for name, t in tables.items()]
    if kind == "texts":
        return rows[0].tolist()
    if kind == "hf":
        return source.select(rows[0].tolist())
    if kind == "hf_dict":
        return type(source)({name: source[name].select(r.tolist()) for name, r in zip(tables, rows)})
    if kind == "polars":
        from .frames import polars_rows
        return polars_rows(source, rows[0])
    if kind == "pandas":  # the user's own rows (as marked_of gives them), not a round trip through Arrow
        return source.iloc[rows[0]]
    table = next(iter(tables.values()))
    if INDEX_ID_COLUMN in table.column_names:
        table = table.drop_columns([INDEX_ID_COLUMN])
    return arrow_take(table, rows[0])  # (view types too: string_view, binary_view)
