"""The shingle fingerprints of the work dir, coded: each document's uint32 fingerprints as one
Elias-Fano code (lossless: the same multiset comes back, in another order).

A document of ``n`` fingerprints takes ``L`` high bits as a bucket number and ``w = 32 - L`` low
bits as they are. Its code, starting on a byte of its own:

* the upper part, ``n + 2^L`` bits: for each bucket in order, one 1 bit per fingerprint in it,
  then a 0 bit;
* the lower part, ``n * w`` bits: the low bits of the fingerprints in bucket order, ascending
  within a bucket (so a code decodes to its values ascending; a work dir written before this
  held text order within a bucket, which :func:`decode_distinct` tells apart);
* padding to the next byte. Bits fill each byte from its lowest bit.

``L`` is the one of floor(log2 n) and floor(log2 n) + 1 that makes the code shorter (the smaller on
a tie): about ``n * (33 - log2 n)`` bits. For random 32-bit values that is within 3% of the
least any lossless code can take (log2 of the number of n-sets, ``n * (32 - log2 n + 1.44)``):
1,054 bytes for the 330 fingerprints of a 2.2 KB document instead of 1,320 raw. The length of a
code depends on ``n`` only (:func:`code_bytes`), so a document's code is found from the counts
alone. A document without shingles has an empty code.
"""

from __future__ import annotations

from typing import Tuple

import numba as nb
import numpy as np

from .compile import kernel
from .lanes import load64, lowest_bit, store64

__all__ = ["code_bytes", "code_length", "encode", "encode_parts", "decode", "decode_one", "decode_distinct"]


@kernel(inline="always")
def _high_bits(n):
    """L of a document of n >= 1 fingerprints (see the module docstring)."""
    low = 0
    while (np.int64(2) << low) <= n:
        low += 1
    if low < 31 and n * np.int64(33 - low) + (np.int64(1) << low) > n * np.int64(32 - low) + (np.int64(2) << low):
        low += 1
    return low


@kernel(inline="always")
def _code_bits(n):
    if n == 0:
        return np.int64(0)
    low = _high_bits(n)
    return n * np.int64(33 - low) + (np.int64(1) << low)


@kernel(inline="always")
def code_length(n):
    """The bytes of the code of a document of n fingerprints (in a kernel)."""
    return (_code_bits(np.int64(n)) + 7) >> 3


@kernel()
def _code_bytes_kernel(counts):
    out = np.empty(len(counts), dtype=np.int64)
    for i in range(len(counts)):
        out[i] = code_length(counts[i])
    return out


def code_bytes(counts: np.ndarray) -> np.ndarray:
    """The bytes of the code of documents of ``counts`` fingerprints (int64, one per document)."""
    return _code_bytes_kernel(np.ascontiguousarray(counts, dtype=np.int64))


@kernel()
def _encode_one(values, a0, n, out, at, buckets, order, upper_words):
    """The code of values[a0:a0+n] into out[at:...]; ``buckets`` (>= 2^L + 1 entries), ``order``
    (uint32, >= n) and ``upper_words`` (uint64, >= n / 16 + 2: the upper part has at most 3n
    bits) are scratch.

    One pass places each value, in text order, at its rank q in bucket order (its bucket h's
    next place): its 1 bit of the upper part at h + q, set where it falls in the zeroed
    ``upper_words`` (no branch), the value at order[q]. An insertion sort puts order ascending
    (only the values of one bucket can be out of order: a bucket holds 1-2 values mostly), and a
    second pass streams the code out 64 bits at a time: the upper part's words, then the low
    bits packed after them."""
    low = _high_bits(n)
    w = np.uint64(32 - low)
    nb_ = np.int64(1) << low
    upper = np.uint64(n + nb_)
    k_upper = upper >> np.uint64(6)  # the upper part's whole words; the lower part starts in the next
    upper_words[:k_upper + np.uint64(1)] = 0
    buckets[:nb_ + 1] = 0
    mine = values[a0:a0 + n]  # a view: values[a0 + i] in the two loops below made them ~1.5x slower
    for i in range(n):
        buckets[(np.uint64(mine[i]) >> w) + np.uint64(1)] += 1
    for h in range(nb_):
        buckets[h + 1] += buckets[h]
    mask = (np.uint64(1) << w) - np.uint64(1)
    s63 = np.uint64(63)
    for i in range(n):
        v = np.uint64(mine[i])
        h = v >> w
        q = buckets[h]
        buckets[h] = q + 1
        p = h + np.uint64(q)
        upper_words[p >> np.uint64(6)] |= np.uint64(1) << (p & s63)
        order[q] = np.uint32(v)
    top = order[0]  # the largest of order[:i]: order[i - 1]
    for i in range(1, n):
        v32 = order[i]
        order[i - 1] = min(top, v32)  # one step of the insertion, without a branch (selects)
        top = max(top, v32)
        order[i] = top
        if i > 1 and order[i - 2] > v32:  # further down: a bucket of 3 or more values, rarely
            j = i - 1
            while j > 0 and order[j - 1] > v32:
                order[j] = order[j - 1]
                j -= 1
            order[j] = v32
    for j in range(k_upper):
        store64(out, at + 8 * j, upper_words[j])
    at += 8 * np.int64(k_upper)
    acc = upper_words[k_upper]
    bits = upper & s63
    for i in range(n):
        v = np.uint64(order[i]) & mask
        acc |= v << bits
        bits += w
        if bits >= 64:
            store64(out, at, acc)
            at += 8
            bits -= np.uint64(64)
            acc = v >> (w - bits)  # its bits that did not fit (none: v >> w = 0)
    while bits > 0:
        out[at] = np.uint8(acc & np.uint64(0xFF))
        at += 1
        acc >>= np.uint64(8)
        bits -= min(bits, np.uint64(8))


_CHUNK = 64  # documents a task of the parallel encoder (its scratch sized for their largest)


@kernel(parallel=True)
def _encode_parts_kernel(values, bound, counts, target, starts, out):
    nd = counts.shape[0]
    for c in nb.prange((nd + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        hi = min(nd, lo + _CHUNK)
        most = 1
        for i in range(lo, hi):
            most = max(most, counts[i])
        buckets = np.empty(2 * most + 2, dtype=np.int64)
        order = np.empty(most, dtype=np.uint32)
        upper_words = np.empty(most // 16 + 2, dtype=np.uint64)
        for i in range(lo, hi):
            if counts[i] > 0:
                _encode_one(values, bound[i], counts[i], out, starts[target[i]], buckets, order, upper_words)


def encode_parts(values: np.ndarray, bound: np.ndarray, counts: np.ndarray, target: np.ndarray,
                 starts: np.ndarray, out: np.ndarray) -> None:
    """The codes of documents whose fingerprints lie apart (the fused kernel's output, each
    document's at ``values[bound[i]:]``, ``counts[i]`` of them) straight into ``out`` at
    ``starts[target[i]]``: the bytes :func:`encode` makes of them gathered first, without the
    gathering, on the kernels' threads."""
    if len(counts):
        _encode_parts_kernel(values, bound, counts, target, starts, out)


def encode(offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The codes of documents given as CSR (``values[offsets[i]:offsets[i+1]]``, uint32
    fingerprints in any order, repeats kept), one after another: uint8 (:func:`encode_parts`
    of documents that lie together, in order)."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    counts = np.diff(offsets)
    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(code_bytes(counts), out=starts[1:])
    out = np.empty(starts[-1], dtype=np.uint8)
    encode_parts(np.ascontiguousarray(values, dtype=np.uint32), offsets[:-1], counts,
                 np.arange(len(counts), dtype=np.int64), starts, out)
    return out


@kernel(inline="always")
def _load64(data, at):
    """data[at:at+8] as a little-endian number, zeros past the end (the last bytes of data)."""
    if at + 8 <= len(data):
        return load64(data, at)
    v = np.uint64(0)
    for j in range(len(data) - at):
        v |= np.uint64(data[at + j]) << np.uint64(8 * j)
    return v


@kernel(inline="always")
def _decode(data, start, n, out, distinct):
    """The ``n`` fingerprints of the code at byte ``start`` of ``data`` into out[0:...] in the
    code's order, all of them, or with ``distinct`` each one only where it differs from the one
    before; the number written, and whether the code's values came ascending (a repeat then
    always follows its equal: ``distinct`` wrote the distinct values).

    Each 1 bit of the upper part (a word's lowest, one ``tzcnt``) is the next value, its bucket
    its bit number less the values before it; its low bits are read where they lie, the ``w``
    bits at ``lower + k w``, with one unaligned load (no branch on a running bit buffer)."""
    low = _high_bits(n)
    w = np.uint64(32 - low)
    mask = (np.uint64(1) << w) - np.uint64(1)
    pos = start * 8 + n + (np.int64(1) << low)  # bit position of the lower part's next value
    keep = np.int64(not distinct)
    k = np.int64(0)
    u = np.int64(0)
    prev = np.int64(-1)
    ascending = True
    ub = start  # the first of the 8 bytes of the upper part being read (the bits past its end, of
    base = 0    # the lower part, are never reached: the n ones come first); the bit number of its first bit
    while k < n:
        word = _load64(data, ub)
        while word != 0 and k < n:
            bucket = np.uint64(base + lowest_bit(word) - k)
            word &= word - np.uint64(1)
            v = np.int64((bucket << w) | ((_load64(data, pos >> 3) >> np.uint64(pos & 7)) & mask))
            pos += np.int64(w)
            out[u] = np.uint32(v & 0xFFFFFFFF)
            ascending &= v >= prev
            u += np.int64(v != prev) | keep
            prev = v
            k += 1
        ub += 8
        base += 64
    return u, ascending


@kernel(inline="always")
def decode_one(data, start, n, out, first):
    """The ``n`` fingerprints of the code at byte ``start`` of ``data`` into out[first:first+n]
    (ascending; bucket order, text order within a bucket, for a code of an older work dir)."""
    _decode(data, start, n, out[first:], False)


@kernel(inline="always")
def decode_distinct(data, start, n, out):
    """The distinct fingerprints of the code at byte ``start`` of ``data`` (``n`` of them with
    repeats), ascending, into out[0:...]: their number, or -1 for a code whose values are not
    ascending (an older work dir's; out holds no set then: :func:`decode_one` reads it)."""
    u, ascending = _decode(data, start, n, out, True)
    return u if ascending else np.int64(-1)


@kernel(parallel=True)
def _decode_kernel(starts, data, offsets, out):
    for d in nb.prange(len(offsets) - 1):
        n = offsets[d + 1] - offsets[d]
        if n > 0:
            decode_one(data, starts[d], n, out, offsets[d])


def decode(starts: np.ndarray, data: np.ndarray, counts: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The fingerprints of documents whose codes are ``data[starts[i]:...]`` (uint8) and that have
    ``counts[i]`` fingerprints, as CSR (offsets, uint32 values), each document's ascending
    (see :func:`decode_one`)."""
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(offsets[-1], dtype=np.uint32)
    if offsets[-1]:
        _decode_kernel(np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(data, dtype=np.uint8),
                       offsets, out)
    return offsets, out
