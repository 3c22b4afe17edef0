"""The Elias-Fano codes of the work dir's shingle fingerprints (neardup.kernels.eliasfano): lossless, of
the length the counts give, near the least a lossless code can take."""

from math import lgamma, log

import numpy as np
import pytest

from neardup.kernels.eliasfano import code_bytes, decode, encode, encode_parts


def _csr(docs):
    off = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=off[1:])
    vals = np.concatenate([np.asarray(d, np.uint32) for d in docs]) if docs else np.zeros(0, np.uint32)
    return off, vals


def _documents():
    rng = np.random.default_rng(7)
    docs = []
    for n in (0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 330, 1000, 4097, 70_000):
        docs.append(rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32))  # random
        docs.append(np.full(n, 0xFFFFFFFF, np.uint32))            # one value repeated, the last bucket
        docs.append(np.zeros(n, np.uint32))                       # the first bucket
        docs.append(rng.integers(0, 3, n).astype(np.uint32))      # repeats, all in bucket 0
        docs.append((rng.integers(0, 1 << 32, max(n // 2, 1), dtype=np.uint64).astype(np.uint32)
                     .repeat(2))[:n])                              # every value twice
    docs.append(np.array([0, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 1], np.uint32))
    return docs


def test_every_document_comes_back_whole_from_one_stream():
    """All documents coded one after another, each decoded from where code_bytes puts it: the
    same multiset of values, repeats included, and a code exactly code_bytes long."""
    docs = _documents()
    off, vals = _csr(docs)
    data = encode(off, vals)
    sizes = code_bytes(np.diff(off))
    assert len(data) == sizes.sum()
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    o, v = decode(starts, data, np.diff(off))
    assert v.dtype == np.uint32
    for i, d in enumerate(docs):
        assert np.array_equal(np.sort(v[o[i]:o[i + 1]]), np.sort(d)), i
    # a subset of documents, from their own codes only (as the store reads them)
    pick = np.arange(1, len(docs), 3)
    parts = [data[starts[i]:starts[i] + sizes[i]] for i in pick]
    sub_starts = np.concatenate(([0], np.cumsum([len(p) for p in parts])[:-1]))
    o, v = decode(sub_starts, np.concatenate(parts), np.diff(off)[pick])
    for j, i in enumerate(pick):
        assert np.array_equal(np.sort(v[o[j]:o[j + 1]]), np.sort(docs[i]))


def test_a_code_does_not_depend_on_its_neighbours():
    docs = _documents()[:40]
    off, vals = _csr(docs)
    together = encode(off, vals)
    alone = b"".join(encode(*_csr([d])).tobytes() for d in docs)
    assert together.tobytes() == alone


def test_values_come_back_ascending():
    """The order is the code's, fixed by the values: ascending, also within a bucket (bucket 0
    here holds 5, 0x10000000, 3 in text order; the last 0xF0000001 before 0xF0000000)."""
    d = np.array([0xF0000001, 5, 0x10000000, 0x20000000, 3, 0xF0000000], np.uint32)  # n = 6: 3 high bits
    o, v = decode(np.zeros(1, np.int64), encode(*_csr([d])), np.array([6]))
    assert v.tolist() == [3, 5, 0x10000000, 0x20000000, 0xF0000000, 0xF0000001]


@pytest.mark.parametrize("n, expected", [(0, 0), (1, 5), (2, 9), (330, 1054), (1000, 3003)])
def test_code_lengths(n, expected):
    """n (33 - L) + 2^L bits with the better L of floor(log2 n) and one more, in whole bytes:
    330 fingerprints (a 2.2 KB document) take 1,054 bytes instead of 1,320."""
    assert int(code_bytes(np.array([n]))[0]) == expected


def test_the_code_is_near_the_least_a_lossless_code_takes():
    """Within 3% of log2 C(2^32, n) bits (the number of n-sets of 32-bit values) for the sizes
    of real documents; shorter than the raw 4 bytes a value from 8 values on, at most a byte
    longer below."""
    for n in (50, 100, 330, 1000, 10_000, 100_000):
        floor_bits = (lgamma(2.0 ** 32 + 1) - lgamma(n + 1) - lgamma(2.0 ** 32 - n + 1)) / log(2)
        assert code_bytes(np.array([n]))[0] * 8 <= 1.03 * floor_bits + 8, n
    n = np.arange(8, 5000)
    assert (code_bytes(n) < 4 * n).all()
    n = np.arange(0, 8)
    assert (code_bytes(n) <= 4 * n + 1).all()


def _encode_python(d, text_order=False) -> bytes:
    """The code as the module's docstring writes it, bit by bit (the format the work dir holds;
    ``text_order``: as a work dir written before held it, text order within a bucket)."""
    n = len(d)
    if n == 0:
        return b""
    low = max(k for k in range(32) if (1 << k) <= n)  # floor(log2 n)
    if low < 31 and n * (33 - low) + (1 << low) > n * (32 - low) + (2 << low):
        low += 1
    w = 32 - low
    order = sorted(range(n), key=lambda i: (int(d[i]) >> w, i) if text_order else int(d[i]))
    sizes = [0] * (1 << low)
    for v in d:
        sizes[int(v) >> w] += 1
    bits = []
    for c in sizes:
        bits += [1] * c + [0]
    for i in order:
        bits += [(int(d[i]) >> b) & 1 for b in range(w)]
    bits += [0] * (-len(bits) % 8)
    return bytes(sum(bits[k + j] << j for j in range(8)) for k in range(0, len(bits), 8))


def test_the_bytes_are_the_formats():
    """Every bit where the format puts it (a change of the coder that keeps the values but moves
    a bit would change every work dir's bytes), also by the parallel coder of documents that lie
    apart (encode_parts: here in reverse order, with gaps, each coded at its own place)."""
    docs = [d for d in _documents() if len(d) <= 1000]
    off, vals = _csr(docs)
    want = b"".join(_encode_python(d) for d in docs)
    assert encode(off, vals).tobytes() == want
    n = len(docs)
    counts = np.array([len(d) for d in docs[::-1]], np.int64)  # the part's documents: the last first
    bound = np.zeros(n + 1, np.int64)
    np.cumsum(counts + 3, out=bound[1:])
    apart = np.full(bound[-1], 0xDEADBEEF, np.uint32)
    for j, d in enumerate(docs[::-1]):
        apart[bound[j]:bound[j] + len(d)] = d
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(code_bytes(np.array([len(d) for d in docs], np.int64)), out=starts[1:])
    out = np.full(starts[-1], 0xAA, np.uint8)
    encode_parts(apart, bound, counts, np.arange(n - 1, -1, -1, dtype=np.int64), starts, out)
    assert out.tobytes() == want


def test_the_decoders_loads_read_zeros_past_the_end_of_the_data():
    """A code that ends its data (the last of a block's file): the loads of its last bytes take
    the bytes there and zeros past the end, never the bytes after it in memory (0xFF here)."""
    from neardup.kernels.eliasfano import _load64
    memory = np.full(32, 0xFF, np.uint8)
    memory[:20] = np.arange(1, 21)
    for n in range(21):
        data = memory[:n]
        for at in range(n):
            want = int.from_bytes(data[at:at + 8].tobytes().ljust(8, b"\0"), "little")
            assert int(_load64(data, at)) == want, (n, at)


def test_the_bytes_of_every_count_near_a_power_of_two():
    """Each count up to 70 and around the powers of two up to 1,025 (where the upper part, up to
    3n bits, is longest against n and ends anywhere in a 64-bit word), one document each, in
    one call and alone: the format's bytes (the coder streams the upper part's words, then the
    low bits packed on from the bit where the upper part ends)."""
    rng = np.random.default_rng(11)
    counts = list(range(1, 71)) + [c + d for c in (127, 255, 511, 1023) for d in (0, 1, 2)]
    docs = [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) for n in counts]
    want = [_encode_python(d) for d in docs]
    assert encode(*_csr(docs)).tobytes() == b"".join(want)
    assert [encode(*_csr([d])).tobytes() for d in docs[::-1]] == want[::-1]


def test_an_older_work_dirs_codes_text_order_within_a_bucket_still_read():
    """Codes as a work dir written before the codes were ascending holds them (text order within a
    bucket), beside ascending ones: decode gives their multisets, decode_distinct tells them
    apart (-1), and the exact Jaccard of every pair is the twin's (such a code sorted again)."""
    from neardup.kernels.verify import exact_jaccard_coded, exact_jaccard_python
    rng = np.random.default_rng(5)
    pool = rng.integers(0, 1 << 32, 80, dtype=np.uint64).astype(np.uint32)
    docs = [rng.choice(pool, n) for n in (5, 40, 120, 300)] + [np.array([9, 2, 9, 0x80000000, 7, 2], np.uint32)]
    docs += [d.copy() for d in docs]
    old = [i < len(docs) // 2 for i in range(len(docs))]  # the first half coded the old way
    parts = [_encode_python(d, text_order=o) for d, o in zip(docs, old)]
    assert [p != _encode_python(d) for p, d in zip(parts, docs)] == old  # the two orders differ here
    data = np.frombuffer(b"".join(parts), np.uint8)
    counts = np.array([len(d) for d in docs], np.int64)
    starts = np.concatenate(([0], np.cumsum([len(p) for p in parts])[:-1])).astype(np.int64)
    o, v = decode(starts, data, counts)
    for i, d in enumerate(docs):
        assert np.array_equal(np.sort(v[o[i]:o[i + 1]]), np.sort(d)), i
    left, right = np.triu_indices(len(docs), 1)
    got = exact_jaccard_coded(starts, data, counts, left, right)
    assert got.tolist() == [exact_jaccard_python(docs[a].tolist(), docs[b].tolist()) for a, b in zip(left, right)]
