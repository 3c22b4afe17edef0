"""neardup.kernels.arrays: the conversions between numpy, Python lists and Arrow that avoid pandas
equal pyarrow's own."""

import numpy as np
import pyarrow as pa
import pytest

from neardup.kernels.arrays import arrow, empty_table, to_numpy, unique


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
