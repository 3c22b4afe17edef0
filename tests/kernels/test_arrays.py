"""neardup.kernels.arrays: the conversions between numpy, Python lists and Arrow that avoid pandas
equal pyarrow's own."""

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels import arrays
from neardup.kernels.arrays import (adjacent_differ, arrow, arrow_take, cast_strings, empty_table, string_offsets,
                                    take_array, take_rows, to_numpy, unique)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64])
def test_numeric_arrays_both_ways(dtype):
    a = (np.arange(11) * 3 - 7).astype(dtype)
    got = arrow(a)
    assert got.equals(pa.array(a)) and got.type == pa.array(a).type
    for s in (got, got.slice(3, 5), got.slice(11, 0)):
        back = to_numpy(s)
        assert back.dtype == np.dtype(dtype) and back.tolist() == s.to_pylist()
    assert to_numpy(pa.chunked_array([got.slice(0, 4), got.slice(4)])).tolist() == a.tolist()
    strided = a[::2]
    assert arrow(strided).to_pylist() == strided.tolist()


def test_booleans_both_ways():
    rng = np.random.default_rng(1)
    a = rng.random(77) < 0.5
    got = arrow(a)
    assert got.equals(pa.array(a))
    for off in range(0, 9):
        s = got.slice(off, 77 - 2 * off)
        assert to_numpy(s).tolist() == s.to_pylist() and to_numpy(s).dtype == bool
    assert to_numpy(arrow(np.zeros(0, bool))).shape == (0,)


@pytest.mark.parametrize("values,type", [(["a", "é", "", "東京"], None), (["a", None, "c"], pa.string()),
                                         ([], pa.string()), (["x", None], pa.large_string()),
                                         ([1, 2, -3], pa.int64()), ([1.5, 2.0], pa.float64()), ([], pa.int32()),
                                         ([1, None], pa.int64()), ([True, None], None)])
def test_lists_equal_pa_array(values, type):
    got = arrow(values, type)
    want = pa.array(values, type) if type is not None else pa.array(values)
    got.validate(full=True)
    assert got.type == want.type and got.equals(want)


def test_a_type_that_differs_from_the_numpy_dtype_converts():
    assert arrow(np.arange(3), pa.int32()).type == pa.int32()
    assert arrow(np.arange(3), pa.float64()).to_pylist() == [0.0, 1.0, 2.0]


def test_nulls_and_strings_fall_back_to_pyarrow():
    assert np.isnan(to_numpy(pa.array([1.0, None]))[1])
    assert to_numpy(pa.array(["a", "b"])).tolist() == ["a", "b"]


def test_empty_table_and_unique():
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    t = empty_table(schema)
    assert t.num_rows == 0 and t.schema == schema
    assert unique(np.array([3, 1, 3, 2, 1], np.uint64)).tolist() == [1, 2, 3]


STRINGS = ["a", None, "ccc", "", "dd", "dd", None, "é", "ccc", "x", "", ""] * 3


@pytest.mark.parametrize("numpy_up_to", [arrays.NUMPY_UP_TO, 0])
@pytest.mark.parametrize("type_", [pa.string(), pa.large_string()])
def test_string_casts_takes_and_neighbours_equal_arrows_own(type_, numpy_up_to, monkeypatch):
    """cast_strings, take_array, adjacent_differ and string_offsets (from the buffers: Arrow's
    own import pyarrow.compute) give what Arrow's cast, take and not_equal give, on slices, with
    nulls, empty strings and none at all; so do the larger arrays that go to Arrow's kernels."""
    import pyarrow.compute as pc
    monkeypatch.setattr(arrays, "NUMPY_UP_TO", numpy_up_to)
    rng = np.random.default_rng(3)
    a = pa.array(STRINGS, type_)
    dense = pa.array([v for v in STRINGS if v is not None], type_)
    for s in (a, a.slice(4), a.slice(5, 13), a.slice(36, 0), dense.slice(3, 11)):
        assert np.diff(string_offsets(s)).tolist() == [len((v or "").encode()) for v in s.to_pylist()]
        for other in (pa.string(), pa.large_string()):
            got = cast_strings(s, other)
            got.validate(full=True)
            assert got.type == other and got.equals(s.cast(other))
        at = rng.integers(0, len(s), 40) if len(s) else np.zeros(0, np.int64)
        got = take_array(s, at)
        got.validate(full=True)
        assert got.equals(s.take(pa.array(at, pa.int64())))
        dense = take_array(s, np.flatnonzero(to_numpy(s.is_valid())))
        expected = pc.not_equal(dense.slice(1), dense.slice(0, max(len(dense) - 1, 0))).to_pylist() if len(dense) else []
        assert adjacent_differ(dense).tolist() == expected


@pytest.mark.parametrize("numpy_up_to", [arrays.NUMPY_UP_TO, 0])
def test_take_array_and_take_rows_of_numbers_and_booleans_equal_arrows_own(numpy_up_to, monkeypatch):
    monkeypatch.setattr(arrays, "NUMPY_UP_TO", numpy_up_to)
    rng = np.random.default_rng(4)
    cols = {"i": pa.array([1, None, 3, 4, 5, None, 7] * 3, pa.int64()), "u": pa.array(range(21), pa.int32()),
            "f": pa.array([1.5, None, 2.5] * 7), "b": pa.array([True, None, False, True, False, True, True] * 3),
            "s": pa.array(STRINGS[:21])}
    for name, col in cols.items():
        for s in (col, col.slice(3), col.slice(9, 5)):
            at = rng.integers(0, len(s), 30)
            got = take_array(s, at)
            got.validate(full=True)
            assert got.equals(s.take(pa.array(at, pa.int64()))), name
    table = pa.Table.from_batches([pa.record_batch(cols).slice(0, 8), pa.record_batch(cols).slice(8)])
    at = rng.integers(0, table.num_rows, 50)
    got = take_rows(table, at)
    assert got.schema == table.schema and got.equals(table.take(pa.array(at, pa.int64())))
    # Arrow's own take of int64 rows (a table's, an array's), given rows of any integer type
    assert arrow_take(table, at.astype(np.int32)).equals(got)
    assert arrow_take(cols["s"].slice(3), at[:9] % 18).equals(take_array(cols["s"].slice(3), at[:9] % 18))
