"""Kernels whose callers hold their inputs read-only (a work dir's or an index's memory maps) or
writable (a stage's own arrays) compile one version for both: the call sites give read-only views
(``kernels.arrays.read_only``), and an int64, not a literal 0. Two dtypes stay two versions
where both are real (uint32 fingerprints and uint64 shingle hashes)."""

from __future__ import annotations

import numpy as np
import pytest
from numba.core import types

from neardup.kernels.bands import _band_keys_kernel, band_keys
from neardup.kernels.eliasfano import code_bytes, encode
from neardup.kernels.lookup import _bits_set, _high_sorted_unique, _test_bits, bits_set, fingerprints, test_filters
from neardup.kernels.ranges import copy_ranges
from neardup.kernels.verify import _merge_count, exact_jaccard, exact_jaccard_coded
from neardup.io.storage.ranges import read_rows

RNG = np.random.default_rng(5)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False  # as a memory map is
    return a


def _mutable_args(kernel, *at) -> list:
    """The versions of ``kernel`` compiled in this process whose argument(s) ``at`` are writable."""
    return [s for s in kernel.signatures if any(s[i].mutable for i in at)]


def test_band_keys_one_version_for_read_only_and_writable_signatures():
    sigs = RNG.integers(0, 2**32, (6, 16), dtype=np.uint32)
    assert np.array_equal(band_keys(sigs, 4, 4), band_keys(_frozen(sigs), 4, 4))
    assert _band_keys_kernel.signatures and not _mutable_args(_band_keys_kernel, 0)


def test_bloom_filters_one_version_for_read_only_and_writable_keys_and_words():
    keys = RNG.integers(0, 2**63, (8, 3), dtype=np.uint64)
    words = np.zeros((3, 4), dtype=np.uint64)
    words[:, 0] = 1
    results = []
    for k, w in [(keys, words), (_frozen(keys), _frozen(words)), (keys, _frozen(words))]:
        found = np.zeros(len(keys), dtype=np.bool_)
        test_filters(k, np.ones(len(keys), dtype=np.bool_), w, 256, 2, found)
        results.append((found.tolist(), bits_set(w).tolist()))
    assert results[0] == results[1] == results[2]
    assert _test_bits.signatures and not _mutable_args(_test_bits, 0, 2)
    assert _bits_set.signatures and not _mutable_args(_bits_set, 0)


def test_fingerprints_one_version_a_dtype():
    offsets = np.array([0, 3, 7], dtype=np.int64)
    hashes = RNG.integers(0, 2**63, 7, dtype=np.uint64)
    high = (hashes >> np.uint64(32)).astype(np.uint32)
    got = [fingerprints(offsets, h) for h in (hashes, _frozen(hashes), high, _frozen(high))]
    assert all(np.array_equal(g[1], got[0][1]) for g in got)
    assert not _mutable_args(_high_sorted_unique, 1)
    # uint32 fingerprints and uint64 hashes: two real dtypes, two versions
    assert {s[1].dtype for s in _high_sorted_unique.signatures} == {types.uint32, types.uint64}


def test_read_rows_copies_from_a_read_only_buffer_as_a_map_is(tmp_path):
    values = np.arange(40, dtype=np.uint32)
    path = tmp_path / "rows.u32"
    values.tofile(path)
    starts, ends = np.array([0, 10, 30]), np.array([5, 15, 33])  # gaps: read together, then copied
    _, got = read_rows(str(path), starts, ends, np.uint32)
    assert got.tolist() == list(range(5)) + list(range(10, 15)) + list(range(30, 33))
    assert copy_ranges.signatures and not _mutable_args(copy_ranges, 0)


def test_merge_count_one_version_a_dtype_no_literal_bounds():
    docs = [RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for n in (30, 40, 20)]
    docs[1][:20] = docs[0][:20]
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    left, right = np.array([0, 0, 1]), np.array([1, 2, 2])
    starts = np.concatenate(([0], np.cumsum(code_bytes(np.diff(offsets)))[:-1]))
    coded = exact_jaccard_coded(starts, encode(offsets, np.concatenate(docs)), np.diff(offsets), left, right)
    sets = [np.unique(d) for d in docs]
    set_offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sets], out=set_offsets[1:])
    assert np.array_equal(coded, exact_jaccard(set_offsets, np.concatenate(sets), left, right))
    assert not [s for s in _merge_count.signatures if any(isinstance(t, types.Literal) for t in s)]
    assert len({s[0].dtype for s in _merge_count.signatures}) == len(_merge_count.signatures)


def test_key_ranges_one_version_for_read_only_and_writable_keys():
    from neardup.kernels.lookup import _key_ranges, key_ranges
    keys = np.sort(RNG.integers(0, 50, 200, dtype=np.uint64))
    needles = np.arange(0, 60, 3, dtype=np.uint64)
    got = [key_ranges(k, needles) for k in (keys, _frozen(keys))]
    assert all(np.array_equal(a, b) for a, b in zip(got[0], got[1]))
    assert _key_ranges.signatures and not _mutable_args(_key_ranges, 0)


def test_block_kernels_one_version_for_bytes_and_a_bytearray():
    # lines.deep_lines and TextSpans.to_arrow: a reader's bytearray and bytes read the same way
    from neardup.kernels.lines import _deep_lines, deep_lines, line_bounds
    from neardup.kernels.shingles import TextSpans, _gather_spans
    text = b'{"a": ' + b"[" * 6 + b"]" * 6 + b'}\n{"b": [[1]]}\n'
    for block in (text, bytearray(text)):
        starts, ends = line_bounds(block)
        assert deep_lines(block, starts, ends, np.arange(len(starts)), limit=3).tolist() == [0]
        spans = TextSpans(np.frombuffer(block, np.uint8), starts, ends)
        assert spans.to_arrow().to_pylist() == text.decode().splitlines()
    assert _deep_lines.signatures and not _mutable_args(_deep_lines, 0)
    assert _gather_spans.signatures and not _mutable_args(_gather_spans, 0)


@pytest.mark.slow  # compiles the scanner's kernels (~15 s): nested ones list their versions only when compiled
def test_jsonl_decoding_one_version_whatever_it_decodes_into(tmp_path):
    # an escaped key (into the scanner's key buffer at 0), an escaped text (gathered, or decoded
    # over the block's own bytes) and an escaped string id (int32 offsets): one _decode_into
    import os
    import subprocess
    import sys

    from helpers import SRC

    code = r"""
import numpy as np
from neardup.kernels import jsonl
from neardup.kernels.lines import line_bounds
block = b'{"t\\u0065xt": "caf\\u00e9 \\ud83d\\ude00", "id": "d\\u00e9"}\n{"text": "x\\ny", "id": 7}\n'
for in_place in (False, True):
    starts, ends = line_bounds(block)
    text, ids = jsonl.extract(bytearray(block), starts, ends, np.arange(len(starts)), "text", "id",
                              in_place=in_place)
    assert text.to_pylist() == ["caf\u00e9 \U0001F600", "x\ny"], text.to_pylist()
    assert ids.to_pylist() == ["d\u00e9", "7"]
for k in (jsonl._decode_into, jsonl._put_utf8, jsonl._hex4):
    print(k.__name__, ";".join(str(s) for s in k.signatures))
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    sigs = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert sigs["_decode_into"] == ("(Array(uint8, 1, 'C', True, aligned=True), int64, int64, "
                                    "Array(uint8, 1, 'C', False, aligned=True), int64)"), sigs
    assert ";" not in sigs["_put_utf8"] and sigs["_hex4"] == "(Array(uint8, 1, 'C', True, aligned=True), int64, int64)"


@pytest.mark.slow
def test_find_one_version_a_pair_index_type():
    """components._find is called with an int64 at each of its call sites: one version for the
    int64 pairs (connected_components) and one for the int32 ones (select_representatives), no
    third for an int32 x. The union-find compiled afresh here (the cached kernel does not compile
    _find in this process). Mutation: ``np.int64(left[p])`` -> ``left[p]`` -> an (int32[:], int32) version."""
    from numba import njit

    from neardup.kernels import components

    for dtype in (np.int64, np.int32):
        left, right = np.array([0, 2, 1], dtype), np.array([1, 3, 3], dtype)
        assert njit(components._components_kernel.py_func)(4, left, right).tolist() == [0, 0, 0, 0]
    assert {(s[0].dtype, s[1]) for s in components._find.signatures} == {(types.int64, types.int64),
                                                                        (types.int32, types.int64)}
