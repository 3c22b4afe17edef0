"""The rows to keep, as the writers of kept records take them: checked (:func:`keep_array`), and
found in a block of lines (:func:`block_rows`, :func:`run_bounds`)."""

from __future__ import annotations

import numpy as np



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
