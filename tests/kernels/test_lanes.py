"""kernels.lanes.byte_mask, word_bytes64, lowest_bit, bit_count, store64, load64 and load32, and the JSONL scanner's 64-byte skip over a
string's plain bytes built on them (kernels.jsonl._string_stop), against byte-by-byte definitions
at every offset around the vectors' edges."""

import numba as nb
import numpy as np
import pytest

from neardup.kernels.jsonl import _string_stop
from neardup.kernels.lanes import (BYTE_LANES, bit_count, byte_mask, load32, load64, lowest_bit, prefetch, store64,
                                   word_bytes64)


@nb.njit(cache=False)
def _mask(data, p, c1, c2, below):
    return byte_mask(data, p, c1, c2, below)


@nb.njit(cache=False)
def _word_bytes(data, p):
    return word_bytes64(data, p)


def test_word_bytes64_are_the_ascii_word_bytes_and_the_high_bytes_at_every_offset():
    """Every byte value, at every place of the 64: [0-9A-Za-z_] in the first mask (what
    char_classes calls a word character among ASCII), a byte >= 0x80 in the second."""
    rng = np.random.default_rng(5)
    data = np.concatenate([np.arange(256, dtype=np.uint8), rng.integers(0, 256, 3 * BYTE_LANES, dtype=np.uint8)])
    word_bytes = set(b"0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for p in range(len(data) - BYTE_LANES + 1):
        block = data[p:p + BYTE_LANES].tolist()
        want_word = sum(1 << j for j, b in enumerate(block) if b in word_bytes)
        want_high = sum(1 << j for j, b in enumerate(block) if b >= 0x80)
        assert tuple(int(x) for x in _word_bytes(data, p)) == (want_word, want_high), p


@nb.njit(cache=False)
def _lowest(word):
    return lowest_bit(word)


def test_byte_mask_bit_j_is_byte_p_plus_j():
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 5 * BYTE_LANES, dtype=np.uint8)
    data[::7] = 34
    for c1, c2, below in ((34, 92, 32), (10, 10, 0), (0, 0, 128), (255, 1, 0)):
        for p in range(0, len(data) - BYTE_LANES + 1, 5):
            block = data[p:p + BYTE_LANES]
            hits = (block == c1) | (block == c2) | (block < below)
            want = sum(1 << int(j) for j in np.flatnonzero(hits))
            assert int(_mask(data, p, c1, c2, below)) == want, (c1, c2, below, p)


def test_lowest_bit():
    assert _lowest(np.uint64(0)) == 64
    for j in range(64):
        assert _lowest(np.uint64(1 << j)) == j
        assert _lowest(np.uint64(((1 << 64) - 1) >> j << j)) == j


@nb.njit(cache=False)
def _ones(word):
    return bit_count(word)


def test_bit_count():
    rng = np.random.default_rng(6)
    for word in [0, 1, 1 << 63, (1 << 64) - 1] + [int(w) for w in rng.integers(0, 2**63, 50, dtype=np.uint64)]:
        word = (word << 1 | word & 1) & ((1 << 64) - 1)  # the top bit too
        assert _ones(np.uint64(word)) == bin(word).count("1"), word


def _reference(data: np.ndarray, p: int, end: int) -> int:
    for q in range(p, end):
        if data[q] in (34, 92) or data[q] < 32:
            return q
    return end


def _check(data: np.ndarray, p: int, end: int) -> None:
    got = _string_stop(data, p, end)
    want = _reference(data, p, end)
    # the vectors never load past the data: its last bytes are left to the caller (got <= want)
    if got != want:
        assert got < want and got + BYTE_LANES > len(data), (p, end, got, want)
        assert _reference(data, got, end) == want


def test_string_stop_at_every_offset_before_and_past_the_end():
    size = 4 * BYTE_LANES + 9
    for special in (34, 92, 0, 10, 31):
        for at in range(size):
            data = np.full(size, ord("a"), dtype=np.uint8)
            data[at] = special
            for p in (0, 1, 63, 64, 65):
                for end in (at, at + 1, at + 5, size - 1, size):
                    if p <= end <= size:
                        _check(data, p, end)


def test_string_stop_passes_plain_bytes_beside_the_stops():
    """Space, '!' and '#' beside the quote, '[' and ']' beside the backslash, DEL, bytes >= 0x80."""
    plain = np.array([32, 33, 35, 91, 93, 127, 128, 255], dtype=np.uint8)
    data = np.resize(plain, 3 * BYTE_LANES)
    assert _string_stop(data, 0, len(data) - BYTE_LANES) == len(data) - BYTE_LANES


def test_string_stop_random_blocks():
    rng = np.random.default_rng(7)
    for _ in range(300):
        size = int(rng.integers(1, 400))
        data = rng.integers(32, 256, size, dtype=np.uint8)
        data[data == 34] = 35
        data[data == 92] = 93
        for _ in range(int(rng.integers(0, 4))):
            data[rng.integers(0, size)] = rng.choice([34, 92, 0, 9, 13])
        p = int(rng.integers(0, size + 1))
        end = int(rng.integers(p, size + 1))
        _check(data, p, end)


@nb.njit(cache=False)
def _store(out, at, value):
    store64(out, at, value)


def test_store64_writes_eight_bytes_lowest_first_at_any_offset_and_no_other():
    value = 0x0123456789ABCDEF
    for at in range(17):
        out = np.full(32, 0xEE, dtype=np.uint8)
        _store(out, at, np.uint64(value))
        want = np.full(32, 0xEE, dtype=np.uint8)
        want[at:at + 8] = np.frombuffer(value.to_bytes(8, "little"), dtype=np.uint8)
        assert out.tolist() == want.tolist(), at


@nb.njit(cache=False)
def _loads(data, at):
    return load64(data, at), load32(data, at)


def test_load64_and_load32_read_their_bytes_lowest_first_at_any_offset():
    data = np.random.default_rng(4).integers(0, 256, 24, dtype=np.uint8)
    for at in range(17):
        word, half = _loads(data, at)
        assert int(word) == int.from_bytes(data[at:at + 8].tobytes(), "little"), at
        assert int(half) == int.from_bytes(data[at:at + 4].tobytes(), "little"), at
        out = np.zeros(24, dtype=np.uint8)
        _store(out, at, np.uint64(word))
        assert out[at:at + 8].tolist() == data[at:at + 8].tolist()  # store64's reverse


@nb.njit(cache=False)
def _prefetched(data):
    prefetch(data.ctypes.data + 64)
    prefetch(-1)  # any address: a hint never faults
    return data[3]


def test_prefetch_is_llvms_prefetch_and_changes_nothing():
    data = np.arange(256, dtype=np.uint8)
    assert _prefetched(data) == 3
    assert "@llvm.prefetch.p0(" in "\n".join(_prefetched.inspect_llvm().values())
    with pytest.raises(nb.core.errors.TypingError):
        nb.njit(cache=False)(lambda x: prefetch(x))(1.5)
