"""The rows to keep, as the writers of kept records take them: checked (:func:`keep_array`),
found in a block of lines (:func:`block_rows`, :func:`run_bounds`) or taken from a table's
record batches (:func:`kept_batches`)."""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..kernels.arrays import arrow
from .batch import one_line


def keep_array(keep_rows) -> np.ndarray:
    """``keep_rows`` as int64 rows, checked: none negative, increasing, no repeats."""
    keep = np.asarray(keep_rows, dtype=np.int64).reshape(-1)
    if len(keep) and keep[0] < 0:
        raise ValueError(f"keep_rows has a negative row ({int(keep[0])})")
    if len(keep) > 1 and not np.all(keep[1:] > keep[:-1]):
        raise ValueError("keep_rows must be sorted in increasing order without repeats")
    return keep


def block_rows(data, starts, ends, keep, k: int, line0: int, capture, name: str):
    """For a block of lines (``starts``/``ends`` in ``data``, the first one file line ``line0``):
    ``(hi, idx)``, where ``keep[k:hi]`` are the kept rows inside it and ``idx`` their line
    indices in the block. Fills the wanted lines of ``capture``; a kept blank line is an error."""
    from ..kernels.lines import blank_lines
    n = len(starts)
    if capture:
        for r in capture:
            if line0 <= r < line0 + n:
                capture[r] = bytes(data[starts[r - line0]:ends[r - line0]])
    hi = int(np.searchsorted(keep, line0 + n))
    idx = keep[k:hi] - line0
    if len(idx):
        blank = blank_lines(data, starts, ends)
        if len(blank) and np.isin(idx, blank).any():
            r = int(idx[np.isin(idx, blank)][0]) + line0
            raise ValueError(f"keep_rows has row {r}, a blank line of {name}")
    return hi, idx


def run_bounds(idx: np.ndarray):
    """(first, last) positions in ``idx`` of each run of consecutive values."""
    cut = np.flatnonzero(np.diff(idx) != 1) + 1
    return np.concatenate(([0], cut)), np.concatenate((cut, [len(idx)])) - 1


def kept_batches(batches: Iterable[pa.RecordBatch], keep: np.ndarray, name: str, kind: str) -> Iterator[pa.RecordBatch]:
    """The rows ``keep`` of the record batches of the file ``name`` (a ``kind`` file: "CSV",
    "Parquet"), in order, a batch whole where all its rows are kept; none read past the last
    kept one. The reader's error (an Arrow error, an OSError, a ValueError) is an InputError that
    says after which row; a kept row past the end of the file, a ValueError."""
    batches = iter(batches)
    row0 = 0
    k = 0
    while k < len(keep):
        try:
            rb = next(batches)
        except StopIteration:
            break
        except (pa.ArrowException, OSError, ValueError) as e:
            raise unreadable(name, kind, row0, e) from None
        n = rb.num_rows
        hi = int(np.searchsorted(keep, row0 + n))
        if hi > k:
            idx = keep[k:hi] - row0
            yield rb if len(idx) == n else rb.take(arrow(idx))
        k = hi
        row0 += n
    if k < len(keep):
        raise ValueError(f"keep_rows has row {int(keep[k])} but {name} has {row0} rows")


def unreadable(name: str, kind: str, row0: int, e: Exception) -> InputError:
    """The error for the file ``name`` that its reader failed in after ``row0`` rows."""
    return InputError(f"{name}: not a readable {kind} file (after row {row0}: {one_line(e)})")
