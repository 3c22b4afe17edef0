"""MinHash signatures from shingle hashes, fused with tokenising in one compiled pass.

For a set S of shingles and k random permutations pi_1..pi_k, the signature is
sig_i(S) = min over x in S of pi_i(x), and for two sets P(sig_i(A) = sig_i(B)) = J(A, B)
(Broder, "On the resemblance and containment of documents", 1997). The share of equal values
over k permutations is then an unbiased estimate of J with variance J(1 - J)/k.

Permutations. Each shingle's 64-bit hash h is reduced to x = h mod 2^32 and permuted by
pi_i(x) = (a_i * x + b_i) mod 2^32 with a_i odd (a bijection of 32-bit values). Because x is
already a well-mixed hash, pi_i(x) is uniform; the min is taken in 32-bit lanes, 16
permutations a vector (:mod:`neardup.kernels.lanes`; about 5x faster than 64-bit multiply-shift
and 30x faster than arithmetic modulo 2^61 - 1 on the same machine, before the explicit vectors). The tests check the estimator's bias and
variance against exact Jaccard. a_i, b_i come from numpy's PCG64 seeded with ``seed``: the same
values on every machine and every numpy version.

Signatures are ``uint32``: k = 128 costs 512 bytes a document. A document without shingles
(empty) gets the all-ones signature and is excluded from candidate search by the pipeline.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numba as nb
import numpy as np

from numba import types
from numba.extending import intrinsic

from . import eliasfano
from . import shingles as _sh
from .compile import kernel
from ..config import Shingling, Sketch
from ..errors import ConfigError
from .hashing import kernel_threads
from .lanes import minhash_lanes

__all__ = ["MinHasher", "permutations", "minhash_python", "EMPTY_VALUE", "shingle_counts", "shingle_sets"]

EMPTY_VALUE = np.uint32(0xFFFFFFFF)
_MASK32 = np.uint64(0xFFFFFFFF)
_DEFAULT_NGRAM = Shingling.ngram


def permutations(num_perm: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """(a, b): the num_perm permutation coefficients, uint32, a odd."""
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    a = rng.integers(0, 1 << 32, size=num_perm, dtype=np.uint64).astype(np.uint32) | np.uint32(1)
    b = rng.integers(0, 1 << 32, size=num_perm, dtype=np.uint64).astype(np.uint32)
    return a, b


@kernel()
def _minhash_into(x, s, a, b, out):
    """out[i] = min_j (a[i] * x[j] + b[i]) mod 2^32 over the first s values of x (uint32): 16
    permutations at a time in explicit vectors, 512 bits wide where the CPU has AVX-512
    (:mod:`neardup.kernels.lanes`)."""
    minhash_lanes(x, s, a, b, out)


@kernel(inline="always")
def _sort_unique(seg):
    """Sorts seg in place and moves its distinct values to the front; returns their number."""
    s = seg.shape[0]
    if s > 1:
        seg.sort()
        u = 1
        for j in range(1, s):
            if seg[j] != seg[u - 1]:
                seg[u] = seg[j]
                u += 1
        s = u
    return s


# Documents tokenised one after another before their signatures are computed one after another.
# A 512-bit MinHash loop right after the tokenizer's scalar code starts slow (the CPU powers its
# wide units up again after some microseconds without them): per document (~3 us of tokenising
# between) that cost about a third of the loop's time, measured; in groups it is paid once a group.
# The group's shingle hashes (4 bytes each) stay in the L2 cache; a group's room for them is
# bounded: when it is full, the signatures so far are computed first.
_GROUP = 64
_GROUP_ROOM = 1 << 15  # shingle hashes (uint32) a group keeps at most: 64 documents of 512 words


@kernel(inline="always")
def _signatures_of(xs, at, counts, lo, first, last, a, b, sigs):
    """The signatures of documents first..last-1 (but those left alone) from their shingle hashes
    in xs, document i's at xs[at[i - lo]:]."""
    for i in range(first, last):
        if counts[i] >= 0:
            _minhash_into(xs[at[i - lo]:at[i - lo] + counts[i]], counts[i], a, b, sigs[i])


@intrinsic
def _fetch_add(typingctx, cursor, n):
    """``cursor[0] += n`` as one atomic step (int64): the value before. The threads of a parallel
    kernel take their places in one buffer with it, one after another, each its own."""
    sig = types.int64(cursor, types.int64)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", ary.data, args[1], "monotonic")

    return sig, codegen


@kernel(parallel=True)
def _process_kernel(starts, ends, data, docs, table, n, options, lower_ascii, bail, h0,
                    a, b, want_sets, sort_sets, fp_shift, want_sigs, cursor, place, values):
    """One pass per document: tokens -> shingle hashes -> (sorted unique set) -> signature; the
    signatures of each :data:`_GROUP` documents after their tokens.

    Returns (signatures, shingle counts). With ``want_sets`` the shingle hashes of document i,
    shifted right by ``fp_shift`` (0: the 64-bit hashes; 32 into a uint32 ``values``: their
    high halves, the fingerprints), are written to ``values[place[i]:]``, one document after
    another in the order the threads come to them (``cursor[0]``, 0 at the start: where the next
    one goes; ``values`` holds at least every document's: :func:`values_room`). With
    ``sort_sets`` they are sorted and unique and the counts are of distinct shingles; otherwise
    they are in text order with repeats (the signature is the same either way). With ``bail``,
    a document that is not pure ASCII is left alone (count -1; see
    :func:`neardup.kernels.shingles.prepare`). ``options`` are the tokenizer's
    (:func:`neardup.kernels.shingles.kernel_options`). Document d is ``data[starts[d]:ends[d]]``
    (an Arrow array's offsets without their last and first, or the spans of a block's texts).
    """
    nd = docs.shape[0]
    k = a.shape[0]
    common = options == _sh.DEFAULT_OPTIONS and lower_ascii and bail
    sigs = np.empty((nd if want_sigs else 0, k), dtype=np.uint32)
    counts = np.zeros(nd, dtype=np.int64)
    for g in nb.prange((nd + _GROUP - 1) // _GROUP):
        lo = g * _GROUP
        hi = min(lo + _GROUP, nd)
        xs = np.empty(_GROUP_ROOM if want_sigs else 0, dtype=np.uint32)  # shingle hashes, low halves
        at = np.zeros(hi - lo, dtype=np.int64)  # where each document's are in xs
        pending = lo  # the first document whose signature is still to come
        fill = 0
        for i in range(lo, hi):
            d = docs[i]
            start = starts[d]
            end = ends[d]
            units = np.empty(end - start + 8, dtype=np.uint64)  # the tokenizer's room (see _units)
            if common:  # the defaults as constants: the compiler folds the other modes' branches away
                m = _sh._units(data, start, end, table, _sh.DEFAULT_OPTIONS, True, True, units)
            else:
                m = _sh._units(data, start, end, table, options, lower_ascii, bail, units)
            if m < 0:
                counts[i] = -1
                continue
            # shingles overwrite the units in place: shingle j only reads units j..j+n-1
            if n == _DEFAULT_NGRAM:  # the default n as a constant: the shingle loop unrolled
                s = _sh._shingles_in_place(units, m, _DEFAULT_NGRAM, h0)
            else:
                s = _sh._shingles_in_place(units, m, n, h0)
            if want_sets:
                if sort_sets:
                    s = _sort_unique(units[:s])
                base = _fetch_add(cursor, np.int64(s))
                place[i] = base
                for j in range(s):
                    values[base + j] = units[j] >> fp_shift
            if want_sigs:
                if fill + s > xs.shape[0]:  # the room is full: the signatures so far first
                    _signatures_of(xs, at, counts, lo, pending, i, a, b, sigs)
                    pending = i
                    fill = 0
                    if s > xs.shape[0]:  # a document bigger than the room: a room of its size
                        xs = np.empty(s, dtype=np.uint32)
                at[i - lo] = fill
                for j in range(s):
                    xs[fill + j] = np.uint32(units[j] & _MASK32)
                fill += s
            counts[i] = s
        if want_sigs:
            _signatures_of(xs, at, counts, lo, pending, hi, a, b, sigs)
    return sigs, counts


@kernel(parallel=True)
def _gather_sets(values, place, counts, target, offsets_out, out):
    for i in nb.prange(counts.shape[0]):
        a = place[i]
        b = offsets_out[target[i]]
        for j in range(counts[i]):
            out[b + j] = values[a + j]


class Scratch:
    """Buffers reused from batch to batch (their pages are touched once, not once per batch):
    the kernels' padded per-document output. What :func:`process` returns is never in it."""

    def __init__(self):
        self.buffers = {}

    def get(self, name: str, size: int, dtype=np.uint64) -> np.ndarray:
        buf = self.buffers.get(name)
        if buf is None or buf.shape[0] < size or buf.dtype != dtype:
            buf = np.empty(max(size, int(size * 1.25)), dtype=dtype)
            self.buffers[name] = buf
        return buf[:size]


def _coefficients(a, b):
    """The permutations' coefficients as the MinHash kernel takes them: contiguous uint32."""
    return np.ascontiguousarray(a, dtype=np.uint32), np.ascontiguousarray(b, dtype=np.uint32)


def words_apart(options: tuple, bail: bool) -> bool:
    """Whether the tokenizer (:func:`neardup.kernels.shingles._units` with ``options``) gives a
    part's documents at most (length + 1) // 2 units: a part that leaves text that is not pure
    ASCII alone (``bail``), cut into words by the ASCII word paths (words, punctuation not kept
    as tokens, hash version 1, or 2 with punctuation split: ``_words_ascii_v1``,
    ``_words_ascii_v2``), where a word is one byte or more and two words are at least one byte
    apart. The defaults are such a case."""
    char_mode, punct, _, hv = options
    return bool(bail) and not char_mode and punct != 2 and (hv == 1 or punct == 0)


def values_room(part, options: tuple) -> int:
    """How many shingle hashes the fused kernel may write for ``part``: as many as its documents
    can have, one after another. A document of m units has at most m shingles (one when
    0 < m < n), and at most its byte length in units, at most half of it + 1 where words are at
    least a byte apart (:func:`words_apart`). The kernel writes only what the documents have,
    from the buffer's start (a document of the default options has ~6 bytes a word: a third of
    the half): the pages after are never touched. 100k documents, two blocks read at once: the
    buffers of values took 2 x 64 MB of fresh pages when each document wrote at its own place
    with room for its byte length + 1, 2 x 32 MB with half, 2 x 9 MB written one after another."""
    lengths = part.ends[part.docs] - part.starts[part.docs]
    return int((lengths // 2 + 1).sum() if words_apart(options, part.bail) else (lengths + 1).sum())


_NO_VALUES = np.zeros(0, dtype=np.uint64)
_NO_FP = np.zeros(0, dtype=np.uint32)
_NO_PLACE = np.zeros(0, dtype=np.int64)


def process(texts, shingling: Shingling, *, seed: int, want_sets: bool, want_sigs: bool,
            a: Optional[np.ndarray] = None, b: Optional[np.ndarray] = None, sort_sets: bool = True,
            fingerprints: bool = False, scratch: Optional[Scratch] = None, codes: bool = False):
    """Runs the fused kernel over a batch, tokenised as ``shingling`` says; returns (signatures,
    counts, set offsets, set values).

    The set values are the 64-bit shingle hashes, or with ``fingerprints`` their high 32 bits
    (uint32). With ``codes`` (and ``fingerprints``) the set values are the documents'
    Elias-Fano codes instead (:mod:`neardup.kernels.eliasfano`, uint8, one after another) and
    the offsets None. Documents that are not pure ASCII go through the kernel a second time,
    normalised (see :func:`neardup.kernels.shingles.prepare`)."""
    options = _sh.kernel_options(shingling)
    arr, first = _sh.prepare(texts, shingling)
    n = len(arr)
    if a is None:
        a = np.zeros(0, dtype=np.uint32)
        b = np.zeros(0, dtype=np.uint32)
    a, b = _coefficients(a, b)
    table = _sh.char_classes()
    h0 = _sh.seed_state(seed)
    vtype = np.uint32 if fingerprints else np.uint64
    shift = np.uint64(32 if fingerprints else 0)

    def run(pi, part):
        if want_sets:
            place = np.zeros(len(part.docs), dtype=np.int64)  # (a document left alone has none)
            room = values_room(part, options)
            values = (scratch.get(f"values{pi}", room, vtype) if scratch is not None
                      else np.empty(room, dtype=vtype))
        else:
            place, values = _NO_PLACE, (_NO_FP if fingerprints else _NO_VALUES)
        chunk = nb.get_parallel_chunksize()  # the caller's chunk of documents, in groups (a per-thread setting)
        nb.set_parallel_chunksize(max(1, chunk // _GROUP) if chunk else 0)
        try:
            sigs, counts = _process_kernel(part.starts, part.ends, part.data, part.docs, table, int(shingling.ngram),
                                           options, bool(part.lower_ascii), bool(part.bail), h0, a, b,
                                           bool(want_sets), bool(sort_sets), shift, bool(want_sigs),
                                           np.zeros(1, dtype=np.int64), place, values)
        finally:
            nb.set_parallel_chunksize(chunk)
        return sigs, counts, values, place

    results = [(first, run(0, first))]
    sigs, counts = results[0][1][0], results[0][1][1]
    bailed = np.flatnonzero(counts < 0)
    if len(bailed):
        second = _sh.normalised_part(arr, bailed, shingling)
        r = run(1, second)
        results.append((second, r))
        counts[bailed] = 0  # in the first part's gather below: nothing of theirs there
        if want_sigs:
            sigs[bailed] = r[0]
    if not want_sigs:
        sigs = None
    if not want_sets:
        if len(bailed):
            counts[bailed] = results[1][1][1]
        return sigs, counts, None, None
    parts_counts = [counts.copy() if len(bailed) else counts] + [r[1] for _, r in results[1:]]
    if len(bailed):
        counts[bailed] = results[1][1][1]
    if codes:
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(eliasfano.code_bytes(counts), out=starts[1:])
        out = np.empty(starts[-1], dtype=np.uint8)  # the caller's to keep (not in the scratch)
        for (part, r), pc in zip(results, parts_counts):
            eliasfano.encode_parts(r[2], r[3], pc, part.target, starts, out)
        return sigs, counts, None, out
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = np.empty(offsets[-1], dtype=vtype)  # the caller's to keep (not in the scratch)
    for (part, r), pc in zip(results, parts_counts):
        _gather_sets(r[2], r[3], pc, part.target, offsets, values)
    return sigs, counts, offsets, values


@kernel(parallel=True)
def _signatures_from_hashes_kernel(offsets, hashes, a, b):
    ndocs = offsets.shape[0] - 1
    k = a.shape[0]
    sigs = np.empty((ndocs, k), dtype=np.uint32)
    for d in nb.prange(ndocs):
        s = offsets[d + 1] - offsets[d]
        x = np.empty(max(s, 1), dtype=np.uint32)
        for j in range(s):
            x[j] = np.uint32(hashes[offsets[d] + j] & _MASK32)
        _minhash_into(x, s, a, b, sigs[d])
    return sigs


@kernel(parallel=True)
def _sort_unique_kernel(offsets, values, docs):
    nd = docs.shape[0]
    bound = np.zeros(nd + 1, dtype=np.int64)
    for i in range(nd):
        d = docs[i]
        bound[i + 1] = bound[i] + offsets[d + 1] - offsets[d]
    out = np.empty(bound[nd], dtype=np.uint64)
    sizes = np.zeros(nd, dtype=np.int64)
    for i in nb.prange(nd):
        d = docs[i]
        seg = out[bound[i]:bound[i + 1]]
        seg[:] = values[offsets[d]:offsets[d + 1]]
        sizes[i] = _sort_unique(seg)
    new = np.zeros(nd + 1, dtype=np.int64)
    for i in range(nd):
        new[i + 1] = new[i] + sizes[i]
    compact = np.empty(new[nd], dtype=np.uint64)
    for i in nb.prange(nd):
        compact[new[i]:new[i + 1]] = out[bound[i]:bound[i] + sizes[i]]
    return new, compact


def sort_unique_sets(offsets: np.ndarray, values: np.ndarray, docs: Optional[np.ndarray] = None):
    """Sorted unique shingle sets of the documents ``docs`` (default: all) from raw shingle hashes
    in CSR form; returns a new CSR (offsets, values) indexed by position in ``docs``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    if docs is None:
        docs = np.arange(len(offsets) - 1, dtype=np.int64)
    return _sort_unique_kernel(offsets, values, np.asarray(docs, dtype=np.int64))


class MinHasher:
    """Computes k-value MinHash signatures of documents in parallel compiled code.

    >>> mh = MinHasher(num_perm=128, ngram=5, seed=42)
    >>> sig = mh.signatures(["the quick brown fox jumps over the lazy dog"])
    >>> sig.shape, sig.dtype
    ((1, 128), dtype('uint32'))

    ``texts`` may be a list of str, a pyarrow string / large_string (chunked) array or a pandas
    Series. The tokenizer's options are ``ngram`` and the keyword ``options`` (``char_ngrams``,
    ``punctuation``, ...: the fields of :class:`neardup.config.Shingling`, with its defaults), or
    a whole ``shingling``; see :mod:`neardup.kernels.shingles` for what a word and a shingle are.
    """

    def __init__(self, num_perm: int = Sketch.num_perm, ngram: Optional[int] = None, seed: int = Sketch.seed, *,
                 shingling: Optional[Shingling] = None, workers: Optional[int] = None, **options):
        if shingling is None:
            shingling = Shingling(**options) if ngram is None else Shingling(ngram=ngram, **options)
        elif ngram is not None or options:
            raise ConfigError("give MinHasher a shingling or its options (ngram, char_ngrams, ...), not both")
        if isinstance(num_perm, bool) or int(num_perm) != num_perm or num_perm < 1:
            raise ValueError(f"num_perm must be a positive integer, got {num_perm!r}")
        if isinstance(seed, bool) or int(seed) != seed or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.num_perm = int(num_perm)
        self.seed = int(seed)
        self.shingling = shingling
        self.workers = workers
        self.a, self.b = permutations(self.num_perm, self.seed)

    def __repr__(self) -> str:
        """The call that makes an equal hasher: num_perm, seed, ngram and the tokenizer's options
        that differ from their defaults."""
        from dataclasses import fields
        parts = [f"num_perm={self.num_perm}", f"seed={self.seed}", f"ngram={self.shingling.ngram}"]
        parts += [f"{f.name}={getattr(self.shingling, f.name)!r}" for f in fields(self.shingling)
                  if f.name != "ngram" and getattr(self.shingling, f.name) != f.default]
        if self.workers is not None:
            parts.append(f"workers={self.workers}")
        return f"MinHasher({', '.join(parts)})"

    @classmethod
    def from_config(cls, config) -> "MinHasher":
        return cls(config.num_perm, seed=config.seed, shingling=config.shingling, workers=config.workers)

    def _threads(self):
        return kernel_threads(self.workers)

    def _process(self, texts, want_sets: bool, want_sigs: bool):
        with self._threads():
            return process(texts, self.shingling, seed=self.seed, want_sets=want_sets, want_sigs=want_sigs,
                           a=self.a, b=self.b)

    def signatures_and_counts(self, texts) -> Tuple[np.ndarray, np.ndarray]:
        """(signatures (n, k) uint32, shingle counts int64[n]); a count of 0 marks an empty document."""
        sigs, counts, _, _ = self._process(texts, want_sets=False, want_sigs=True)
        return sigs, counts

    def signatures(self, texts) -> np.ndarray:
        """The (n, num_perm) uint32 MinHash signatures of the documents."""
        return self.signatures_and_counts(texts)[0]

    def shingle_sets(self, texts) -> Tuple[np.ndarray, np.ndarray]:
        """Sorted unique 64-bit shingle hashes per document as CSR (offsets int64[n+1], hashes uint64)."""
        _, _, offsets, values = self._process(texts, want_sets=True, want_sigs=False)
        return offsets, values

    def signatures_and_sets(self, texts) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(signatures, set offsets, sorted unique set values) in one pass over the texts."""
        sigs, _, offsets, values = self._process(texts, want_sets=True, want_sigs=True)
        return sigs, offsets, values

    def signatures_and_shingles(self, texts, scratch: Optional[Scratch] = None
                                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(signatures, offsets, shingle hashes) in one pass over the texts; the hashes of each
        document in text order with repeats (:func:`sort_unique_sets` makes them sets). A
        :class:`Scratch` keeps the kernel's working buffers from batch to batch."""
        with self._threads():
            sigs, _, offsets, values = process(texts, self.shingling, seed=self.seed, want_sets=True, want_sigs=True,
                                               a=self.a, b=self.b, sort_sets=False, scratch=scratch)
        return sigs, offsets, values

    def signatures_and_fingerprints(self, texts, scratch: Optional[Scratch] = None
                                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(signatures, offsets, uint32 shingle fingerprints) in one pass over the texts: the high
        32 bits of each 64-bit shingle hash, in text order with repeats (half the bytes of
        :meth:`signatures_and_shingles`; the signatures use the low 32 bits). The Jaccard of two
        fingerprint sets differs from that of the shingle sets only when distinct shingles share
        their high 32 bits (about |A|·|B| / 2^32 of a pair). A :class:`Scratch` keeps the
        kernel's working buffers from batch to batch."""
        with self._threads():
            sigs, _, offsets, values = process(texts, self.shingling, seed=self.seed, want_sets=True, want_sigs=True,
                                               a=self.a, b=self.b, sort_sets=False, fingerprints=True,
                                               scratch=scratch)
        return sigs, offsets, values

    def signatures_and_codes(self, texts, scratch: Optional[Scratch] = None
                             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(signatures, fingerprint counts, codes): :meth:`signatures_and_fingerprints` with the
        fingerprints of each document coded as the work dir keeps them (what
        :func:`neardup.kernels.eliasfano.encode` makes of its offsets and fingerprints, the same
        bytes), coded on the kernels' threads from their working buffer: no array of the
        fingerprints gathered, no pass of one thread over them."""
        with self._threads():
            sigs, counts, _, codes = process(texts, self.shingling, seed=self.seed, want_sets=True, want_sigs=True,
                                             a=self.a, b=self.b, sort_sets=False, fingerprints=True,
                                             scratch=scratch, codes=True)
        return sigs, counts, codes

    def signatures_from_sets(self, offsets: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Signatures of documents given as shingle-hash CSR (equal to :meth:`signatures` on their texts)."""
        with self._threads():
            return _signatures_from_hashes_kernel(np.asarray(offsets, np.int64), np.asarray(hashes, np.uint64),
                                                  *_coefficients(self.a, self.b))


def minhash_python(hashes, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The plain numpy twin: the signature of one set of 64-bit shingle hashes."""
    k = len(a)
    if len(hashes) == 0:
        return np.full(k, EMPTY_VALUE, dtype=np.uint32)
    x = (np.asarray(hashes, dtype=np.uint64) & np.uint64(0xFFFFFFFF))
    v = (a.astype(np.uint64)[:, None] * x[None, :] + b.astype(np.uint64)[:, None]) & np.uint64(0xFFFFFFFF)
    return v.min(axis=1).astype(np.uint32)


def shingle_counts(texts, **options) -> np.ndarray:
    """Number of shingles (with repeats) of every document; 0 means an empty document.
    ``options`` are those of :class:`neardup.config.Shingling`."""
    _sigs, counts, _off, _vals = process(texts, Shingling(**options), seed=0, want_sets=False, want_sigs=False)
    return counts


def shingle_sets(texts, *, seed: int = Sketch.seed, **options) -> Tuple[np.ndarray, np.ndarray]:
    """The set of 64-bit shingle hashes of every document, as CSR: (offsets int64[n+1], hashes uint64);
    ``options`` are those of :class:`neardup.config.Shingling`.

    ``hashes[offsets[i]:offsets[i+1]]`` is sorted and unique.
    """
    _sigs, _counts, offsets, values = process(texts, Shingling(**options), seed=seed, want_sets=True,
                                              want_sigs=False)
    return offsets, values
