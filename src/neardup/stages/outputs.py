"""What the write stage and ``--mark`` (:mod:`.mark`) both need, below both: the schemas of the
output folder's Parquet files, the name of an in-memory table's kept file, and the rule of a
source's kept rows. :mod:`.write` re-exports every name."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


REMOVED_SCHEMA = pa.schema([("id", pa.string()), ("representative", pa.string()), ("cluster", pa.string()),
                            ("similarity", pa.float64()), ("source", pa.string()), ("row", pa.int64()),
                            ("representative_source", pa.string())])
CLUSTERS_SCHEMA = pa.schema([("id", pa.string()), ("cluster", pa.string()), ("is_representative", pa.bool_())])
REJECTED_SCHEMA = pa.schema([("source", pa.string()), ("row", pa.int64()), ("reason", pa.string())])
SAMPLE_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])


def table_kept_name(si: int, n_sources: int) -> str:
    """The kept (or marked) file of in-memory table ``si`` of ``n_sources``."""
    return "table.parquet" if n_sources == 1 else f"table-{si}.parquet"


def kept_rows(rows: np.ndarray, dropped: np.ndarray) -> np.ndarray:
    """``np.setdiff1d(rows, dropped)`` (sorted, without repeats), without its two sorts when
    ``rows`` is already sorted without repeats (as a source's rows are)."""
    rows = np.asarray(rows)
    if len(rows) > 1 and not np.all(rows[1:] > rows[:-1]):
        return np.setdiff1d(rows, dropped)
    if len(dropped) == 0:
        return rows.copy()
    return rows[~np.isin(rows, dropped)]
