"""The persistent index's kernels (:mod:`neardup.index`): each document's set of shingle
fingerprints, the ranges of sorted band keys equal to each of many query keys, and Bloom filters
of band keys (set, test, count)."""

from __future__ import annotations

import numba as nb
import numpy as np

from .arrays import read_only
from .compile import kernel
from .hashing import GOLDEN, fmix64


@kernel(parallel=True)
def _high_sorted_unique(offsets, hashes, presorted, shift):
    """Per document: the distinct values of its hashes shifted right by ``shift`` (32: the high
    halves of 64-bit hashes; 0: fingerprints already), ascending, as a compact CSR."""
    n = offsets.shape[0] - 1
    high = np.empty(hashes.shape[0], dtype=np.uint32)
    sizes = np.zeros(n, dtype=np.int64)
    for d in nb.prange(n):
        a = offsets[d]
        b = offsets[d + 1]
        for i in range(a, b):
            high[i] = np.uint32(hashes[i] >> shift)
        seg = high[a:b]
        if not presorted:
            seg.sort()
        u = 0
        for j in range(b - a):
            if u == 0 or seg[j] != seg[u - 1]:
                seg[u] = seg[j]
                u += 1
        sizes[d] = u
    new = np.zeros(n + 1, dtype=np.int64)
    for d in range(n):
        new[d + 1] = new[d] + sizes[d]
    out = np.empty(new[n], dtype=np.uint32)
    for d in nb.prange(n):
        out[new[d]:new[d + 1]] = high[offsets[d]:offsets[d] + sizes[d]]
    return new, out


def fingerprints(offsets: np.ndarray, hashes: np.ndarray, sorted_sets: bool = False):
    """(offsets, uint32 fingerprints) per document from shingle hashes in CSR form: the high 32
    bits of each 64-bit hash (``uint64`` hashes), or the fingerprints themselves (``uint32``:
    already high halves, as ``MinHasher.signatures_and_fingerprints`` and the work dir hold
    them), sorted and unique per document.

    The hashes may be in any order with repeats (the raw hashes of a read stage); with
    ``sorted_sets`` they are sorted per document already (as ``MinHasher.signatures_and_sets``
    gives them), so their high halves are in order and only neighbours can be equal: no sort.
    The caller's arrays are never changed.
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    hashes = np.asarray(hashes)
    # read-only views (a work dir's maps are, a stage's arrays are not): one version a dtype;
    # uint32 fingerprints and uint64 hashes are two
    if hashes.dtype == np.uint32:
        return _high_sorted_unique(offsets, read_only(np.ascontiguousarray(hashes)), bool(sorted_sets), np.uint32(0))
    hashes = read_only(np.ascontiguousarray(hashes, dtype=np.uint64))
    return _high_sorted_unique(offsets, hashes, bool(sorted_sets), np.uint64(32))


@kernel(inline="always")
def _first_from(hay, pos, v, equal):
    """The first index at or after ``pos`` whose value is >= v (``equal`` False) or > v (True),
    given that the value at ``pos - 1`` (if any) is below that bound: a gallop, then a binary
    search in the last step's span."""
    m = hay.shape[0]
    if pos >= m or (hay[pos] > v if equal else hay[pos] >= v):
        return pos
    step = 1
    while pos + step < m and (hay[pos + step] <= v if equal else hay[pos + step] < v):
        step *= 2
    lo = pos + step // 2 + 1 if step > 1 else pos + 1
    hi = min(m, pos + step)
    while lo < hi:
        mid = (lo + hi) >> 1
        if hay[mid] <= v if equal else hay[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel(parallel=True)
def _key_ranges(hay, needles, lo, hi):
    n = needles.shape[0]
    chunk = 1 << 14
    for c in nb.prange((n + chunk - 1) // chunk):
        a = c * chunk
        b = min(n, a + chunk)
        pos = np.searchsorted(hay, needles[a])
        for i in range(a, b):
            v = needles[i]
            if i > a and v == needles[i - 1]:
                lo[i] = lo[i - 1]
                hi[i] = hi[i - 1]
                continue
            pos = _first_from(hay, pos, v, False)
            lo[i] = pos
            hi[i] = _first_from(hay, pos, v, True)


def key_ranges(sorted_keys: np.ndarray, needles: np.ndarray):
    """(lo, hi): for each of the ascending ``needles``, the range of the ascending
    ``sorted_keys`` equal to it (``np.searchsorted`` left and right). Each thread takes a run of
    needles and gallops from one to the next: 50x faster than two searchsorted calls over
    unsorted needles, which were 90% of a ``dedup --against`` of 100k documents."""
    needles = np.ascontiguousarray(needles, dtype=np.uint64)
    lo = np.empty(len(needles), np.int64)
    hi = np.empty(len(needles), np.int64)
    if len(needles) and len(sorted_keys):
        _key_ranges(read_only(np.asarray(sorted_keys)), needles, lo, hi)
    else:
        lo[:] = 0
        hi[:] = 0
    return lo, hi




@kernel(parallel=True)
def _set_bits(keys, words, bits, hashes):
    """Sets the k bits of every key: keys (n, b) uint64, words (b, W) uint64 (filter j: row j).
    Probe i is at fmix64(h1 + i h2) mod m, independent as the rate's formula assumes; the bare
    h1 + i h2 mod m (Bloom indexes of format 3, now refused) is an arithmetic progression, and
    small filters answered unrelated keys far above their rate."""
    n, b = keys.shape
    m = np.uint64(bits)
    for j in nb.prange(b):
        row = words[j]
        for d in range(n):
            key = keys[d, j]
            h1 = fmix64(key)
            h2 = fmix64(key ^ np.uint64(GOLDEN)) | np.uint64(1)
            for i in range(hashes):
                pos = fmix64(h1 + np.uint64(i) * h2) % m
                row[pos >> np.uint64(6)] |= np.uint64(1) << (pos & np.uint64(63))


@kernel(parallel=True)
def _test_bits(keys, active, words, bits, hashes, found):
    """found[d] |= some band key of document d (active[d]) tests present in its band's filter."""
    n, b = keys.shape
    m = np.uint64(bits)
    for d in nb.prange(n):
        if found[d] or not active[d]:
            continue
        for j in range(b):
            key = keys[d, j]
            h1 = fmix64(key)
            h2 = fmix64(key ^ np.uint64(GOLDEN)) | np.uint64(1)
            hit = True
            for i in range(hashes):
                pos = fmix64(h1 + np.uint64(i) * h2) % m
                if (words[j, pos >> np.uint64(6)] >> (pos & np.uint64(63))) & np.uint64(1) == 0:
                    hit = False
                    break
            if hit:
                found[d] = True
                break


@kernel(parallel=True)
def _bits_set(words):
    """Bits set in each row of words (b, W)."""
    b, w = words.shape
    out = np.zeros(b, dtype=np.int64)
    for j in nb.prange(b):
        c = 0
        for i in range(w):
            x = words[j, i]
            x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
            x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
            x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
            c += int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))
        out[j] = c
    return out


def build_filters(keys: np.ndarray, bits: int, hashes: int) -> np.ndarray:
    """(b, m/64) uint64: the filters of keys (n, b)."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    words = np.zeros((keys.shape[1], bits // 64), dtype=np.uint64)
    if len(keys):
        _set_bits(keys, words, np.int64(bits), np.int64(hashes))
    return words


def bits_set(words: np.ndarray) -> np.ndarray:
    return _bits_set(read_only(np.ascontiguousarray(words, dtype=np.uint64)))  # one version, a map or not


def test_filters(keys: np.ndarray, active: np.ndarray, words: np.ndarray, bits: int, hashes: int,
                 found: np.ndarray) -> None:
    """Sets found[d] for every active document d with a band key present in its band's filter."""
    if len(keys):  # keys and words read-only views, whoever made them: one compiled version
        _test_bits(read_only(np.ascontiguousarray(keys, dtype=np.uint64)), np.ascontiguousarray(active, dtype=np.bool_),
                   read_only(np.ascontiguousarray(words, dtype=np.uint64)), np.int64(bits), np.int64(hashes), found)


test_filters.__test__ = False  # not a pytest test


