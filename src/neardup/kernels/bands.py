"""Band keys and candidate pairs.

A signature of k values is cut into b bands of r consecutive values; each band is hashed to
one 64-bit key (seeded, band index mixed in). Two documents are a candidate pair iff they
share the key of at least one band (see :mod:`neardup.config.params` for the probability).

Grouping never builds all pairs. For each band the keys are sorted, equal keys form a
*bucket*, and each member of a bucket is paired with the bucket's *anchor*, its first member in
keep order (input order by default; see :mod:`neardup.kernels.components`), i.e. the member that the
cluster stage will keep: a bucket of m documents gives m - 1 pairs, not m(m - 1)/2. Pairs are
deduplicated across buckets and bands before verification.

Re-anchoring. An anchor can be a chance collision: in a bucket {A, B, C} where A is like
neither but B is like C, the star edges A-B and A-C both fail and B-C would never be looked
at. So after verification, the members of a bucket that failed against its anchor form a new
bucket anchored on the first of them, and so on until no failed member is left. The work is
bounded: a bucket of m members stops once its rounds have cost ``ROUND_BUDGET`` * m
verifications (a round costs its members - 1), and ``max_rounds`` (``--max-anchor-rounds``)
bounds the rounds when given. A bucket still holding failed members when it stops is counted
(``truncated_buckets``) so that the loss is visible; boilerplate-heavy corpora (licence headers
in code) make such buckets.

Small buckets. A star finds every pair of a bucket that passes only if the anchor stays: when
the anchor is later removed for a document outside the bucket (the chain guard of
:mod:`neardup.kernels.components`), two members that both passed against it, or one that passed and one
that failed, may both be kept though they are alike. So every pair of a bucket of up to
``ALL_PAIRS`` members is verified, at most ALL_PAIRS / 2 pairs per member;
on 20,000 template-generated pages (bench/residue.py, read as words) the pairs at J >= 0.8 left
with both documents kept fell from 92 (stars, at most 8 rounds) to 82, all but one of which share
no band. Every bucket therefore costs at most max(ALL_PAIRS / 2, ROUND_BUDGET)
verifications per member (before pairs repeated across buckets are merged).
"""

from __future__ import annotations

import queue
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Optional, Tuple

import numba as nb
import numpy as np

from .compile import kernel
from .arrays import read_only, unique
from .pointers import uint64_at
from ..config import Sketch
from .hashing import GOLDEN, MASK64, SPLITMIX_M1, SPLITMIX_M2, fmix64, fmix64_py

__all__ = ["band_keys", "band_keys_python", "bucket_runs", "bucket_runs_of_rows", "star_pairs", "candidate_pairs",
           "find_pairs", "PairSearch", "pair_codes", "split_codes"]

_BAND_PRIME = np.uint64(GOLDEN)
_ROW_PRIME = np.uint64(0xD6E8FEB86659FD93)
_S33 = np.uint64(33)


def _band_seed(seed: int) -> np.uint64:
    return np.uint64(fmix64_py((int(seed) * SPLITMIX_M1 + SPLITMIX_M2) & MASK64))


@kernel(parallel=True)
def _band_keys_kernel(sigs, bands, rows, h0):
    n = sigs.shape[0]
    keys = np.empty((n, bands), dtype=np.uint64)
    for d in nb.prange(n):
        for j in range(bands):
            h = h0 ^ (np.uint64(j + 1) * _BAND_PRIME)
            base = j * rows
            for i in range(rows):
                h = (h ^ np.uint64(sigs[d, base + i])) * _ROW_PRIME
                h ^= h >> _S33
            keys[d, j] = fmix64(h)
    return keys


def band_keys(signatures: np.ndarray, bands: int, rows: int, seed: int = Sketch.seed) -> np.ndarray:
    """The (n, bands) uint64 key of every band of every signature (uses the first bands*rows values)."""
    sigs = np.ascontiguousarray(signatures, dtype=np.uint32)
    if sigs.ndim != 2:
        raise ValueError("signatures must be a 2-d array (documents x num_perm)")
    if bands < 1 or rows < 1 or bands * rows > sigs.shape[1]:
        raise ValueError(f"bands x rows = {bands} x {rows} does not fit signatures of {sigs.shape[1]} values")
    return _band_keys_kernel(read_only(sigs), int(bands), int(rows), _band_seed(seed))  # one version, read-only or not


def band_keys_python(signature, bands: int, rows: int, seed: int = Sketch.seed):
    """Plain Python twin of :func:`band_keys` for one signature."""
    h0 = int(_band_seed(seed))
    out = []
    for j in range(bands):
        h = h0 ^ (((j + 1) * GOLDEN) & MASK64)
        for v in signature[j * rows:(j + 1) * rows]:
            h = ((h ^ int(v)) * 0xD6E8FEB86659FD93) & MASK64
            h ^= h >> 33
        out.append(fmix64_py(h))
    return out


BAND_GROUP = 4  # bands of keys in memory at once when bucket_runs reads them through a function


def bucket_runs(keys, eligible: Optional[np.ndarray] = None,
                doc_ids: Optional[np.ndarray] = None, rank: Optional[np.ndarray] = None,
                *, bands: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The buckets of two or more documents, over all bands, as (run_offsets, members).

    ``members[run_offsets[i]:run_offsets[i+1]]`` are the documents sharing one key in one band,
    in keep order: ascending ``rank`` (default: ascending document index), so that each bucket's
    anchor is the member most likely to be kept. ``eligible`` (bool[n]) drops documents (the
    empty ones); ``doc_ids`` maps rows of ``keys`` to document indices (default: 0..n-1); ``rank``
    is indexed like the rows of ``keys``.

    ``keys`` is the (n, bands) uint64 matrix; or a list of (n_i, bands) uint64 arrays whose rows,
    one after another, are the n rows (each block's key column where it lies, memory-mapped: each
    band's keys read there by the kernel, nothing gathered; at 1M documents, 0.35 CPU-s of
    copies less); or a function ``keys(first, stop)`` giving the (n, stop - first) keys of bands
    first..stop-1, with ``bands`` their number: then only BAND_GROUP bands are in memory at a
    time (a pipeline reads them from a remote work directory; the whole matrix of 10,000,000
    documents and 13 bands is 1 GB, and it was copied twice).
    """
    if isinstance(keys, list):
        return _bucket_runs_in_place(keys, eligible, doc_ids, rank)
    if callable(keys):
        if bands is None:
            raise ValueError("bucket_runs: bands is needed with a keys function")
        get, nbands = keys, int(bands)
    else:
        matrix = np.asarray(keys, dtype=np.uint64)
        get, nbands = (lambda first, stop: matrix[:, first:stop]), matrix.shape[1]
    all_members = []
    all_sizes = []
    perm = ids = scratch = None
    for first in range(0, nbands, BAND_GROUP):
        group = get(first, min(first + BAND_GROUP, nbands))
        if perm is None:
            perm, ids = _keep_perm(group.shape[0], eligible, doc_ids, rank)
            scratch = _Scratch(len(perm), min(BAND_GROUP, nbands))
        group = np.asarray(group, dtype=np.uint64)
        for members, sizes in _in_threads(scratch.lend(lambda j, s, g=group: _group_column(g, j, perm, ids, *s)),
                                          group.shape[1]):
            if len(sizes):
                all_members.append(members)
                all_sizes.append(sizes)
        del group
    return _runs_of(all_members, all_sizes)


def _keep_perm(n: int, eligible, doc_ids, rank) -> Tuple[np.ndarray, np.ndarray]:
    """(perm, ids): the eligible rows in keep order, and their document indices. Keep order
    first, so that a stable sort on the key keeps each bucket's members in keep order."""
    ids = np.arange(n, dtype=np.int64) if doc_ids is None else np.asarray(doc_ids, dtype=np.int64)
    order_key = ids if rank is None else np.asarray(rank, dtype=np.int64)
    rows = np.arange(n, dtype=np.int64) if eligible is None else np.flatnonzero(eligible)
    perm = rows[np.argsort(order_key[rows], kind="stable")]
    return perm, ids[perm]


def _bucket_runs_in_place(parts: list, eligible, doc_ids, rank) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`bucket_runs` of keys given as a list of (n_i, bands) arrays, read where they lie:
    the address of each row (in keep order) handed to the kernel, the arrays held meanwhile."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return _runs_of([], [])
    if any(p.dtype != np.uint64 or p.strides[1] != 8 for p in parts):
        raise ValueError("bucket_runs: each part of the keys must be (n, bands) uint64 with its bands side by side")
    rows = np.concatenate([p.ctypes.data + np.arange(len(p), dtype=np.int64) * p.strides[0] for p in parts])
    perm, ids = _keep_perm(len(rows), eligible, doc_ids, rank)
    at = rows[perm]
    del rows, perm  # 16 bytes a document let go before the bands' scratch is made (10M: 160 MB)
    all_members, all_sizes = [], []
    scratch = _Scratch(len(at), parts[0].shape[1])
    for members, sizes in _in_threads(scratch.lend(lambda j, s: _group_rows(at, j, ids, *s)), parts[0].shape[1]):
        if len(sizes):
            all_members.append(members)
            all_sizes.append(sizes)
    return _runs_of(all_members, all_sizes)


def bucket_runs_of_rows(band: np.ndarray, key: np.ndarray, doc: np.ndarray,
                        rank: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`bucket_runs` over rows (band, key, doc), one per band of a document, as a keyed
    shuffle delivers them (every row of a bucket together); ``rank`` is each row's document's
    keep order. The buckets come band by band, in the order :func:`bucket_runs` gives them."""
    order = np.lexsort((np.asarray(rank, np.int64), np.asarray(band)))
    band, key, doc = np.asarray(band)[order], np.asarray(key, np.uint64)[order], np.asarray(doc, np.int64)[order]
    bounds = np.append(np.flatnonzero(np.concatenate(([True], band[1:] != band[:-1])) if len(band) else []),
                       len(band)).astype(np.int64)
    all_members, all_sizes = [], []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        _band_buckets(key[lo:hi], doc[lo:hi], all_members, all_sizes)
    return _runs_of(all_members, all_sizes)


def _band_buckets(keys: np.ndarray, ids: np.ndarray, all_members: list, all_sizes: list) -> None:
    """The buckets of two or more among one band's ``keys`` (rows in keep order, document
    ``ids``): appends their members (keep order kept) and sizes, buckets in ascending key."""
    if len(keys) == 0:
        return
    members, sizes = _group_keys(np.ascontiguousarray(keys, dtype=np.uint64), np.ascontiguousarray(ids, np.int64),
                                 _radix_bits(len(keys)))
    if len(sizes):
        all_members.append(members)
        all_sizes.append(sizes)


def _in_threads(func, count: int) -> list:
    """[func(0), ..., func(count - 1)], run on up to numba's number of threads (the kernels
    release the GIL): the bands of a group are grouped side by side."""
    threads = min(nb.get_num_threads(), count)
    if threads <= 1:
        return [func(j) for j in range(count)]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(func, range(count)))


# a band of at least this many keys is grouped a partition of its keys' top bits at a time
# (:func:`_group_partitioned`), so that the filter's bitmaps stay in the core's cache
PARTITION_KEYS = 1 << 21
PARTITION_BITS = 15  # about 2^this many keys a partition


class _Scratch:
    """The arrays a thread of :func:`_in_threads` groups a band of ``n`` keys in (its keys, and
    with :data:`PARTITION_KEYS` or more, their partitions' keys and rows), made once for each
    thread and lent to band after band: made for each band, their pages were faulted in and
    zeroed again each time (10M documents: 200 MB a band and thread, ~0.5 M page faults more over
    18 bands). ``lend(func)``: ``j -> func(j, (part_min, part_bits, keys, pk, pr))`` on a free set."""

    def __init__(self, n: int, count: int):
        big = n >= PARTITION_KEYS
        self.free = queue.SimpleQueue()
        for _ in range(max(1, min(nb.get_num_threads(), count))):
            self.free.put((PARTITION_KEYS, PARTITION_BITS, np.empty(n, np.uint64), np.empty(n if big else 0, np.uint64),
                           np.empty(n if big else 0, np.uint32)))

    def lend(self, func):
        def run(j):
            held = self.free.get()
            try:
                return func(j, held)
            finally:
                self.free.put(held)
        return run


@kernel(nogil=True)
def _group_column(group, j, perm, ids, part_min, part_bits, keys, pk, pr):
    """:func:`_group_keys` of column ``j`` of ``group`` taken at rows ``perm`` (see :func:`_group_gathered`).
    Two versions, on purpose: ``group`` a fresh (C-contiguous) array of a few bands, or a slice
    of bands of a whole key matrix in memory (any layout), read where it lies, not copied."""
    n = perm.shape[0]
    for i in range(n):
        keys[i] = group[perm[i], j]
    return _group_gathered(keys, ids, part_min, part_bits, pk, pr)


@kernel(nogil=True)
def _group_rows(rows, j, ids, part_min, part_bits, keys, pk, pr):
    """:func:`_group_keys` of band ``j`` of the rows of keys at the addresses ``rows`` (in keep
    order; see :func:`_group_gathered`), gathered into ``keys`` (n of them; ``pk``, ``pr``: see
    :class:`_Scratch`)."""
    n = rows.shape[0]
    offset = np.int64(8) * j
    for i in range(n):
        keys[i] = uint64_at(rows[i] + offset)
    return _group_gathered(keys, ids, part_min, part_bits, pk, pr)


@kernel(inline="always")
def _scatter_by_top_bits(keys, bits, out_keys, out_rows):
    """``keys`` and their rows moved, in row order, into ``out_keys``/``out_rows`` grouped by
    their top ``bits`` bits (a counting pass, then a scatter: stable); returns the groups'
    starts (``2^bits + 1`` of them)."""
    n = keys.shape[0]
    shift = np.uint64(64 - bits)
    nbins = np.int64(1) << bits
    start = np.zeros(nbins + 1, dtype=np.int64)
    for i in range(n):
        start[(keys[i] >> shift) + np.uint64(1)] += 1
    for b in range(nbins):
        start[b + 1] += start[b]
    fill = start[:-1].copy()
    for i in range(n):
        b = keys[i] >> shift
        at = fill[b]
        out_keys[at] = keys[i]
        out_rows[at] = i
        fill[b] = at + 1
    return start


@kernel(inline="always")
def _mark_seen_twice(keys, lo, hi, mask, seen, twice) -> None:
    """Sets the bits of ``keys[lo:hi]`` (their bits under ``mask``) in the bitmap ``seen``, and
    in ``twice`` those met again."""
    for i in range(lo, hi):
        h = keys[i] & mask
        w = h >> np.uint64(6)
        bit = np.uint64(1) << (h & np.uint64(63))
        if seen[w] & bit:
            twice[w] |= bit
        else:
            seen[w] |= bit


@kernel(inline="always")
def _keep_seen_twice(keys, rows, lo, hi, mask, twice, out_keys, out_rows, m):
    """The keys of ``keys[lo:hi]`` whose bits under ``mask`` are set in ``twice``, with their
    ``rows``, moved in order to ``out_keys``/``out_rows`` from ``m`` on (in place where the
    outputs are the inputs: ``m`` <= ``lo``); returns the position after them."""
    for i in range(lo, hi):
        k = keys[i]
        h = k & mask
        if twice[h >> np.uint64(6)] & (np.uint64(1) << (h & np.uint64(63))):
            out_keys[m] = k
            out_rows[m] = rows[i]
            m += 1
    return m


@kernel(inline="always")
def _group_gathered(keys, ids, part_min, part_bits, pk, pr):
    """:func:`_group_keys` of one band's ``keys`` (rows in keep order, document ``ids``; ``keys``
    overwritten). Most keys are met once: two bitmaps on the key's low bits (seen, seen twice)
    pass on only the rows whose key may repeat (every row of a repeated key, and a few others),
    in row order, to the sort. ``part_min`` keys or more (``keys`` the first n of a longer
    array): :func:`_group_partitioned`, into ``pk`` and ``pr``, of ~2^``part_bits`` keys a partition."""
    n = ids.shape[0]
    keys = keys[:n]
    if n >= part_min and n < (np.int64(1) << 32):
        return _group_partitioned(keys, ids, pk[:n], pr[:n], part_bits)
    fbits = 10
    while fbits < 27 and (np.int64(1) << fbits) < 16 * n:
        fbits += 1
    mask = np.uint64((np.int64(1) << fbits) - 1)
    seen = np.zeros((np.int64(1) << fbits) >> 6, dtype=np.uint64)
    twice = np.zeros((np.int64(1) << fbits) >> 6, dtype=np.uint64)
    _mark_seen_twice(keys, 0, n, mask, seen, twice)
    sub_ids = np.empty(n, dtype=np.int64)
    m = _keep_seen_twice(keys, ids, 0, n, mask, twice, keys, sub_ids, 0)
    bits = 1
    while bits < 20 and (np.int64(4) << bits) < m:
        bits += 1
    return _group_keys(keys[:m], sub_ids[:m], bits)


@kernel(inline="always")
def _group_partitioned(keys, ids, pk, pr, part_bits):
    """:func:`_group_gathered` of a band of many keys: the bitmaps of one pass over all of them
    would outgrow the core's cache (10M keys: 2 x 16 MB, a miss a key), so the rows are first
    moved, in row order, into partitions of their key's top bits (a counting pass and a
    scatter), and each partition of ~2^``part_bits`` keys is filtered with bitmaps of its
    own and its rows that may repeat sorted on the key (a counting pass on the bits below the
    partition's, then insertion or merge sort of each bin, stable). The partitions in order are
    the band's keys in ascending order: the same runs, in the same order, as :func:`_group_keys`."""
    n = keys.shape[0]
    pbits = 1
    while pbits < 16 and (n >> pbits) > (np.int64(1) << part_bits):
        pbits += 1
    nparts = np.int64(1) << pbits
    start = _scatter_by_top_bits(keys, pbits, pk, pr)  # pr: rows below 2^32 (document indices are)
    most = 2
    for p in range(nparts):
        most = max(most, start[p + 1] - start[p])
    fmax = 6
    while fmax < 27 and (np.int64(1) << fmax) < 16 * most:
        fmax += 1
    seen = np.empty((np.int64(1) << fmax) >> 6, dtype=np.uint64)
    twice = np.empty((np.int64(1) << fmax) >> 6, dtype=np.uint64)
    tk = np.empty(most, dtype=np.uint64)
    tr = np.empty(most, dtype=np.uint32)
    bins = np.empty((np.int64(1) << 16) + 1, dtype=np.int64)
    m = 0  # the rows that may repeat so far, sorted, at pk[:m], pr[:m] (m <= the partition's start)
    for p in range(nparts):
        lo = start[p]
        hi = start[p + 1]
        if hi - lo < 2:
            continue
        fbits = 6
        while fbits < fmax and (np.int64(1) << fbits) < 16 * (hi - lo):
            fbits += 1
        words = (np.int64(1) << fbits) >> 6
        seen[:words] = 0
        twice[:words] = 0
        mask = np.uint64((np.int64(1) << fbits) - 1)
        _mark_seen_twice(pk, lo, hi, mask, seen, twice)
        first = m
        m = _keep_seen_twice(pk, pr, lo, hi, mask, twice, pk, pr, m)
        count = m - first
        if count < 2:
            continue
        # stable sort of pk[first:m] (one top-bits value) on the bits below: a counting pass, then each bin
        bbits = 1
        while bbits < 16 and (np.int64(4) << bbits) < count:
            bbits += 1
        bshift = np.uint64(64 - pbits - bbits)
        bmask = np.uint64((np.int64(1) << bbits) - 1)
        nb_ = np.int64(1) << bbits
        bins[:nb_ + 1] = 0
        for i in range(first, m):
            bins[((pk[i] >> bshift) & bmask) + np.uint64(1)] += 1
        for b in range(nb_):
            bins[b + 1] += bins[b]
        for i in range(first, m):
            b = (pk[i] >> bshift) & bmask
            at = bins[b]
            tk[at] = pk[i]
            tr[at] = pr[i]
            bins[b] = at + 1
        lo_b = np.int64(0)
        for b in range(nb_):  # bins[b] is now the end of bin b
            _sort_bin(tk, tr, lo_b, bins[b])
            lo_b = bins[b]
        pk[first:m] = tk[:count]
        pr[first:m] = tr[:count]
    return _runs_of_sorted(pk[:m], pr[:m], ids)


def _radix_bits(n: int) -> int:
    """Bins of the counting pass of :func:`_group_keys`: about 4 keys a bin, at most 2^20 bins."""
    return int(min(20, max(1, int(n).bit_length() - 2)))


INSERTION_MAX = 48  # a bin of more keys (a big bucket, or many) is sorted with a merge sort


@kernel(inline="always")
def _sort_bin(k, r, lo, hi):
    """Sorts ``k[lo:hi]`` stably, its ``r`` moved alike: an insertion sort, or a merge sort
    past :data:`INSERTION_MAX` keys."""
    if hi - lo > INSERTION_MAX:
        order = np.argsort(k[lo:hi], kind="mergesort")
        k[lo:hi] = k[lo:hi][order]
        r[lo:hi] = r[lo:hi][order]
    elif hi - lo > 1:
        for i in range(lo + 1, hi):
            x = k[i]
            y = r[i]
            j = i - 1
            while j >= lo and k[j] > x:
                k[j + 1] = k[j]
                r[j + 1] = r[j]
                j -= 1
            k[j + 1] = x
            r[j + 1] = y


@kernel(inline="always")
def _runs_of_sorted(k, r, ids):
    """(members, sizes) of the runs of two or more equal sorted keys ``k`` (rows ``r``): see
    :func:`_walk_runs`."""
    runs, total = _walk_runs(k, r, ids, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), False)
    members = np.empty(total, dtype=np.int64)
    sizes = np.empty(runs, dtype=np.int64)
    _walk_runs(k, r, ids, members, sizes, True)
    return members, sizes


@kernel(nogil=True)
def _group_keys(keys, ids, bits):
    """The runs of two or more equal ``keys`` (rows in keep order) as (members, sizes): the
    ``ids`` of each run's rows in row order, runs in ascending key. A stable sort: one counting
    pass on the top ``bits`` bits of the key, then each bin sorted (an insertion sort, or a
    merge sort when large), so the same order as a stable argsort of the whole band."""
    n = keys.shape[0]
    nbins = 1 << bits
    sk = np.empty(n, dtype=np.uint64)
    sr = np.empty(n, dtype=np.int64)
    start = _scatter_by_top_bits(keys, bits, sk, sr)
    for b in range(nbins):
        _sort_bin(sk, sr, start[b], start[b + 1])
    return _runs_of_sorted(sk, sr, ids)


@kernel(inline="always")
def _walk_runs(sk, sr, ids, members, sizes, fill):
    """The runs of two or more equal keys of sorted ``sk``: their number and members (counted
    first, then, with ``fill``, written: the ``ids`` of rows ``sr`` of each run into ``members``
    and its size into ``sizes``)."""
    n = sk.shape[0]
    runs = 0
    total = 0
    i = 0
    while i < n:
        j = i + 1
        while j < n and sk[j] == sk[i]:
            j += 1
        if j - i >= 2:
            if fill:
                sizes[runs] = j - i
                for t in range(i, j):
                    members[total + t - i] = ids[sr[t]]
            runs += 1
            total += j - i
        i = j
    return runs, total


def _runs_of(all_members: list, all_sizes: list) -> Tuple[np.ndarray, np.ndarray]:
    """The runs of each band's (members, sizes), one band after another, as (run_offsets,
    members): each band's part of both written by a thread of :func:`_in_threads` (its offsets
    are the running sum of its sizes after the members of the bands before it), not two
    concatenations and a running sum in this thread (~0.03-0.07 CPU-s at 1M documents, while
    the other cores wait)."""
    if not all_members:
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    member_at = np.cumsum([0] + [len(m) for m in all_members])
    run_at = np.cumsum([0] + [len(s) for s in all_sizes])
    offsets = np.empty(run_at[-1] + 1, dtype=np.int64)
    offsets[0] = 0
    members = np.empty(member_at[-1], dtype=np.int64)

    def put(i):
        runs = offsets[run_at[i] + 1:run_at[i + 1] + 1]
        np.cumsum(all_sizes[i], out=runs)
        runs += member_at[i]
        members[member_at[i]:member_at[i + 1]] = all_members[i]

    _in_threads(put, len(all_members))
    return offsets, members


def pair_codes(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """One uint64 per unordered pair: min << 32 | max (document indices below 2^32)."""
    lo = np.minimum(left, right).astype(np.uint64)
    hi = np.maximum(left, right).astype(np.uint64)
    return (lo << np.uint64(32)) | hi


def split_codes(codes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    codes = np.asarray(codes, dtype=np.uint64)
    return (codes >> np.uint64(32)).astype(np.int64), (codes & np.uint64(0xFFFFFFFF)).astype(np.int64)


def star_pairs(run_offsets: np.ndarray, members: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(anchor, member) for every non-anchor member of every bucket (the anchor is the first)."""
    sizes = np.diff(run_offsets)
    anchors = members[run_offsets[:-1]]
    left = np.repeat(anchors, sizes)
    is_anchor = np.zeros(len(members), dtype=bool)
    is_anchor[run_offsets[:-1][sizes > 0]] = True
    return left[~is_anchor], members[~is_anchor]


def candidate_pairs(keys: np.ndarray, eligible: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Unique candidate pairs (left < right) of the first round: star pairs of every bucket."""
    offsets, members = bucket_runs(keys, eligible)
    left, right = star_pairs(offsets, members)
    return split_codes(unique(pair_codes(left, right)))


@kernel()
def _next_runs(run_offsets, members, failed_member, budget):
    """Buckets of the members that failed against their anchor (2 or more of them), with what is
    left of their budget after this round (a round costs a bucket its size - 1 verifications);
    also how many buckets stopped because their next round would exceed it."""
    nruns = run_offsets.shape[0] - 1
    out_members = np.empty(members.shape[0], dtype=np.int64)
    out_offsets = np.empty(nruns + 1, dtype=np.int64)
    out_budget = np.empty(nruns, dtype=np.int64)
    out_offsets[0] = 0
    r_out = 0
    pos = 0
    stopped = 0
    for r in range(nruns):
        start = pos
        left = budget[r] - (run_offsets[r + 1] - run_offsets[r] - 1)
        for i in range(run_offsets[r] + 1, run_offsets[r + 1]):
            if failed_member[i]:
                out_members[pos] = members[i]
                pos += 1
        if pos - start >= 2 and pos - start - 1 <= left:
            out_budget[r_out] = left
            r_out += 1
            out_offsets[r_out] = pos
        else:
            if pos - start >= 2:
                stopped += 1
            pos = start
    return out_offsets[:r_out + 1].copy(), out_members[:pos].copy(), out_budget[:r_out].copy(), stopped


@kernel()
def _large_runs(run_offsets, members, all_pairs, round_budget):
    """The buckets of more than ``all_pairs`` members, in order, as (offsets, members, budget):
    ``round_budget`` verifications per member for each."""
    count = 0
    total = 0
    for r in range(run_offsets.shape[0] - 1):
        m = run_offsets[r + 1] - run_offsets[r]
        if m > all_pairs:
            count += 1
            total += m
    offsets = np.empty(count + 1, dtype=np.int64)
    mem = np.empty(total, dtype=np.int64)
    budget = np.empty(count, dtype=np.int64)
    offsets[0] = 0
    c = 0
    for r in range(run_offsets.shape[0] - 1):
        m = run_offsets[r + 1] - run_offsets[r]
        if m > all_pairs:
            mem[offsets[c]:offsets[c] + m] = members[run_offsets[r]:run_offsets[r + 1]]
            budget[c] = m * round_budget
            offsets[c + 1] = offsets[c] + m
            c += 1
    return offsets, mem, budget


@kernel()
def _round_codes(offsets, mem, run_offsets, members, small):
    """The pair codes (:func:`pair_codes`) of a round: first the star pairs of the buckets
    ``mem[offsets[i]:offsets[i+1]]`` (as :func:`star_pairs` gives them), then every pair of
    members of the buckets of ``run_offsets``, ``members`` marked ``small``, in bucket order;
    one pass, no temporaries (numpy's took ~0.15 s on one core at 1M documents)."""
    stars = 0
    for r in range(offsets.shape[0] - 1):
        if offsets[r + 1] > offsets[r]:
            stars += offsets[r + 1] - offsets[r] - 1
    total = stars
    for r in range(run_offsets.shape[0] - 1):
        if small[r]:
            m = run_offsets[r + 1] - run_offsets[r]
            total += m * (m - 1) // 2
    codes = np.empty(total, dtype=np.uint64)
    k = 0
    for r in range(offsets.shape[0] - 1):
        for i in range(offsets[r] + 1, offsets[r + 1]):
            codes[k] = _code(mem[offsets[r]], mem[i])
            k += 1
    for r in range(run_offsets.shape[0] - 1):
        if small[r]:
            for i in range(run_offsets[r], run_offsets[r + 1]):
                for j in range(i + 1, run_offsets[r + 1]):
                    codes[k] = _code(members[i], members[j])
                    k += 1
    return codes, stars


@kernel(inline="always")
def _code(a, b):
    """:func:`pair_codes` of one pair."""
    if a > b:
        a, b = b, a
    return (np.uint64(a) << np.uint64(32)) | np.uint64(b)


# Defaults of the search (see the module docstring): every pair of a bucket of up to ALL_PAIRS
# members is verified; a larger bucket is re-anchored until no failed member is left, or until
# it has cost ROUND_BUDGET verifications per member.
ALL_PAIRS = 8
ROUND_BUDGET = 16


@dataclass
class PairSearch:
    """The verified pairs of a search and what it cost."""

    left: np.ndarray            # int64, left < right
    right: np.ndarray
    similarity: np.ndarray      # float64, the verifier's value for each verified pair
    candidate_pairs: int        # distinct pairs sent to the verifier
    rounds: int                 # anchor rounds run
    truncated_buckets: int      # buckets still holding failed members when the search stopped
    buckets: int                # buckets of two or more documents over all bands
    stats: dict = field(default_factory=dict)


def find_pairs(run_offsets: np.ndarray, members: np.ndarray,
               verify: Callable[[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]],
               max_rounds: Optional[int] = None, all_pairs: int = ALL_PAIRS,
               round_budget: int = ROUND_BUDGET) -> PairSearch:
    """Verified pairs from buckets (see the module docstring): every pair of the buckets of up to
    ``all_pairs`` members, and star pairs re-anchored on the failed members in the larger ones,
    until none is left, a bucket has cost ``round_budget`` verifications per member, or
    ``max_rounds`` rounds have run (None: no limit).

    ``verify(left, right) -> (passed bool[m], similarity float64[m])`` is called once per round on
    the distinct pairs not verified before.
    """
    seen_codes = np.zeros(0, dtype=np.uint64)
    seen_pass = np.zeros(0, dtype=bool)
    seen_sim = np.zeros(0, dtype=np.float64)
    run_offsets = np.asarray(run_offsets, dtype=np.int64)
    members = np.asarray(members, dtype=np.int64)
    buckets = len(run_offsets) - 1
    sizes = np.diff(run_offsets)
    small = sizes <= all_pairs
    offsets, mem, budget = _large_runs(run_offsets, members, np.int64(all_pairs), np.int64(round_budget))
    rounds = 0
    candidates = 0
    stopped = 0
    pending = bool((sizes[small] >= 2).any())  # pairs of small buckets, for the first round
    while (len(offsets) > 1 or pending) and (max_rounds is None or rounds < max_rounds):
        rounds += 1
        both, stars = _round_codes(offsets, mem, run_offsets, members, small)  # the small buckets' pairs in round 1 only
        codes = both[:stars]
        new = unique(both)
        run_offsets, members, small, pending = run_offsets[:1], members[:0], small[:0], False
        if len(seen_codes):
            new = new[~_isin_sorted(new, seen_codes)]
        if len(new):
            nl, nr = split_codes(new)
            passed, sim = verify(nl, nr)
            candidates += len(new)
            merged = np.concatenate([seen_codes, new])
            order = np.argsort(merged, kind="stable")
            seen_codes = merged[order]
            seen_pass = np.concatenate([seen_pass, np.asarray(passed, dtype=bool)])[order]
            seen_sim = np.concatenate([seen_sim, np.asarray(sim, dtype=np.float64)])[order]
        if len(offsets) <= 1:
            break
        ok = seen_pass[np.searchsorted(seen_codes, codes)]
        failed_member = np.zeros(len(mem), dtype=bool)
        is_anchor = np.zeros(len(mem), dtype=bool)
        is_anchor[offsets[:-1][np.diff(offsets) > 0]] = True
        failed_member[np.flatnonzero(~is_anchor)] = ~ok
        offsets, mem, budget, out_of_budget = _next_runs(offsets, mem, failed_member, budget)
        stopped += int(out_of_budget)
    truncated = len(offsets) - 1 + stopped
    keep = seen_pass
    left, right = split_codes(seen_codes[keep])
    return PairSearch(left=left, right=right, similarity=seen_sim[keep], candidate_pairs=int(candidates),
                      rounds=rounds, truncated_buckets=int(truncated), buckets=int(buckets))


def _isin_sorted(values: np.ndarray, sorted_ref: np.ndarray) -> np.ndarray:
    if len(sorted_ref) == 0:
        return np.zeros(len(values), dtype=bool)
    pos = np.searchsorted(sorted_ref, values)
    pos = np.minimum(pos, len(sorted_ref) - 1)
    return sorted_ref[pos] == values
