"""The newlines of a block (:func:`neardup.kernels.lines.newline_positions`,
:func:`neardup.kernels.lines.count_newlines`), found 64 bytes at a time: the same
positions and counts as a byte-by-byte search at every alignment and density (blocks of up to
five vectors: their last bytes, less than one, searched one by one; a block of newlines only
outgrows the room first made for their positions)."""

import numpy as np

from neardup.kernels.lines import count_newlines, line_bounds, line_bounds_ascii, newline_positions


def test_newline_positions_match_a_plain_search_at_every_alignment():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 330))
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
        n = int(rng.integers(0, 330))
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
        n = int(rng.integers(0, 300))  # up to four vectors and their last bytes
        arr = np.where(rng.random(n) < rng.random(), 10, rng.integers(0, 256, n)).astype(np.uint8)
        raw = arr.tobytes()
        for pad in range(8):  # the bytes start at each offset of a word
            data = bytearray(b"\n" * pad + raw)
            assert count_newlines(memoryview(data)[pad:].tobytes() if pad else raw) == raw.count(b"\n")
            size = int(rng.integers(0, len(data) + 1))  # a buffer's first bytes only
            assert count_newlines(data, size) == data[:size].count(b"\n")


def test_the_read_kernels_get_one_type_whether_the_block_is_bytes_or_a_bytearray(monkeypatch):
    # guards: the read-only views (kernels.arrays.read_only) the read kernels are given: a reader's
    # bytearray and bytes (a compressed input, S3, the tests) each compiled a version of them
    import json

    from numba import typeof

    from neardup.kernels import jsonl, lines

    types = {}
    for module, name in [(lines, "_newlines"), (lines, "_count_newlines"), (jsonl, "_scan"), (jsonl, "_gather"),
                         (jsonl, "_gather_ids"), (jsonl, "_scan_block")]:
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name:
                            types.setdefault(_name, set()).add(tuple(typeof(x) for x in a)) or _real(*a))
    text = "".join(json.dumps({"id": f"d{i}", "text": f"words {i} and more"}) + "\n" for i in range(20)).encode()
    for block in (text, bytearray(text)):
        starts, ends = line_bounds(block)
        assert count_newlines(block) == 20
        everything = np.arange(len(starts))
        assert jsonl.extract(block, starts, ends, everything, "text", "id")[0].to_pylist()[3] == "words 3 and more"
        assert jsonl.extract(block, starts, ends, everything, "text", "id", in_place=True)[1].to_pylist()[3] == "d3"
        assert jsonl.scan_block(block, "text", "id").extract()[0].to_pylist()[3] == "words 3 and more"
    assert sorted(types) == ["_count_newlines", "_gather", "_gather_ids", "_newlines", "_scan", "_scan_block"]
    assert {name: len(kinds) for name, kinds in types.items()} == dict.fromkeys(types, 1), types
