"""The embedded engine: every call in this process, one after another, each using every core
through the kernels' threads.

It wants one partition (``partitions``), so the stages do their work in one piece: every bucket
at once, every cluster at once. Memory: per document the band keys (8 bytes a band, a few bands
at a time), source, row, length and count (28 bytes); signatures and shingle fingerprints stay
on disk and are read only for the documents of candidate pairs; texts are held one batch at a
time. ``LocalEngine(partitions=P)`` cuts the same work into P partitions with in-memory
shuffles (a sort on the partition of each row): the distributed path of every stage, in one
process (the tests compare it with one partition and with Ray).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, List, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow
from ..config import default_workers
from ..kernels.hashing import kernel_threads, partition_of
from ..progress import check_interrupt


class LocalFrame(list):
    """The partitions (Arrow tables) or results of one step, in order (an :class:`~.Frame`)."""


class LocalShared:
    """A value shared with the calls of a map (a :class:`~.Shared`): here, the value itself."""

    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value


_arrow_lock = threading.Lock()
_arrow_users = [0, None]  # runs inside arrow_threads, Arrow's CPU count before the first


@contextmanager
def arrow_threads(workers: Optional[int]):
    """--workers bounds Arrow's thread pool (JSON parsing, compute) as well as the kernels'.
    The pool is global to the process: the count found before the first of several concurrent
    runs is the one restored after the last."""
    if not workers:
        yield
        return
    with _arrow_lock:
        if _arrow_users[0] == 0:
            _arrow_users[1] = pa.cpu_count()
        _arrow_users[0] += 1
        pa.set_cpu_count(workers)
    try:
        yield
    finally:
        with _arrow_lock:
            _arrow_users[0] -= 1
            if _arrow_users[0] == 0:
                pa.set_cpu_count(_arrow_users[1])


class LocalEngine:
    """An :class:`~.Engine` in this process: every call one after another, each using every core
    (``workers`` of them) through the kernels' threads and Arrow's."""
    in_process = True

    def __init__(self, workers: Optional[int] = None, partitions: int = 1):
        self.workers = workers
        self.cpus = default_workers(workers)
        self._partitions = int(partitions)
        self._held = []

    def __enter__(self) -> "LocalEngine":
        # the run's thread counts (numba's and Arrow's), restored after it
        for ctx in (arrow_threads(self.workers), kernel_threads(self.workers)):
            ctx.__enter__()
            self._held.append(ctx)
        return self

    def __exit__(self, *exc) -> None:
        while self._held:
            self._held.pop().__exit__(*exc)

    def partitions(self, nbytes: float) -> int:
        return self._partitions

    def one_call(self, nbytes: float) -> bool:
        return False  # one partition is the whole path in this process already

    def map(self, fn: Callable, items: Sequence, *, progress=None, units: Optional[Callable] = None,
            concurrent: int = 1, beside: bool = False) -> LocalFrame:
        """``fn(item)`` for every item (a list, or the partitions of a frame), in order; with
        ``progress``, ``fn(item, report=progress.update)`` reports as it goes. ``concurrent``:
        calls run by that many threads at once (the ranges of a split file: the parsing of each
        is one thread), the results and the first error in item order, as one after another.
        ``beside``: nothing to do here (the calling thread runs them, beside the other step's)."""
        items = list(items)
        if concurrent > 1 and len(items) > 1 and not self.workers == 1:
            return self._map_threads(fn, items, progress, concurrent)
        out = LocalFrame()
        for item in items:
            check_interrupt()
            out.append(fn(item) if progress is None else fn(item, report=progress.update))
        return out

    def _map_threads(self, fn: Callable, items: list, progress, concurrent: int) -> LocalFrame:
        from concurrent.futures import ThreadPoolExecutor

        lock = threading.Lock()

        def report(n):
            with lock:
                progress.update(n)

        def call(item):
            check_interrupt()
            with kernel_threads(self.workers):  # numba's settings are per thread: this one's as the run's
                return fn(item) if progress is None else fn(item, report=report)

        pool = ThreadPoolExecutor(max_workers=min(concurrent, len(items)), thread_name_prefix="neardup-map")
        try:
            futures = [pool.submit(call, item) for item in items]
            return LocalFrame(f.result() for f in futures)  # the first error in item order
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def shuffle(self, frames, key: str, parts: int) -> LocalFrame:
        """The rows of every table of ``frames`` (a frame or a list of them) regrouped: partition
        p holds the rows whose ``key`` hashes to p (:func:`neardup.kernels.hashing.partition_of`), with
        an int32 column ``part`` = p."""
        tables = [t.drop_columns(["part"]) if "part" in t.column_names else t
                  for frame in ([frames] if isinstance(frames, LocalFrame) else frames) for t in frame]
        tables = [t for t in tables if t.num_rows] or tables[:1]
        if not tables:
            return LocalFrame(pa.table({"part": arrow([], pa.int32())}) for _ in range(parts))
        table = pa.concat_tables(tables)
        if parts == 1:
            return LocalFrame([table.append_column("part", arrow(np.zeros(table.num_rows, np.int32)))])
        part = partition_of(table.column(key).to_numpy(), parts)
        order = np.argsort(part, kind="stable")
        table, part = table.take(arrow(order)), part[order]
        bounds = np.searchsorted(part, np.arange(parts + 1))
        return LocalFrame(table.slice(lo, hi - lo).append_column("part", arrow(part[lo:hi]))
                     for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()))

    def collect(self, frame: LocalFrame) -> List:
        return list(frame)

    def persist(self, frame: LocalFrame) -> LocalFrame:
        return frame

    def share(self, value) -> LocalShared:
        return LocalShared(value)
