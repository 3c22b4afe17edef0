"""Estimated and exact Jaccard: kernels against their plain twins."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.kernels.verify import estimated_jaccard, estimated_jaccard_python, exact_jaccard, exact_jaccard_python

PROPS = settings(max_examples=80, deadline=None)

# small value ranges so that intersections are common
small_sets = st.lists(st.sets(st.integers(0, 40), max_size=25), min_size=1, max_size=8)
wide_sets = st.lists(st.sets(st.integers(0, 2**64 - 1), max_size=10), min_size=1, max_size=4)


def to_csr(sets):
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sets], out=offsets[1:])
    hashes = np.array([h for s in sets for h in sorted(s)], dtype=np.uint64)
    return offsets, hashes


def all_pairs(n):
    left, right = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return left.ravel(), right.ravel()


@PROPS
@given(sets=st.one_of(small_sets, wide_sets))
def test_exact_kernel_equals_twin(sets):
    offsets, hashes = to_csr(sets)
    left, right = all_pairs(len(sets))
    got = exact_jaccard(offsets, hashes, left, right)
    assert got.dtype == np.float64 and got.shape == left.shape
    want = [exact_jaccard_python(sets[a], sets[b]) for a, b in zip(left, right)]
    assert got.tolist() == want  # same integer ratio, so exactly equal
    # symmetric, 1 on identical non-empty sets, 0 with an empty side, within [0, 1]
    n = len(sets)
    m = got.reshape(n, n)
    assert np.array_equal(m, m.T)
    for i, s in enumerate(sets):
        assert m[i, i] == (1.0 if s else 0.0)
    assert ((m >= 0) & (m <= 1)).all()


@PROPS
@given(sigs=st.integers(1, 6).flatmap(lambda n: st.integers(1, 64).flatmap(
    lambda k: st.lists(st.lists(st.integers(0, 3), min_size=k, max_size=k), min_size=n, max_size=n))),
    wide=st.booleans())
def test_estimated_kernel_equals_twin(sigs, wide):
    arr = np.array(sigs, dtype=np.uint32)
    if wide:
        arr = arr * np.uint32(0x3FFFFFFF) + np.uint32(7)  # large values, same equality pattern
    left, right = all_pairs(len(sigs))
    got = estimated_jaccard(arr, left, right)
    want = [estimated_jaccard_python(arr[a], arr[b]) for a, b in zip(left, right)]
    assert got.tolist() == pytest.approx(want, abs=1e-15)
    m = got.reshape(len(sigs), len(sigs))
    assert np.array_equal(m, m.T) and (np.diag(m) == 1.0).all()


def test_exact_jaccard_hand_values():
    sets = [[1, 2, 3, 4], [3, 4, 5, 6], [], [], [1, 2, 3, 4], [10]]
    offsets, hashes = to_csr(sets)
    left = np.array([0, 0, 2, 0, 0, 5])
    right = np.array([1, 2, 3, 4, 5, 5])
    assert exact_jaccard(offsets, hashes, left, right).tolist() == [2 / 6, 0.0, 0.0, 1.0, 0.0, 1.0]
    assert exact_jaccard_python([], []) == 0.0
    assert exact_jaccard_python([1], []) == 0.0


def test_empty_pair_lists():
    offsets, hashes = to_csr([[1], [2]])
    out = exact_jaccard(offsets, hashes, [], [])
    assert out.shape == (0,) and out.dtype == np.float64
    out = estimated_jaccard(np.zeros((2, 8), np.uint32), [], [])
    assert out.shape == (0,) and out.dtype == np.float64


def test_estimated_is_share_of_equal_positions():
    sigs = np.array([[1, 2, 3, 4], [1, 2, 0, 0], [9, 9, 9, 9]], dtype=np.uint32)
    assert estimated_jaccard(sigs, [0, 0, 1], [1, 2, 2]).tolist() == [0.5, 0.0, 0.0]


def test_exact_jaccard_64_bit_values_compare_unsigned():
    # values above 2^63 must compare as unsigned in the merge, or sortedness breaks
    big = [2**63 + 5, 2**64 - 1]
    sets = [[1, 2**63 - 1] + big, [2**63 - 1] + big]
    offsets, hashes = to_csr(sets)
    assert exact_jaccard(offsets, hashes, [0], [1]).tolist() == [3 / 4]


# unordered multisets with repeats: the raw shingle hashes of documents, as the pipeline stores them
raw_lists = st.lists(st.lists(st.integers(0, 30), max_size=40), min_size=1, max_size=6)
wide_raw = st.lists(st.lists(st.sampled_from([0, 1, 2**63, 2**64 - 1, 12345, 2**40 + 7]), max_size=12),
                    min_size=1, max_size=5)


@PROPS
@given(docs=st.one_of(raw_lists, wide_raw))
def test_exact_raw_kernel_equals_twin_and_sorted_kernel(docs):
    from neardup.kernels.verify import exact_jaccard_raw
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    hashes = np.array([h for d in docs for h in d], dtype=np.uint64)
    left, right = all_pairs(len(docs))
    got = exact_jaccard_raw(offsets, hashes, left, right)
    want = [exact_jaccard_python(docs[a], docs[b]) for a, b in zip(left, right)]
    assert got.tolist() == want
    sets = [set(d) for d in docs]
    s_off, s_hashes = to_csr(sets)
    assert got.tolist() == exact_jaccard(s_off, s_hashes, left, right).tolist()


def test_exact_coded_kernel_equals_twin_with_repeats_and_crowded_buckets():
    # documents as the pipeline keeps them: Elias-Fano codes of uint32 fingerprints, repeats kept;
    # spread values (about one a bucket), many repeats, and all values in a few buckets (the sort)
    from neardup.kernels.eliasfano import code_bytes, encode
    from neardup.kernels.verify import exact_jaccard_coded
    rng = np.random.default_rng(7)
    spread = rng.integers(0, 2**32, 300, dtype=np.uint64)
    pool = rng.integers(0, 2**32, 60, dtype=np.uint64)
    docs = [spread, np.concatenate([spread[:250], rng.integers(0, 2**32, 40, dtype=np.uint64)]),
            rng.choice(pool, 400), rng.choice(np.concatenate([pool, spread[:30]]), 500),
            rng.integers(0, 3000, 200, dtype=np.uint64), rng.integers(1000, 4000, 300, dtype=np.uint64), []]
    docs = [np.asarray(d, dtype=np.uint32) for d in docs]
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    data = encode(offsets, np.concatenate(docs))
    starts = np.concatenate(([0], np.cumsum(code_bytes(np.diff(offsets)))[:-1]))
    left, right = all_pairs(len(docs))
    got = exact_jaccard_coded(starts, data, np.diff(offsets), left, right)
    assert got.tolist() == [exact_jaccard_python(docs[a].tolist(), docs[b].tolist()) for a, b in zip(left, right)]


def test_exact_coded_kernel_reads_each_document_from_its_own_array():
    """Codes lying in several arrays (the blocks' memory-mapped files), document i's in
    ``data[block[i]]`` at ``starts[i]``: each pair's two documents read from their own arrays,
    the same similarities as one array of them all."""
    from neardup.kernels.eliasfano import code_bytes, encode
    from neardup.kernels.verify import exact_jaccard_coded
    rng = np.random.default_rng(11)
    base = rng.integers(0, 2**32, 200, dtype=np.uint64)
    docs = [np.asarray(np.concatenate([base[: rng.integers(20, 200)], rng.integers(0, 2**32, rng.integers(0, 60))]),
                       dtype=np.uint32) for _ in range(12)]
    block = np.array([i % 3 for i in range(len(docs))], dtype=np.int64)
    arrays, starts = [], np.zeros(len(docs), dtype=np.int64)
    for b in range(3):
        mine = np.flatnonzero(block == b)
        offsets = np.zeros(len(mine) + 1, dtype=np.int64)
        np.cumsum([len(docs[i]) for i in mine], out=offsets[1:])
        arrays.append(encode(offsets, np.concatenate([docs[i] for i in mine])))
        starts[mine] = np.concatenate(([0], np.cumsum(code_bytes(np.diff(offsets)))[:-1]))
    counts = np.array([len(d) for d in docs], dtype=np.int64)
    left, right = all_pairs(len(docs))
    got = exact_jaccard_coded(starts, arrays, counts, left, right, block=block)
    assert got.tolist() == [exact_jaccard_python(docs[a].tolist(), docs[b].tolist()) for a, b in zip(left, right)]


def test_exact_coded_kernel_over_several_tasks_of_pairs():
    """More pairs than one task of the kernel takes (_PAIR_CHUNK), of documents of many sizes:
    each task's buffers made for its own largest documents, every pair's similarity set, the
    twin's."""
    from neardup.kernels.eliasfano import code_bytes, encode
    from neardup.kernels.verify import _PAIR_CHUNK, exact_jaccard_coded
    rng = np.random.default_rng(13)
    base = rng.integers(0, 2**32, 900, dtype=np.uint64)
    docs = [np.asarray(np.concatenate([base[: rng.integers(1, 120)], rng.integers(0, 2**32, rng.integers(0, 30))]),
                       dtype=np.uint32) for _ in range(30)] + [base.astype(np.uint32)]
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    data = encode(offsets, np.concatenate(docs))
    starts = np.concatenate(([0], np.cumsum(code_bytes(np.diff(offsets)))[:-1]))
    left, right = all_pairs(len(docs))
    assert len(left) > 2 * _PAIR_CHUNK
    got = exact_jaccard_coded(starts, data, np.diff(offsets), left, right)
    assert got.tolist() == [exact_jaccard_python(docs[a].tolist(), docs[b].tolist()) for a, b in zip(left, right)]


@pytest.mark.slow  # the kernel compiled again with prefetches counted: ~7 s
def test_the_coded_kernel_prefetches_every_line_of_the_codes_ahead(monkeypatch):
    """_fetch_code hints every cache line a document's code touches (from the line of its first
    byte, not from its first byte: here a code of 57 bytes at 100 spans the lines at 64 and 128),
    and the coded kernel calls it (a build of its source without numba's cache, to be read)."""
    import numba as nb
    from neardup.kernels import verify as V
    from neardup.kernels.eliasfano import code_bytes
    lines = []
    monkeypatch.setattr(V, "prefetch", lines.append)
    counts = np.array([3, 15, 330], np.int64)
    assert code_bytes(counts).tolist()[1:] == [57, 1054]
    V._fetch_code.py_func(np.array([1000, 0], np.int64), np.array([1, 1, 0]), np.array([0, 100, 2]), counts, 1)
    assert lines == [64, 128]
    V._fetch_code.py_func(np.array([1000], np.int64), np.zeros(3, np.int64), np.array([0, 100, 2]), counts, 2)
    assert lines[2:] == list(range(960, 1002 + 1054, 64))
    monkeypatch.undo()
    build = nb.njit(cache=False)(V._exact_coded_kernel.py_func)
    build(np.zeros(1, np.int64), np.ones(1, np.int64), np.zeros(2, np.int64), np.zeros(2, np.int64),
          np.zeros(2, np.int64), np.zeros(1, np.int64), np.ones(1, np.int64))
    assert "@llvm.prefetch.p0(" in "\n".join(build.inspect_llvm().values())


def test_sorted_unique_of_an_older_code_is_the_set():
    """An older work dir's code decodes in bucket order with text order inside a bucket, and
    _sorted_unique makes the set the merge counts on: against np.unique (a repeat right after its
    equal, repeats further apart, values out of order within a bucket, and the whole-sort path
    past SORT_MOVES moves). A repeat kept would count twice in |A| and the Jaccard fall (a copy of
    [1, 1, 2] and [1, 2] at 2/3, not 1)."""
    from neardup.kernels.verify import _sorted_unique
    rng = np.random.default_rng(3)
    cases = [np.array([1, 1, 2], dtype=np.uint32), np.array([5, 5, 5, 5], dtype=np.uint32),
             np.array([3, 1, 2, 2, 1, 3], dtype=np.uint32), np.zeros(0, dtype=np.uint32)]
    for n in (2, 10, 100, 1000):
        # bucket order: ascending buckets of 2^24, each holding values in any order, with repeats
        v = np.sort(rng.integers(0, 2**32, n, dtype=np.uint64)).astype(np.uint32)
        v = np.concatenate([v, v[rng.integers(0, n, n // 3)]])
        buckets = v >> np.uint32(24)
        order = np.lexsort((rng.random(len(v)), buckets))
        cases.append(v[order])
        cases.append(rng.integers(0, 50, n).astype(np.uint32))  # many repeats, far out of order
    for case in cases:
        v = case.copy()
        u = _sorted_unique(v)
        assert v[:u].tolist() == np.unique(case).tolist()
