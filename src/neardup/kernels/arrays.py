"""Array helpers the stages share.

``arrow``, ``to_numpy`` and ``empty_table`` are ``pa.array``, ``Array.to_numpy`` and
``Schema.empty_table`` for numbers, booleans and strings, built from buffers: pyarrow's own
import pandas (0.2-0.4 s) the first time one of them runs.

``unique`` is ``np.unique(a)`` by sorting: numpy 2.3 and later find the distinct values of an
integer array with a hash table first when no index, inverse or count is asked for, which
measured 15-25 times slower than a sort on this machine (1,000,000 random uint64: 1.7-3.0 s
against 0.11 s; numpy 2.4.6).

``string_offsets``, ``cast_strings``, ``take_array``, ``adjacent_differ`` and ``take_rows`` are a
string array's offsets, ``Array.cast`` between string and large_string, ``Array.take``,
``pc.not_equal`` of neighbours and ``Table.take``, from the buffers: Arrow's own import pyarrow.compute, 25-31 CPU-ms at a run's start
(issue 32). ``arrow_take`` is Arrow's own take, for a caller that has imported it.

``read_only`` is the view of a buffer that the kernels only read: a kernel compiles a version
for each type it is given, a read-only array and a writable one two.

``system_pool`` has Arrow's allocations of a block of code made by the system allocator
(glibc's malloc) instead of Arrow's default pool (mimalloc).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pyarrow as pa

__all__ = ["unique", "arrow", "to_numpy", "empty_table", "read_only", "string_offsets", "cast_strings", "take_array",
           "adjacent_differ", "take_rows", "arrow_take", "system_pool"]


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


def string_offsets(arr: pa.Array) -> np.ndarray:
    """The offsets (int64, one more than the strings) of a string or large_string array, a
    slice's own, read from its buffer."""
    wide = pa.types.is_large_string(arr.type)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr) + 1, np.int64)
    return np.frombuffer(buf, np.int64 if wide else np.int32, count=len(arr) + 1,
                         offset=(8 if wide else 4) * arr.offset).astype(np.int64, copy=False)


def cast_strings(arr: pa.Array, type) -> pa.Array:
    """``arr.cast(type)`` for a string or large_string array and ``type`` one of them, built from
    its buffers: Arrow's cast imports pyarrow.compute, 25-31 CPU-ms at a run's start (issue 32).
    ``arr`` itself when it has that type; signed integers without nulls (ids) to strings by
    :func:`decimal_strings`; any other type, a slice with nulls and offsets past int32 go through
    Arrow's cast."""
    if arr.type == type:
        return arr
    kinds = (pa.string(), pa.large_string())
    if type == pa.string() and arr.null_count == 0 and arr.type in (pa.int64(), pa.int32(), pa.int16(), pa.int8()):
        return decimal_strings(to_numpy(arr))  # integer ids (pyarrow's JSON reader)
    if arr.type not in kinds or type not in kinds or (arr.null_count and arr.offset):
        return arr.cast(type)
    offsets = string_offsets(arr)
    start, end = int(offsets[0]), int(offsets[-1])
    if type == pa.string() and end - start > np.iinfo(np.int32).max:
        return arr.cast(type)  # (Arrow's error)
    data = arr.buffers()[2]
    data = data.slice(start, end - start) if data is not None else pa.py_buffer(b"")
    offsets = (offsets - start).astype(np.int64 if type == pa.large_string() else np.int32)
    return pa.Array.from_buffers(type, len(arr), [arr.buffers()[0] if arr.null_count else None,
                                                  pa.py_buffer(offsets), data], null_count=arr.null_count)


def decimal_strings(numbers, prefix: str = "") -> pa.Array:
    """A string array: ``prefix`` followed by each of ``numbers`` (int64, or narrower) in decimal,
    as Arrow's cast of integers to strings writes them, built in numpy from the buffers. Arrow's
    cast imports pyarrow.compute (33 CPU-ms) and a process's first cast of integers to strings
    costs 156-167 CPU-ms more (Arrow's set-up of its casts): a run whose records have no ids
    (positional ids, :func:`neardup.io.columns.positional_ids`) paid both in its clusters stage
    (100k: 0.17 -> 0.02 s), and one whose integer ids pyarrow's JSON reader reads in its read
    stage. 37 CPU-ms for 215,000 numbers (a 1M run's cluster members) against Arrow's 22 once set
    up."""
    numbers = np.asarray(numbers, dtype=np.int64)
    head = np.frombuffer(prefix.encode("utf-8"), dtype=np.uint8)
    n = len(numbers)
    negative = numbers < 0
    magnitude = numbers.astype(np.uint64)  # two's complement: -x as uint64 is 2**64 - x
    np.negative(magnitude, out=magnitude, where=negative)  # |x|, int64's least included
    digits = np.ones(n, dtype=np.int64)
    for k in range(1, 20):  # |x| < 2**63 has at most 19 digits
        digits += magnitude >= np.uint64(10 ** k)
    width = digits + negative + len(head)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(width, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError("decimal_strings: more than 2 GiB of strings")  # (pa.string's offsets)
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    for j in range(len(head)):
        data[starts + j] = head[j]
    data[starts[negative] + len(head)] = ord("-")
    rest = magnitude.copy()
    ten = np.uint64(10)
    for d in range(int(digits.max()) if n else 0):  # the last digit first
        at = np.flatnonzero(digits > d)
        data[ends[at] - 1 - d] = (rest[at] % ten).astype(np.uint8) + ord("0")
        rest //= ten
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])


# Up to this many values, take_array and adjacent_differ work in numpy and a run imports no
# pyarrow.compute (25-31 CPU-ms); above, Arrow's kernels (a take of strings 0.5 ms a 100,000
# against numpy's 4, their comparison 0.7 against 8) repay its import: at 100,000 documents a
# run's largest take is of its ~21,500 cluster members, at 1M of ~215,000.
NUMPY_UP_TO = 100_000


def take_array(arr: pa.Array, indices) -> pa.Array:
    """``arr.take(indices)`` (numpy indices, none null) gathered in numpy for an array of
    numbers, booleans or strings, nulls and all, of up to NUMPY_UP_TO indices (``Array.take``
    imports pyarrow.compute); more, or any other type, through Arrow's take."""
    at = np.asarray(indices, np.int64)
    strings = arr.type in (pa.string(), pa.large_string())
    if len(at) > NUMPY_UP_TO or not (strings or arr.type == pa.bool_() or pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        return arrow_take(arr, at)
    valid, nulls = None, 0
    if arr.null_count:
        bits = _bits(arr.buffers()[0], arr)[at]
        valid, nulls = pa.py_buffer(np.packbits(bits, bitorder="little")), int(len(at) - bits.sum())
    if not strings:
        values = (np.packbits(_bits(arr.buffers()[1], arr)[at], bitorder="little") if arr.type == pa.bool_()
                  else np.frombuffer(arr.buffers()[1], arr.type.to_pandas_dtype(), count=arr.offset + len(arr))[arr.offset:][at])
        return pa.Array.from_buffers(arr.type, len(at), [valid, pa.py_buffer(values)], null_count=nulls)
    offsets = string_offsets(arr)
    starts = offsets[at]
    lengths = offsets[at + 1] - starts
    out = np.zeros(len(at) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    data = _string_data(arr)[np.repeat(starts - out[:-1], lengths) + np.arange(out[-1])]
    out = out.astype(np.int32) if arr.type == pa.string() else out
    return pa.Array.from_buffers(arr.type, len(at), [valid, pa.py_buffer(out), pa.py_buffer(data)], null_count=nulls)


def _bits(buf, arr: pa.Array) -> np.ndarray:
    """A bitmap of ``arr`` (its validity or a boolean array's values) unpacked, a slice's own."""
    return np.unpackbits(np.frombuffer(buf, np.uint8), bitorder="little", count=arr.offset + len(arr))[arr.offset:].view(bool)


def adjacent_differ(arr: pa.Array) -> np.ndarray:
    """``arr[1:] != arr[:-1]`` (bool, one less than the strings) of a string or large_string
    array without nulls, compared in numpy up to NUMPY_UP_TO strings (``pc.not_equal`` imports
    pyarrow.compute), by Arrow above."""
    if len(arr) > NUMPY_UP_TO:
        import pyarrow.compute as pc
        return to_numpy(pc.not_equal(arr.slice(1), arr.slice(0, len(arr) - 1)))
    offsets = string_offsets(arr)
    lengths = np.diff(offsets)
    differ = lengths[1:] != lengths[:-1]
    pairs = np.flatnonzero(~differ & (lengths[1:] > 0))  # of one length, not empty: their bytes compared
    size = lengths[1:][pairs]
    if len(pairs):
        ends = np.cumsum(size)
        within = np.arange(ends[-1]) - np.repeat(ends - size, size)
        data = _string_data(arr)
        mismatch = (data[np.repeat(offsets[1:-1][pairs], size) + within]
                    != data[np.repeat(offsets[:-2][pairs], size) + within])
        differ[pairs] = np.logical_or.reduceat(mismatch, ends - size)
    return differ


def _string_data(arr: pa.Array) -> np.ndarray:
    """The bytes of a string array's data buffer (uint8; empty when it has none)."""
    data = arr.buffers()[2]
    return np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)


def take_rows(table: pa.Table, rows) -> pa.Table:
    """``table.take(rows)``, each column by :func:`take_array` (``Table.take`` imports
    pyarrow.compute)."""
    return pa.table([take_array(c.combine_chunks(), rows) for c in table.columns], schema=table.schema)


def arrow_take(values, rows):
    """``values.take(rows)`` (an Array or a Table; ``rows`` numpy, none null) by Arrow's own take,
    the rows as int64: what :func:`take_array` and :func:`take_rows` do without
    pyarrow.compute, for a caller that has it imported (or pays its import: 25-31 CPU-ms).
    Arrow's take has no kernel for ``string_view`` and ``binary_view`` (as
    ``polars.DataFrame.to_arrow(compat_level=...newest)`` gives them), alone or inside lists and
    structs: such values are taken as their large counterparts and cast back, so that the rows
    come back with the types given (a list view's take gathers its offsets: it needs none)."""
    at = arrow(np.asarray(rows, np.int64))
    given = values.schema if isinstance(values, pa.Table) else values.type
    plain = _viewless_schema(given) if isinstance(values, pa.Table) else _viewless(given)
    if plain == given:
        return values.take(at)
    return values.cast(plain).take(at).cast(given)


def _viewless(t: pa.DataType) -> pa.DataType:
    """``t`` with every ``string_view`` and ``binary_view`` in it (at any depth of lists and
    structs) as its large counterpart, which Arrow's take has kernels for."""
    if t == pa.string_view():
        return pa.large_string()
    if t == pa.binary_view():
        return pa.large_binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        field = t.value_field.with_type(_viewless(t.value_type))
        return (pa.large_list(field) if pa.types.is_large_list(t)
                else pa.list_(field, t.list_size) if pa.types.is_fixed_size_list(t) else pa.list_(field))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_viewless(f.type)) for f in t])
    return t


def _viewless_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(_viewless(f.type)) for f in schema], metadata=schema.metadata)


@contextlib.contextmanager
def system_pool():
    """Arrow's allocations within the block (every thread's, where no pool is named) made by the
    system allocator (``pa.system_memory_pool()``), Arrow's default pool set back after it. Buffers
    go back to the pool that made them, so that the swap is safe for arrays made before the block
    or kept after it. Where each caller gains is said at its call."""
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(before)
