"""The duplicate-id check of one partition (:func:`neardup.stages.read.duplicate_ids_of`): its
answer, whether the ids' keys are all distinct (no sort by id needed) or not, is the sort by id's
(:func:`neardup.stages.read.duplicate_ids`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from neardup.kernels.hashing import string_hash
from neardup.stages import read


def _rows(ids, keys=None):
    ids = pa.array(ids, pa.string())
    keys = string_hash(ids) if keys is None else np.asarray(keys, np.uint64)
    return pa.table({"key": pa.array(keys), "doc": pa.array(np.arange(len(ids), dtype=np.int64) * 3), "id": ids})


def test_distinct_ids_are_answered_from_their_keys_without_the_sort_by_id(monkeypatch):
    rows = _rows([f"doc-{i}" for i in range(1000)])

    def sorted_by_id(*_):
        raise AssertionError("sorted by id although every key is distinct")

    monkeypatch.setattr(read, "duplicate_ids", sorted_by_id)
    assert read.duplicate_ids_of(rows).num_rows == 0


def test_repeated_ids_are_found_as_the_sort_by_id_finds_them():
    ids = [f"doc-{i}" for i in range(500)] + ["doc-7", "doc-499", "doc-7"]
    rows = _rows(ids)
    found = read.duplicate_ids_of(rows)
    assert found.to_pylist() == [{"later": 1503, "first": 1497, "id": "doc-499"},
                                 {"later": 1500, "first": 21, "id": "doc-7"},
                                 {"later": 1506, "first": 21, "id": "doc-7"}]
    assert found.equals(read.duplicate_ids(np.arange(len(ids)) * 3, rows.column("id").combine_chunks()))


def test_equal_keys_of_distinct_ids_are_no_duplicates():
    # a collision of two ids' keys (made here: every key the same) only sends the partition to the sort by id
    rows = _rows(["a", "b", "c"], keys=[5, 5, 5])
    assert read.duplicate_ids_of(rows).num_rows == 0
    rows = _rows(["a", "b", "a"], keys=[5, 9, 5])
    assert read.duplicate_ids_of(rows).to_pylist() == [{"later": 6, "first": 0, "id": "a"}]
