"""Array helpers the stages share.

``arrow``, ``to_numpy`` and ``empty_table`` are ``pa.array``, ``Array.to_numpy`` and
``Schema.empty_table`` for numbers, booleans and strings, built from buffers: pyarrow's own
import pandas (0.2-0.4 s) the first time one of them runs.

``unique`` is ``np.unique(a)`` by sorting: numpy 2.3 and later find the distinct values of an
integer array with a hash table first when no index, inverse or count is asked for, which
measured 15-25 times slower than a sort on this machine (1,000,000 random uint64: 1.7-3.0 s
against 0.11 s; numpy 2.4.6).

``read_only`` is the view of a buffer that the kernels only read: a kernel compiles a version
for each type it is given, a read-only array and a writable one two.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["unique", "arrow", "to_numpy", "empty_table", "read_only"]


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``, as the kernels are given every buffer they only read (bytes,
    Arrow's, a reader's bytearray): one type, so that each kernel compiles one version."""
    v = a.view()
    v.flags.writeable = False
    return v


def unique(a) -> np.ndarray:
    """The sorted distinct values of a 1-d array (``np.unique(a)``, by sorting)."""
    s = np.sort(np.asarray(a).ravel())
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def arrow(a, type=None) -> pa.Array:
    """``pa.array(a, type)``: 1-d integer and float numpy arrays (of ``type``'s width when
    given) become Arrow arrays over the same memory, numpy booleans are packed into bits, lists
    of str (and None) or of numbers of a given numeric type are built from buffers, all without
    importing pandas; anything else goes through ``pa.array``."""
    if isinstance(a, (list, tuple)):
        if type in (pa.string(), pa.large_string()) or (type is None and a and all(isinstance(x, str) for x in a)):
            return _strings(a, type or pa.string())
        if type is not None and (pa.types.is_integer(type) or pa.types.is_floating(type)) and None not in a:
            a = np.asarray(a, dtype=type.to_pandas_dtype())
    if not isinstance(a, np.ndarray):
        return pa.array(a, type) if type is not None else pa.array(a)
    if a.ndim == 1 and a.dtype == np.bool_ and (type is None or type == pa.bool_()):
        bits = np.packbits(a, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(a), [None, pa.py_buffer(bits)])
    if a.ndim == 1 and a.dtype.kind in "iuf" and a.dtype.byteorder in "=|":
        t = pa.from_numpy_dtype(a.dtype)
        if type is None or type == t:
            a = np.ascontiguousarray(a)
            return pa.Array.from_buffers(t, len(a), [None, pa.py_buffer(a)])
    return pa.array(a, type) if type is not None else pa.array(a)


def _strings(values, type) -> pa.Array:
    """A string array of a list of str and None, built from its buffers."""
    n = len(values)
    if any(not isinstance(v, str) and v is not None for v in values):
        return pa.array(values, type)
    encoded = [v.encode("utf-8") if v is not None else b"" for v in values]
    offsets = np.zeros(n + 1, dtype=np.int64 if type == pa.large_string() else np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    valid = None
    nulls = [v is None for v in values]
    if any(nulls):
        valid = pa.py_buffer(np.packbits(~np.array(nulls, dtype=bool), bitorder="little"))
    return pa.Array.from_buffers(type, n, [valid, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
                                 null_count=sum(nulls))


def to_numpy(arr) -> np.ndarray:
    """An Arrow array (or chunked array) as numpy: numbers without nulls as a read-only view of
    their buffer, booleans without nulls unpacked from their bits, anything else by
    ``to_numpy(zero_copy_only=False)``."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if arr.null_count == 0 and arr.type == pa.bool_():
        if n == 0:
            return np.zeros(0, dtype=bool)
        bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little", count=arr.offset + n)[arr.offset:].astype(bool)
    if arr.null_count == 0 and (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        dtype = np.dtype(arr.type.to_pandas_dtype())
        if n == 0:
            return np.zeros(0, dtype=dtype)
        return np.frombuffer(arr.buffers()[1], dtype=dtype, count=arr.offset + n)[arr.offset:]
    return arr.to_numpy(zero_copy_only=False)


def empty_table(schema: pa.Schema) -> pa.Table:
    """``schema.empty_table()`` without importing pandas."""
    return pa.Table.from_batches([], schema=schema)
