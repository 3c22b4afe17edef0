"""The JSON of a folder's inputs, ``[[path, path, size, mtime_ns], ...]`` as ``json.dumps`` writes
it, made in one compiled loop that does not hold Python's lock (:func:`inputs_json`): discovery
runs it in its stat thread (:mod:`neardup.kernels.filestat`) beside the sources it makes, and the
run's identity (:func:`neardup.stages.identity.run_identity`) takes it instead of encoding 100,000
rows a value at a time (0.09 CPU-s on the main thread with their fingerprint).
"""

from __future__ import annotations

import numpy as np

from .compile import kernel

__all__ = ["inputs_json", "json_available"]

_QUOTE, _BACKSLASH, _COLON, _SLASH, _MINUS, _ZERO = 34, 92, 58, 47, 45, 48


@kernel(nogil=True)
def _digits(v):
    """The characters of the integer ``v`` in decimal (its sign included)."""
    k = 1 if v < 0 else 0
    v = -v if v < 0 else v
    k += 1
    while v >= 10:
        v //= 10
        k += 1
    return k


@kernel(nogil=True)
def _put_int(out, o, v):
    """``v`` in decimal written at ``out[o:]``; returns the position after it."""
    k = _digits(v)
    if v < 0:
        out[o] = _MINUS
        v = -v
    end = o + k
    p = end - 1
    while True:
        out[p] = _ZERO + v % 10
        v //= 10
        p -= 1
        if v == 0:
            break
    return end


@kernel(nogil=True)
def _put(out, o, text):
    for k in range(text.shape[0]):
        out[o + k] = text[k]
    return o + text.shape[0]


@kernel(nogil=True)
def _json_kernel(names, at, size, mtime_ns, open_row, middle, before_size, between):
    n = at.shape[0]
    total = 2 + (2 * (n - 1) if n > 0 else 0)
    ends = np.empty(n, np.int64)
    for i in range(n):
        j = at[i]
        while names[j] != 0:
            c = names[j]
            # a character json.dumps escapes (not printable ASCII, a quote, a backslash), or a URL
            # (``://``: its credentials would be hidden): the rows are encoded in Python instead
            if c < 32 or c > 126 or c == _QUOTE or c == _BACKSLASH or (
                    c == _COLON and names[j + 1] == _SLASH and names[j + 2] == _SLASH):
                return np.empty(0, np.uint8)
            j += 1
        ends[i] = j
        total += 2 * (j - at[i]) + _digits(size[i]) + _digits(mtime_ns[i]) + 12
    out = np.empty(total, np.uint8)
    out[0] = 91  # [
    o = 1
    for i in range(n):
        if i > 0:
            o = _put(out, o, between)
        o = _put(out, o, open_row)
        length = ends[i] - at[i]
        out[o:o + length] = names[at[i]:ends[i]]
        o += length
        o = _put(out, o, middle)
        out[o:o + length] = names[at[i]:ends[i]]
        o += length
        o = _put(out, o, before_size)
        o = _put_int(out, o, size[i])
        o = _put(out, o, between)
        o = _put_int(out, o, mtime_ns[i])
        out[o] = 93  # ]
        o += 1
    out[o] = 93
    if o + 1 != total:  # (cannot happen: the lengths counted are those written)
        return np.empty(0, np.uint8)
    return out


_PARTS = [np.frombuffer(s.encode(), np.uint8) for s in ('["', '", "', '", ', ", ")]


def json_available() -> bool:
    return True


def inputs_json(names: np.ndarray, at: np.ndarray, size: np.ndarray, mtime_ns: np.ndarray) -> np.ndarray:
    """``json.dumps([[p, p, size[i], mtime_ns[i]] for each path p])`` as ASCII bytes, where the
    path of file i starts at ``at[i]`` in ``names`` (NUL-terminated bytes); an empty array where
    a path holds a character JSON escapes or ``://`` (the caller encodes the rows itself)."""
    open_row, middle, before_size, between = _PARTS
    return _json_kernel(names, np.ascontiguousarray(at, np.int64), np.ascontiguousarray(size, np.int64),
                        np.ascontiguousarray(mtime_ns, np.int64), open_row, middle, before_size, between)
