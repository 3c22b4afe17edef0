"""The newlines of a block (:func:`neardup.kernels.lines.newline_positions`,
:func:`neardup.kernels.lines.count_newlines`), found a word at a time: the same positions and
counts as a byte-by-byte search at every alignment and density."""

import numpy as np

from neardup.kernels.lines import count_newlines, line_bounds, line_bounds_ascii, newline_positions


def test_newline_positions_match_a_plain_search_at_every_alignment():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 90))
        arr = np.where(rng.random(n) < rng.random(), 10, rng.integers(0, 256, n)).astype(np.uint8)
        raw = arr.tobytes()
        for pad in range(8):  # the block starts at each offset of a word
            data = bytearray(b"x" * pad + raw)
            got = newline_positions(memoryview(data)[pad:].tobytes() if pad else raw)
            assert got.dtype == np.int64
            assert got.tolist() == np.flatnonzero(arr == 10).tolist()
            assert newline_positions(data).tolist() == (np.flatnonzero(arr == 10) + pad).tolist()


def test_line_bounds_of_a_block():
    starts, ends = line_bounds(b'{"a": 1}\n\n{"b": 22}')
    assert starts.tolist() == [0, 9, 10] and ends.tolist() == [8, 9, 19]
    starts, ends = line_bounds(b"x" * 20 + b"\n")
    assert starts.tolist() == [0] and ends.tolist() == [20]


def test_line_bounds_ascii_sees_every_byte_at_every_alignment():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(0, 90))
        arr = np.where(rng.random(n) < 0.1, 10, rng.integers(0, 128, n)).astype(np.uint8)
        if n and rng.random() < 0.7:
            arr[int(rng.integers(0, n))] |= 0x80  # one byte that is not ASCII, anywhere
        raw = arr.tobytes()
        for pad in range(8):
            data = memoryview(bytearray(b"x" * pad + raw))[pad:].tobytes() if pad else raw
            starts, ends, is_ascii = line_bounds_ascii(data)
            want = line_bounds(data)
            assert starts.tolist() == want[0].tolist() and ends.tolist() == want[1].tolist()
            assert is_ascii == raw.isascii()


def test_count_newlines_matches_a_plain_count_at_every_alignment_and_size():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(0, 90))
        arr = np.where(rng.random(n) < rng.random(), 10, rng.integers(0, 256, n)).astype(np.uint8)
        raw = arr.tobytes()
        for pad in range(8):  # the bytes start at each offset of a word
            data = bytearray(b"\n" * pad + raw)
            assert count_newlines(memoryview(data)[pad:].tobytes() if pad else raw) == raw.count(b"\n")
            size = int(rng.integers(0, len(data) + 1))  # a buffer's first bytes only
            assert count_newlines(data, size) == data[:size].count(b"\n")


def test_newlines_found_in_one_pass_or_two_at_the_edge_of_its_room():
    """The one pass holds len // ONE_PASS_LINE + 16 positions; a block with more newlines is
    searched again in two passes: at, one below and one above that many, the same positions
    and ASCII flag. Guard: ``if k == cap`` tested after the write (``k > cap``) in
    _newlines_once writes one past its room (checked here: the room's end is compared)."""
    from neardup.kernels import lines
    rng = np.random.default_rng(3)
    for n in (0, 7, 100, 1000, 5000):
        cap = n // lines.ONE_PASS_LINE + 16
        for count in (cap - 1, cap, cap + 1, min(n, 3 * cap)):
            if count < 0 or count > n:
                continue
            arr = rng.integers(32, 127, n).astype(np.uint8)
            arr[rng.choice(n, count, replace=False)] = 10
            for pad in (0, 3):
                data = memoryview(bytearray(b"x" * pad + arr.tobytes()))[pad:].tobytes() if pad else arr.tobytes()
                a = np.frombuffer(data, np.uint8)
                out = np.full(cap + 1, -7, np.int64)
                found, _high = lines._newlines_once(a, *lines._as_words(a), out[:cap])
                assert out[cap] == -7  # nothing written past the room
                assert found == (count if count <= cap else -1)
                starts, ends, is_ascii = line_bounds_ascii(data)
                assert ends[:count].tolist() == np.flatnonzero(arr == 10).tolist() and is_ascii
