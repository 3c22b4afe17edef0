"""The 64-bit hash primitives every module shares, once.

``fmix64`` is MurmurHash3's 64-bit finaliser (Appleby, 2011): a bijection on 64-bit integers
whose output bits each depend on every input bit, used to finish shingle hashes, band keys and
the audit's auxiliary sketch. ``mix64`` is splitmix64's finaliser (Steele, Lea & Flood, 2014)
over a numpy array, used to spread integer keys over partitions (:func:`partition_of`).
``string_hash`` (FNV-1a) gives strings (user ids) a key to partition by. Each has a plain-Python
twin for the tests. ``kernel_threads`` sets numba's thread count and scheduling for a block of
kernel calls and restores them afterwards (and starts numba's threads, see
:func:`neardup.kernels.compile.start_threads`).
"""

from __future__ import annotations

from typing import Optional

import numba as nb
import numpy as np

from .compile import kernel, start_threads

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15          # 2^64 / golden ratio: the usual odd additive constant
SPLITMIX_M1 = 0xBF58476D1CE4E5B9
SPLITMIX_M2 = 0x94D049BB133111EB

@kernel(inline="always")
def fmix64(h):
    # constants spelled inside: numba resolves an inlined function's globals in the caller's module
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


def fmix64_py(h: int) -> int:
    """The plain twin of :func:`fmix64`."""
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & MASK64
    h ^= h >> 33
    return h


def mix64(x) -> np.ndarray:
    """splitmix64's finaliser over an integer array (uint64 out)."""
    z = np.asarray(x).astype(np.uint64)
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= np.uint64(SPLITMIX_M1)
        z ^= z >> np.uint64(27)
        z *= np.uint64(SPLITMIX_M2)
        z ^= z >> np.uint64(31)
    return z


PARALLEL_CHUNK = 64


class kernel_threads:
    """Numba's thread count (``workers``) and dynamic scheduling for the kernels in the block.

    Dynamic scheduling (chunks of PARALLEL_CHUNK iterations) rather than numba's default static
    split: the pipeline reads and parses the next batch in another thread meanwhile, so one
    kernel thread is often slowed down; with static splitting every other thread then waits for
    it (measured: read stage at 1M documents 25 s static, 14 s dynamic, on 2 cores). Both
    settings are per thread in numba, so two calls in two threads do not disturb each other.
    """

    def __init__(self, workers: Optional[int]):
        self.workers = workers
        self.previous = None
        self.previous_chunk = None

    def __enter__(self):
        start_threads()  # before numba's calls below start them without OpenMP's passive wait policy
        if self.workers:
            self.previous = nb.get_num_threads()
            nb.set_num_threads(max(1, min(int(self.workers), nb.config.NUMBA_NUM_THREADS)))
        self.previous_chunk = nb.get_parallel_chunksize()
        nb.set_parallel_chunksize(PARALLEL_CHUNK)
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            nb.set_num_threads(self.previous)
        nb.set_parallel_chunksize(self.previous_chunk)
        return False


def partition_of(keys, parts: int) -> np.ndarray:
    """The partition in [0, parts) of each integer key (int32): ``mix64(key) % parts``, so that
    keys that are themselves small or regular (document indices) spread evenly."""
    return (mix64(keys) % np.uint64(parts)).astype(np.int32)


@kernel(nogil=True)  # the read stage's end hashes its blocks' ids in threads (stages.read.id_rows)
def _fnv1a_kernel(offsets, data):
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = h
    return out


def string_hash(strings) -> np.ndarray:
    """FNV-1a (64-bit) of the UTF-8 bytes of each string of an Arrow string array (uint64; a
    null hashes as the empty string): a key to partition strings by, not a fingerprint."""
    import pyarrow as pa

    from .arrays import cast_strings

    arr = strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings
    arr = cast_strings(arr, pa.large_string())
    if len(arr) == 0:
        return np.zeros(0, np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], np.int64, count=len(arr) + 1, offset=8 * arr.offset)
    data = arr.buffers()[2]
    return _fnv1a_kernel(offsets, np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8))


def string_hash_python(text: str) -> int:
    """The plain twin of :func:`string_hash` for one string."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return h
