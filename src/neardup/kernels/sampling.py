"""The audit's kernels (:mod:`neardup.report.audit`): an auxiliary min-hash sketch independent
of the dedup's permutations, the pairs of documents that share a value, and a fingerprint of
each document's shingle set."""

from __future__ import annotations

import numba as nb
import numpy as np

from .compile import kernel
from .hashing import GOLDEN, SPLITMIX_M1, SPLITMIX_M2, fmix64

_GOLDEN = np.uint64(GOLDEN)
_SM1 = np.uint64(SPLITMIX_M1)
_SM2 = np.uint64(SPLITMIX_M2)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


@kernel(parallel=True)
def _aux_sketch_kernel(offsets, hashes, salts):
    """min over a document's shingle hashes x of mix(x ^ salt_i), for each salt: (n, k) uint64."""
    n = offsets.shape[0] - 1
    k = salts.shape[0]
    out = np.empty((n, k), dtype=np.uint64)
    for d in nb.prange(n):
        for i in range(k):
            out[d, i] = _ALL_ONES
        for j in range(offsets[d], offsets[d + 1]):
            x = hashes[j]
            for i in range(k):
                v = fmix64(x ^ salts[i])
                if v < out[d, i]:
                    out[d, i] = v
    return out


@kernel(inline="always")
def _splitmix(state):
    state = state + _GOLDEN
    z = state
    z = (z ^ (z >> _S30)) * _SM1
    z = (z ^ (z >> _S27)) * _SM2
    return state, z ^ (z >> _S31)


@kernel(inline="always")
def _run_end(order, values, i):
    """The end of the run of equal ``values`` (in the order ``order``) that starts at ``i``."""
    j = i + 1
    while j < order.shape[0] and values[order[j]] == values[order[i]]:
        j += 1
    return j


@kernel()
def run_pairs(order, values, cap, seed):
    """Pairs of documents with equal ``values`` (``order`` sorts them): every pair of a run of
    equal values, or ``cap`` random pairs of a run that has more than ``cap`` pairs."""
    n = order.shape[0]
    total = 0
    i = 0
    while i < n:
        j = _run_end(order, values, i)
        c = j - i
        if c >= 2:
            m = c * (c - 1) // 2
            total += m if m <= cap else cap
        i = j
    left = np.empty(total, dtype=np.int64)
    right = np.empty(total, dtype=np.int64)
    state = np.uint64(seed)
    p = 0
    i = 0
    while i < n:
        j = _run_end(order, values, i)
        c = j - i
        if c >= 2:
            m = c * (c - 1) // 2
            if m <= cap:
                for a in range(i, j):
                    for b in range(a + 1, j):
                        left[p] = order[a]
                        right[p] = order[b]
                        p += 1
            else:
                for _ in range(cap):
                    state, z = _splitmix(state)
                    a = np.int64(z % np.uint64(c))
                    state, z = _splitmix(state)
                    b = np.int64(z % np.uint64(c - 1))
                    if b >= a:
                        b += 1
                    left[p] = order[i + a]
                    right[p] = order[i + b]
                    p += 1
        i = j
    return left, right


@kernel()
def set_fingerprints(offsets, hashes):
    """A 64-bit fingerprint of each document's (sorted, unique) shingle-hash set."""
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for d in range(n):
        h = fmix64(np.uint64(offsets[d + 1] - offsets[d]) + _GOLDEN)
        for j in range(offsets[d], offsets[d + 1]):
            h = fmix64(h ^ hashes[j]) * _SM1
        out[d] = h
    return out


def aux_sketch(offsets: np.ndarray, hashes: np.ndarray, k: int, seed: int) -> np.ndarray:
    """An (n, k) uint64 min-hash sketch of the shingle-hash CSR from k hash functions that share
    nothing with the dedup's permutations (a 64-bit finaliser of hash XOR a random salt)."""
    rng = np.random.default_rng([int(seed), 0x5EED_A0D1])
    salts = rng.integers(0, np.iinfo(np.uint64).max, size=k, dtype=np.uint64, endpoint=True)
    return _aux_sketch_kernel(np.ascontiguousarray(offsets, dtype=np.int64),
                              np.ascontiguousarray(hashes, dtype=np.uint64), salts)


