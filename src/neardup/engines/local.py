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

from typing import Callable, List, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow
from ..config import default_workers
from ..kernels.hashing import kernel_threads, partition_of
from ..progress import check_interrupt


class Frame(list):
    """The partitions (Arrow tables) or results of one step, in order."""


class Held:
    """A value shared with the calls of a map: here, the value itself."""

    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value


class LocalEngine:
    def __init__(self, workers: Optional[int] = None, partitions: int = 1):
        self.workers = workers
        self.cpus = default_workers(workers)
        self._partitions = int(partitions)
        self._threads = None

    def __enter__(self) -> "LocalEngine":
        self._threads = kernel_threads(self.workers)  # the run's thread count, restored after it
        self._threads.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._threads.__exit__(*exc)

    def partitions(self, nbytes: float) -> int:
        return self._partitions

    def map(self, fn: Callable, items: Sequence, *, progress=None, units: Optional[Callable] = None) -> Frame:
        """``fn(item)`` for every item (a list, or the partitions of a frame), in order; with
        ``progress``, ``fn(item, report=progress.update)`` reports as it goes."""
        out = Frame()
        for item in items:
            check_interrupt()
            out.append(fn(item) if progress is None else fn(item, report=progress.update))
        return out

    def shuffle(self, frames, key: str, parts: int) -> Frame:
        """The rows of every table of ``frames`` (a frame or a list of them) regrouped: partition
        p holds the rows whose ``key`` hashes to p (:func:`neardup.kernels.hashing.partition_of`), with
        an int32 column ``part`` = p."""
        tables = [t.drop_columns(["part"]) if "part" in t.column_names else t
                  for frame in ([frames] if isinstance(frames, Frame) else frames) for t in frame]
        tables = [t for t in tables if t.num_rows] or tables[:1]
        if not tables:
            return Frame(pa.table({"part": arrow([], pa.int32())}) for _ in range(parts))
        table = pa.concat_tables(tables)
        if parts == 1:
            return Frame([table.append_column("part", arrow(np.zeros(table.num_rows, np.int32)))])
        part = partition_of(table.column(key).to_numpy(), parts)
        order = np.argsort(part, kind="stable")
        table, part = table.take(arrow(order)), part[order]
        bounds = np.searchsorted(part, np.arange(parts + 1))
        return Frame(table.slice(lo, hi - lo).append_column("part", arrow(part[lo:hi]))
                     for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()))

    def collect(self, frame: Frame) -> List:
        return list(frame)

    def persist(self, frame: Frame) -> Frame:
        return frame

    def share(self, value) -> Held:
        return Held(value)
