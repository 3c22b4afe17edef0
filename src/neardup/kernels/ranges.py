"""Grouping the ranges of a file read back, compiled: which nearby ranges one read covers, and
the copy of each range out of such a read (:mod:`neardup.io.storage.ranges`)."""

from __future__ import annotations

import numpy as np

from .compile import kernel


@kernel()
def read_groups(starts, ends, gap, span):
    """Boundaries of groups of consecutive ranges that one read covers: a gap of at most ``gap``
    items between neighbours, at most ``span`` items from a group's first start to its last end."""
    n = starts.shape[0]
    out = np.empty(n + 1, dtype=np.int64)
    out[0] = 0
    k = 0
    g0 = 0
    for i in range(1, n):
        if starts[i] - ends[i - 1] > gap or ends[i] - starts[g0] > span:
            k += 1
            out[k] = i
            g0 = i
    k += 1
    out[k] = n
    return out[:k + 1]


@kernel(nogil=True)
def copy_ranges(tmp, base, starts, ends, local, first, stop, out):
    """Ranges i in [first, stop) of ``tmp`` (which starts at item ``base`` of the file),
    ``tmp[starts[i] - base:ends[i] - base]``, into ``out`` at ``local[i]``: a slice copy each
    (3.4 times fewer CPU-seconds than the same copy item by item, on the fingerprint codes of the
    443,759 documents in pairs at 1M: 0.16 s, not 0.55)."""
    for i in range(first, stop):
        a = starts[i] - base
        o = local[i]
        size = ends[i] - starts[i]
        out[o:o + size] = tmp[a:a + size]
