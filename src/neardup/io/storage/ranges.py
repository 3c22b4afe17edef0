"""Ranges of files read back: the items of many small ranges of a raw array file, and some
columns of an Arrow IPC file, local or remote alike (the only place that tells them apart).

A local file is read with explicit ``preadv`` calls in groups of nearby ranges (a memory map
would pull whole neighbourhoods of the file into the process); a remote one with ranged GETs,
nearby runs merged, issued together (no read-ahead cache fetching whole blocks).
"""

from __future__ import annotations

import io
import os
from collections import OrderedDict
from typing import List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ...kernels.arrays import read_only
from ...errors import NeardupError
from . import fs

LOCAL_GAP = 32 << 10   # bytes between two local runs below which one read takes both (and the gap)
LOCAL_SPAN = 8 << 20   # bytes one such read takes at most (its buffer is reused)


def read_rows(path: str, starts: np.ndarray, ends: np.ndarray, dtype) -> Tuple[np.ndarray, np.ndarray]:
    """Items [starts[i], ends[i]) of a raw file, for ascending non-overlapping ranges, as CSR
    (offsets, values). Explicit reads rather than a memory map (a map pulls whole neighbourhoods
    of the file into the process, fault-around, so that a few scattered documents would cost the
    memory of all of them); a local file is read in groups of nearby ranges, one read each (gaps
    under LOCAL_GAP read and dropped: one system call per candidate document cost more)."""
    from ...kernels.ranges import copy_ranges, read_groups
    dtype = np.dtype(dtype)
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    sizes = ends - starts
    local = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=local[1:])
    buf = np.empty(local[-1], dtype=dtype)
    if len(starts) == 0:
        return local, buf
    size = dtype.itemsize
    local_file = fs.os_path(path)
    if local_file is None:
        breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
        run_first = np.concatenate(([0], breaks))
        run_last = np.concatenate((breaks, [len(starts)])) - 1
        _range_rows(path, starts, ends, local, run_first, run_last, memoryview(buf).cast("B"), size)
        return local, buf
    groups = read_groups(starts, ends, LOCAL_GAP // size, LOCAL_SPAN // size)
    view = memoryview(buf).cast("B")
    tmp = None
    fd = os.open(local_file, os.O_RDONLY)
    try:
        for first, stop in zip(groups[:-1].tolist(), groups[1:].tolist()):
            lo, hi = int(starts[first]), int(ends[stop - 1])
            if hi <= lo:
                continue
            whole = local[stop] - local[first] == hi - lo  # no gap: straight into the result
            if whole:
                target = view[local[first] * size:local[stop] * size]
            else:
                if tmp is None or len(tmp) < hi - lo:
                    tmp = np.empty(hi - lo, dtype=dtype)
                target = memoryview(tmp).cast("B")[:(hi - lo) * size]
            if os.preadv(fd, [target], lo * size) != (hi - lo) * size:
                raise NeardupError(f"work directory damaged: short read in {path}; run without --resume")
            if not whole:
                copy_ranges(read_only(tmp), lo, starts, ends, local, first, stop, buf)  # as a map is: one version
    finally:
        os.close(fd)
    return local, buf


REMOTE_GAP = 64 << 10  # bytes between two runs below which one ranged GET reads both (and the gap)


def _range_rows(path: str, starts, ends, local, run_first, run_last, view, size: int) -> None:
    """read_rows on an object store: the runs merged into ranged GETs wherever the gap between
    two is under REMOTE_GAP (a request costs more than reading that much more), issued together."""
    runs = [(int(starts[a]) * size, int(ends[b]) * size, int(local[a]) * size)
            for a, b in zip(run_first.tolist(), run_last.tolist()) if ends[b] > starts[a]]
    if not runs:
        return
    groups = [[runs[0]]]
    for r in runs[1:]:
        if r[0] - groups[-1][-1][1] < REMOTE_GAP:
            groups[-1].append(r)
        else:
            groups.append([r])
    lo = [g[0][0] for g in groups]
    hi = [g[-1][1] for g in groups]
    for g, start, data in zip(groups, lo, fs.read_ranges(path, lo, hi)):
        if len(data) != g[-1][1] - start:
            raise NeardupError(f"work directory damaged: short read in {path}; run without --resume")
        data = memoryview(data)
        for a, b, at in g:
            view[at:at + b - a] = data[a - start:b - start]


class _RangeFile(io.RawIOBase):
    """A remote file whose every read is one ranged GET of exactly the bytes asked for (no
    read-ahead): Arrow's IPC reader then fetches the footer and the buffers of the wanted
    columns only."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.size = fs.info(path).size
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else (self.pos + offset if whence == 1 else self.size + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, b) -> int:
        end = min(self.pos + len(b), self.size)
        if end <= self.pos:
            return 0
        data = fs.read_ranges(self.path, [self.pos], [end])[0]
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)


def _remote_arrow_columns(path: str, columns: List[str]) -> pa.Table:
    """Some columns of a remote Arrow IPC file, fetching only their buffers (and the footer)."""
    with _RangeFile(path) as raw:
        f = pa.PythonFile(raw, mode="r")
        schema = pa.ipc.open_file(f).schema
        wanted = [schema.get_field_index(c) for c in columns]
        t = pa.ipc.open_file(f, options=pa.ipc.IpcReadOptions(included_fields=sorted(wanted))).read_all()
    return t.select(columns)



def arrow_columns(path: str, columns: List[str], cache: Optional["OrderedDict"] = None, keep: int = 8) -> pa.Table:
    """Some columns of an Arrow IPC file: a local one memory-mapped (nothing is read until
    used), a remote one fetched (its footer and those columns' buffers only) and kept in
    ``cache``, the ``keep`` most recent."""
    local_file = fs.os_path(path)
    if local_file is not None:
        with pa.memory_map(local_file) as f:
            return pa.ipc.open_file(f).read_all().select(columns)
    key = (path, tuple(columns))
    t = cache.pop(key, None) if cache is not None else None
    if t is None:
        t = _remote_arrow_columns(path, columns)
    if cache is not None:
        cache[key] = t
        while len(cache) > keep:
            cache.popitem(last=False)
    return t
