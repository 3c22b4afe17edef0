"""Verification of candidate pairs: estimated or exact Jaccard similarity.

* Estimated: the share of equal values over all k signature positions. Unbiased for J with
  standard error sqrt(J (1 - J) / k) (0.035 at J = 0.8, k = 128).
* Exact: |A intersect B| / |A union B| of the two sets of 64-bit shingle hashes (sorted, unique),
  merged in one pass. Hash collisions aside (probability about m^2 / 2^64 for m shingles), this
  is the Jaccard similarity of the shingle sets. Two empty documents have similarity 0: an empty
  document is never a near-duplicate.
"""

from __future__ import annotations

from typing import Optional

import numba as nb
import numpy as np

from .compile import kernel
from .eliasfano import code_length, decode_distinct, decode_one
from .lanes import prefetch
from .pointers import bytes_at
from .hashing import GOLDEN

_GOLDEN = np.uint64(GOLDEN)

__all__ = ["estimated_jaccard", "exact_jaccard", "exact_jaccard_raw", "exact_jaccard_coded", "estimated_jaccard_python",
           "exact_jaccard_python"]


@kernel(parallel=True)
def _estimated_kernel(sigs, left, right):
    m = left.shape[0]
    k = sigs.shape[1]
    out = np.empty(m, dtype=np.float64)
    for p in nb.prange(m):
        a = left[p]
        b = right[p]
        eq = 0
        for i in range(k):
            eq += sigs[a, i] == sigs[b, i]
        out[p] = eq / k
    return out


def estimated_jaccard(signatures: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Share of equal signature values for each pair (left[i], right[i]); float64[m]."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if len(left) == 0:
        return np.zeros(0, dtype=np.float64)
    return _estimated_kernel(np.asarray(signatures), left, right)


@kernel()
def _merge_count(a, a0, a1, b, b0, b1):
    """The values common to the ascending, distinct a[a0:a1] and b[b0:b1], in one merge pass,
    without branches on the values (which of the two moves on is as good as random: the branches
    were mispredicted about half the time)."""
    i = a0
    j = b0
    common = 0
    while i < a1 and j < b1:
        x = a[i]
        y = b[j]
        common += np.int64(x == y)
        i += np.int64(x <= y)
        j += np.int64(y <= x)
    return common


@kernel(parallel=True)
def _exact_kernel(offsets, hashes, left, right):
    m = left.shape[0]
    out = np.empty(m, dtype=np.float64)
    for p in nb.prange(m):
        a = left[p]
        b = right[p]
        a0 = offsets[a]
        a1 = offsets[a + 1]
        b0 = offsets[b]
        b1 = offsets[b + 1]
        na = a1 - a0
        nb_ = b1 - b0
        if na == 0 or nb_ == 0:
            out[p] = 0.0
            continue
        common = _merge_count(hashes, a0, a1, hashes, b0, b1)
        out[p] = common / (na + nb_ - common)
    return out


def exact_jaccard(offsets: np.ndarray, hashes: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Jaccard of the shingle-hash sets of each pair; sets given as CSR (sorted unique per document)."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if len(left) == 0:
        return np.zeros(0, dtype=np.float64)
    return _exact_kernel(np.asarray(offsets, dtype=np.int64), np.asarray(hashes), left, right)


@kernel(inline="always")
def _slot(x, mask):
    h = x * _GOLDEN
    return np.int64((h >> np.uint64(32)) & mask)


@kernel()
def _jaccard_raw_pair(hashes, a0, a1, b0, b1):
    """Jaccard of two multisets of hashes taken as sets, with two small open-addressing tables
    (no sorting): the set of A, then B's distinct values probed against it."""
    na = a1 - a0
    nb_ = b1 - b0
    if na == 0 or nb_ == 0:
        return 0.0
    cap = 1
    while cap < 2 * max(na, nb_):
        cap <<= 1
    mask = np.uint64(cap - 1)
    keys = np.empty(cap, dtype=np.uint64)
    state = np.zeros(cap, dtype=np.uint8)  # 0 empty, 1 in A, 2 in A and seen in B
    ua = 0
    for i in range(a0, a1):
        x = hashes[i]
        j = _slot(x, mask)
        while state[j] != 0 and keys[j] != x:
            j = (j + 1) & (cap - 1)
        if state[j] == 0:
            state[j] = 1
            keys[j] = x
            ua += 1
    keys_b = np.empty(cap, dtype=np.uint64)
    used_b = np.zeros(cap, dtype=np.uint8)
    ub = 0
    common = 0
    for i in range(b0, b1):
        x = hashes[i]
        j = _slot(x, mask)
        while used_b[j] != 0 and keys_b[j] != x:
            j = (j + 1) & (cap - 1)
        if used_b[j] != 0:
            continue  # a repeat within B
        used_b[j] = 1
        keys_b[j] = x
        ub += 1
        k = _slot(x, mask)
        while state[k] != 0 and keys[k] != x:
            k = (k + 1) & (cap - 1)
        if state[k] == 1:
            common += 1
            state[k] = 2
    return common / (ua + ub - common)


@kernel(parallel=True)
def _exact_raw_kernel(offsets, hashes, left, right):
    m = left.shape[0]
    out = np.empty(m, dtype=np.float64)
    for p in nb.prange(m):
        a = left[p]
        b = right[p]
        out[p] = _jaccard_raw_pair(hashes, offsets[a], offsets[a + 1], offsets[b], offsets[b + 1])
    return out


def exact_jaccard_raw(offsets: np.ndarray, hashes: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Like :func:`exact_jaccard`, for shingle hashes in any order and with repeats (each
    document's hashes taken as a set): hash tables per pair instead of sorted sets, which is
    cheaper when most documents take part in one or two pairs. ``hashes`` are uint64 shingle
    hashes or uint32 fingerprints (see ``MinHasher.signatures_and_fingerprints``)."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if len(left) == 0:
        return np.zeros(0, dtype=np.float64)
    hashes = np.asarray(hashes)
    if hashes.dtype != np.uint32:
        hashes = np.asarray(hashes, dtype=np.uint64)
    return _exact_raw_kernel(np.asarray(offsets, dtype=np.int64), hashes, left, right)


SORT_MOVES = 8  # an insertion sort of a document's fingerprints gives up past this many moves a value


@kernel()
def _sorted_unique(v):
    """Sorts ``v`` in place (nearly sorted already: the Elias-Fano bucket order of an older work
    dir's code, where only the values of one bucket can be out of order) and moves its distinct
    values to the front; their number. One pass: each value goes in order among the distinct ones
    before it (a repeat is dropped there), or, past SORT_MOVES moves a value, an O(n log n) sort
    of the whole."""
    n = v.shape[0]
    moves = 0
    u = 0
    for i in range(n):
        x = v[i]
        if u == 0 or v[u - 1] < x:  # the usual case: after every value before
            v[u] = x
            u += 1
            continue
        j = u - 1
        while j > 0 and v[j - 1] >= x:
            j -= 1
        if v[j] == x:
            continue  # a repeat
        for t in range(u, j, -1):
            v[t] = v[t - 1]
        v[j] = x
        u += 1
        moves += u - 1 - j
        if moves > SORT_MOVES * n:  # many repeats or values within buckets
            v.sort()
            u = 0
            for t in range(n):
                if u == 0 or v[t] != v[u - 1]:
                    v[u] = v[t]
                    u += 1
            return u
    return u


@kernel(inline="always")
def _decoded_set(data, start, n, v):
    """The distinct values of the code at byte ``start`` of ``data`` (``n`` with repeats) to the
    front of ``v``, ascending; their number. A code of an older work dir (text order within a
    bucket) is decoded again and sorted."""
    u = decode_distinct(data, start, n, v)
    if u < 0:
        decode_one(data, start, n, v, 0)
        u = _sorted_unique(v[:n])
    return u


_AHEAD = 4  # pairs: the codes of pair p + _AHEAD fetched into the cache while pair p is verified


@kernel(inline="always")
def _fetch_code(addresses, block, starts, counts, d):
    """Prefetches the cache lines of document d's code: the codes lie where the pairs put them,
    far apart (a miss a line, decoding waited on them: 0.92-0.99 against 0.80-0.85 CPU-s a thread
    for 1M documents' 267k pairs with a prefetch 4 pairs ahead)."""
    at = addresses[block[d]] + starts[d]
    for line in range(at & ~63, at + code_length(counts[d]), 64):
        prefetch(line)


# pairs a task of the coded kernel verifies, its two buffers of values made once for them (for its
# largest documents), not two a pair: ~3 % of the kernel's CPU at 1M documents
_PAIR_CHUNK = 256


@kernel(parallel=True)
def _exact_coded_kernel(addresses, sizes, block, starts, counts, left, right):
    m = left.shape[0]
    out = np.empty(m, dtype=np.float64)
    for c in nb.prange((m + _PAIR_CHUNK - 1) // _PAIR_CHUNK):
        lo = c * _PAIR_CHUNK
        hi = min(m, lo + _PAIR_CHUNK)
        most = 1
        for p in range(lo, hi):
            most = max(most, counts[left[p]], counts[right[p]])
        va = np.empty(most, dtype=np.uint32)
        vb = np.empty(most, dtype=np.uint32)
        for p in range(lo, hi):
            if p + _AHEAD < hi:
                _fetch_code(addresses, block, starts, counts, left[p + _AHEAD])
                _fetch_code(addresses, block, starts, counts, right[p + _AHEAD])
            a = left[p]
            b = right[p]
            na = counts[a]
            nb_ = counts[b]
            if na == 0 or nb_ == 0:
                out[p] = 0.0
                continue
            ua = _decoded_set(bytes_at(addresses[block[a]], sizes[block[a]]), starts[a], na, va)
            ub = _decoded_set(bytes_at(addresses[block[b]], sizes[block[b]]), starts[b], nb_, vb)
            # int64 bounds, as _exact_kernel's (a 0 would compile a version for Literal[int](0))
            common = _merge_count(va, np.int64(0), ua, vb, np.int64(0), ub)
            out[p] = common / (ua + ub - common)
    return out


def exact_jaccard_coded(starts: np.ndarray, data, counts: np.ndarray, left: np.ndarray, right: np.ndarray,
                        block: Optional[np.ndarray] = None) -> np.ndarray:
    """Like :func:`exact_jaccard_raw`, for documents given as Elias-Fano codes of their
    fingerprints (:mod:`neardup.kernels.eliasfano`: document i's code at ``data[starts[i]:]``,
    ``counts[i]`` fingerprints): each pair's two documents are decoded when it is verified, so
    that only the codes are held (a document is in one or two pairs, mostly).

    ``data`` is one uint8 array, or with ``block`` a list of them, document i's code at
    ``data[block[i]][starts[i]:]``: the blocks' files memory-mapped where they lie, the codes
    read in place (:meth:`neardup.stages.corpus.DocStore.code_map`), not copied together."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if len(left) == 0:
        return np.zeros(0, dtype=np.float64)
    if block is None:
        data, block = [data], np.zeros(len(counts), dtype=np.int64)
    arrays = [np.ascontiguousarray(a, dtype=np.uint8) for a in data]  # held until the kernel returns
    addresses = np.array([a.ctypes.data for a in arrays], dtype=np.int64)
    sizes = np.array([len(a) for a in arrays], dtype=np.int64)
    return _exact_coded_kernel(addresses, sizes, np.ascontiguousarray(block, dtype=np.int64),
                               np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(counts, dtype=np.int64),
                               left, right)


def estimated_jaccard_python(sig_a, sig_b) -> float:
    """Plain twin of :func:`estimated_jaccard` for one pair."""
    sig_a = np.asarray(sig_a)
    sig_b = np.asarray(sig_b)
    return float(np.mean(sig_a == sig_b))


def exact_jaccard_python(set_a, set_b) -> float:
    """Plain twin of :func:`exact_jaccard` for one pair of sets."""
    a, b = set(set_a), set(set_b)
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
