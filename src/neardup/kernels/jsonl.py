"""A compiled reader of plain JSON Lines blocks: the text (and id) of every line, no Python objects.

:func:`extract` takes one block of whole lines (the non-blank ones, after the block's UTF-8
check) and either returns the text field of every line as Arrow buffers (and the id field as
strings, integers written in decimal), or None. It returns None (and the caller parses the block
as before, with pyarrow and ``json.loads``, which name every bad line) unless *every* line is
unremarkable: strict JSON (RFC 8259: no NaN, no trailing commas, no comments), a top-level
object holding the text field once as a string, and the id field once as a string or an integer
of at most 18 digits, no key of over 256 bytes with an escape, no ``\\u0000`` and no unpaired
surrogate escape, no nesting deeper than 64. So the records it accepts are read exactly as
pyarrow and ``json.loads`` read them, and every message about a bad line stays the one of the
slower path.

:func:`scan_block` makes the same first pass over a whole block with its lines found as they are
scanned (a line's bytes, once its newline is found, are in the cache for its scan): the reader's
pass over a block of plain records, where the lines' bounds were a pass of their own before it
(at 1M documents, the parse 1.09 -> 0.79 CPU-s). A block with a line it hands back (a blank one, a
bad one) is read as before: its lines found, the blank ones left out, then :func:`extract`.

It runs without the GIL (in the reading thread, beside the hashing kernels): validating a line
is one pass over its bytes (a string's runs of plain bytes 64 at a time, in explicit vectors:
:func:`neardup.kernels.lanes.byte_mask`), copying the text out a second one (a plain copy when
the text has no escape); about 2-2.8 times less CPU than pyarrow's JSON reader on the benchmark
corpus with 8 bytes a step, 2.4 times less again with 64. The read stage asks for
no copy at all (``in_place``): each text is left where it lies in the block, a text with escapes
decoded over its own bytes, and the kernels hash the spans (:class:`neardup.kernels.shingles.TextSpans`).
"""

from __future__ import annotations

import os
from typing import Optional, Tuple

import numpy as np
import pyarrow as pa

from .arrays import read_only
from .compile import is_cached, kernel
from .lanes import BYTE_LANES, byte_mask, lowest_bit

MAX_DEPTH = 64
MAX_ID_DIGITS = 18  # below 2^63 whatever the digits: pyarrow's int64 and Python's int agree

_QUOTE, _BACKSLASH, _COLON, _COMMA = 34, 92, 58, 44
_LBRACE, _RBRACE, _LBRACKET, _RBRACKET = 123, 125, 91, 93


@kernel(nogil=True)
def _ws(data, p, end):
    while p < end:
        c = data[p]
        if c == 32 or c == 10 or c == 13 or c == 9:
            p += 1
        else:
            break
    return p


@kernel(nogil=True)
def _hex4(data, p, end):
    """The value of 4 hex digits at p, or -1."""
    if p + 4 > end:
        return -1
    v = 0
    for j in range(p, p + 4):
        c = data[j]
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        elif 65 <= c <= 70:
            d = c - 55
        else:
            return -1
        v = v * 16 + d
    return v


@kernel(nogil=True)
def _string_stop(data, p, end):
    """The first position q in [p, end) whose byte ends a run of a string's plain bytes (a quote,
    a backslash or a control byte below 0x20), else ``end``: 64 bytes a step
    (:func:`neardup.kernels.lanes.byte_mask`); or, where fewer than 64 bytes of ``data`` are left
    from some position on, that position, from which the caller goes on byte by byte. The last
    step may look at bytes past ``end`` (a stop among them is ``end``), never past ``data``."""
    n = data.shape[0]
    while p < end and p + BYTE_LANES <= n:
        m = byte_mask(data, p, _QUOTE, _BACKSLASH, 32)
        if m != 0:
            return min(p + lowest_bit(m), end)
        p += BYTE_LANES
    return min(p, end)


@kernel(nogil=True)
def _string(data, p, end):
    """A string whose opening quote is at p: (position after its closing quote, its decoded
    UTF-8 length, whether it has an escape); position -1 when it is not a plain good string.
    Runs of plain bytes are skipped 64 at a time (:func:`_string_stop`)."""
    p += 1
    n = 0
    esc = False
    while p < end:
        q = _string_stop(data, p, end)
        n += q - p
        p = q
        if p >= end:
            break
        c = data[p]
        if c == _QUOTE:
            return p + 1, n, esc
        if c < 32:
            return -1, 0, esc
        if c != _BACKSLASH:
            n += 1
            p += 1
            continue
        esc = True
        if p + 1 >= end:
            return -1, 0, esc
        e = data[p + 1]
        if e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116:
            n += 1
            p += 2
        elif e == 117:  # \uXXXX
            cp = _hex4(data, p + 2, end)
            if cp <= 0 or (0xDC00 <= cp < 0xE000):  # invalid, \u0000, or a lone low surrogate
                return -1, 0, esc
            if 0xD800 <= cp < 0xDC00:  # a high surrogate: a low one must follow
                if p + 7 < end and data[p + 6] == _BACKSLASH and data[p + 7] == 117:
                    lo = _hex4(data, p + 8, end)
                    if 0xDC00 <= lo < 0xE000:
                        n += 4
                        p += 12
                        continue
                return -1, 0, esc
            n += 1 if cp < 0x80 else (2 if cp < 0x800 else 3)
            p += 6
        else:
            return -1, 0, esc
    return -1, 0, esc


@kernel(nogil=True)
def _digits(data, p, end):
    """One or more digits at p: the position after them, or -1."""
    if p >= end or not (48 <= data[p] <= 57):
        return -1
    while p < end and 48 <= data[p] <= 57:
        p += 1
    return p


@kernel(nogil=True)
def _number(data, p, end):
    """A JSON number at p: (position after it or -1, whether it is an integer of at most
    MAX_ID_DIGITS digits, that integer)."""
    neg = False
    if p < end and data[p] == 45:
        neg = True
        p += 1
    if p >= end:
        return -1, False, 0
    c = data[p]
    digits = 0
    v = 0
    if c == 48:
        p += 1
        digits = 1
    elif 49 <= c <= 57:
        while p < end and 48 <= data[p] <= 57:
            if digits < MAX_ID_DIGITS:
                v = v * 10 + (data[p] - 48)
            digits += 1
            p += 1
    else:
        return -1, False, 0
    is_int = digits <= MAX_ID_DIGITS
    if p < end and data[p] == 46:  # fraction
        p = _digits(data, p + 1, end)
        if p < 0:
            return -1, False, 0
        is_int = False
    if p < end and (data[p] == 101 or data[p] == 69):  # exponent
        p += 1
        if p < end and (data[p] == 43 or data[p] == 45):
            p += 1
        p = _digits(data, p, end)
        if p < 0:
            return -1, False, 0
        is_int = False
    return p, is_int, (-v if neg else v)


@kernel(nogil=True)
def _literal(data, p, end):
    """true / false / null at p: the position after it, or -1."""
    c = data[p]
    if c == 116 and p + 4 <= end and data[p + 1] == 114 and data[p + 2] == 117 and data[p + 3] == 101:
        return p + 4
    if (c == 102 and p + 5 <= end and data[p + 1] == 97 and data[p + 2] == 108 and data[p + 3] == 115
            and data[p + 4] == 101):
        return p + 5
    if c == 110 and p + 4 <= end and data[p + 1] == 117 and data[p + 2] == 108 and data[p + 3] == 108:
        return p + 4
    return -1


@kernel(nogil=True)
def _scalar(data, p, end):
    """A string, number or literal at p: the position after it, or -1 (also for { and [)."""
    c = data[p]
    if c == _QUOTE:
        return _string(data, p, end)[0]
    if c == 45 or 48 <= c <= 57:
        return _number(data, p, end)[0]
    return _literal(data, p, end)


@kernel(nogil=True)
def _key_colon(data, p, end):
    """A key (a string) at p, white space and a colon: the position after the colon, or -1."""
    if p >= end or data[p] != _QUOTE:
        return -1
    p = _string(data, p, end)[0]
    if p < 0:
        return -1
    p = _ws(data, p, end)
    if p >= end or data[p] != _COLON:
        return -1
    return p + 1


@kernel(nogil=True)
def _skip_value(data, p, end, stack):
    """Validates one JSON value at p (white space before it skipped); the position after it, or -1."""
    depth = 0
    while True:
        # a value is expected at p
        p = _ws(data, p, end)
        if p >= end:
            return -1
        c = data[p]
        opened = False
        if c == _LBRACE or c == _LBRACKET:
            q = _ws(data, p + 1, end)
            if q < end and ((c == _LBRACE and data[q] == _RBRACE) or (c == _LBRACKET and data[q] == _RBRACKET)):
                p = q + 1  # {} or []
            else:
                if depth >= MAX_DEPTH:
                    return -1
                stack[depth] = c
                depth += 1
                p = q
                opened = True
                if c == _LBRACE:  # its first key
                    p = _key_colon(data, p, end)
                    if p < 0:
                        return -1
        else:
            p = _scalar(data, p, end)
            if p < 0:
                return -1
        if opened:
            continue
        # after a value: close containers, or go on to the next element
        while True:
            if depth == 0:
                return p
            p = _ws(data, p, end)
            if p >= end:
                return -1
            c = data[p]
            top = stack[depth - 1]
            if c == _COMMA:
                p = _ws(data, p + 1, end)
                if top == _LBRACE:
                    p = _key_colon(data, p, end)
                    if p < 0:
                        return -1
                break
            if (c == _RBRACE and top == _LBRACE) or (c == _RBRACKET and top == _LBRACKET):
                depth -= 1
                p += 1
                continue
            return -1


@kernel(nogil=True)
def _key_is(data, a, b, key):
    if b - a != key.shape[0]:
        return False
    for j in range(key.shape[0]):
        if data[a + j] != key[j]:
            return False
    return True


@kernel(nogil=True)
def _scan_id(data, p, end, spans, i):
    """The id field's value at data[p] (a string, or an integer of at most MAX_ID_DIGITS):
    recorded in spans[i, 3:7]; the position after it, or -1 when it is neither."""
    if data[p] == _QUOTE:
        q, n, esc = _string(data, p, end)
        if q < 0:
            return -1
        spans[i, 3] = p + 1
        spans[i, 4] = q - 1
        spans[i, 5] = n
        spans[i, 6] = 1 if esc else 0
        return q
    q, is_int, v = _number(data, p, end)
    if q < 0 or not is_int:
        return -1
    spans[i, 5] = -1
    spans[i, 6] = v
    return q


@kernel(nogil=True)
def _key_of(data, p, q, esc, kn, keybuf, text_key, id_key, want_id):
    """(1 if the key data[p:q] (its quotes included) is the text field, 1 if the id field), the
    key decoded into keybuf when it has escapes; (-1, -1) for an escaped key longer than keybuf."""
    if esc:
        if kn > keybuf.shape[0]:
            return -1, -1
        at = np.int64(0)  # not the constant: it would compile versions for Literal[int](0)
        # (_key_is: a version for the key buffer, one for the block, on purpose)
        _decode_into(data, p + 1, q - 1, keybuf, at)
        is_text = _key_is(keybuf, at, kn, text_key)
        is_id = want_id and _key_is(keybuf, at, kn, id_key)
    else:
        is_text = _key_is(data, p + 1, q - 1, text_key)
        is_id = want_id and _key_is(data, p + 1, q - 1, id_key)
    return (1 if is_text else 0), (1 if is_id else 0)


@kernel(nogil=True)
def _scan_line(data, p, end, text_key, id_key, want_id, spans, i, stack, keybuf):
    """Validates the line data[p:end] (see :func:`_scan`), recording its spans in spans[i]."""
    p = _ws(data, p, end)
    if p >= end or data[p] != _LBRACE:
        return False
    p = _ws(data, p + 1, end)
    seen_text = False
    seen_id = False
    if p < end and data[p] == _RBRACE:
        return False  # {}: no text field
    while True:
        if p >= end or data[p] != _QUOTE:
            return False
        q, kn, esc = _string(data, p, end)
        if q < 0:
            return False
        is_text, is_id = _key_of(data, p, q, esc, kn, keybuf, text_key, id_key, want_id)
        if is_text < 0:
            return False
        p = _ws(data, q, end)
        if p >= end or data[p] != _COLON:
            return False
        p = _ws(data, p + 1, end)
        if p >= end:
            return False
        if is_text:
            if seen_text or data[p] != _QUOTE:
                return False
            q, n, esc = _string(data, p, end)
            if q < 0:
                return False
            spans[i, 0] = p + 1
            spans[i, 1] = q - 1
            spans[i, 2] = n if esc else -1
            seen_text = True
        elif is_id:
            if seen_id:
                return False
            q = _scan_id(data, p, end, spans, i)
            seen_id = True
        else:
            q = _skip_value(data, p, end, stack)
        if q < 0:
            return False
        p = _ws(data, q, end)
        if p >= end:
            return False
        if data[p] == _COMMA:
            p = _ws(data, p + 1, end)
            continue
        if data[p] == _RBRACE:
            p += 1
            break
        return False
    return _ws(data, p, end) == end and seen_text and (seen_id or not want_id)


@kernel(nogil=True)
def _scan(data, starts, ends, lines, text_key, id_key, want_id, spans):
    """Pass 1: validates every line; spans[i] = (text start, text end, decoded length, id start,
    id end, id decoded length or -1 for an integer, the integer). False at the first line that
    is not unremarkable (see the module)."""
    stack = np.empty(MAX_DEPTH, dtype=np.uint8)
    keybuf = np.empty(256, dtype=np.uint8)
    for i in range(lines.shape[0]):
        li = lines[i]
        if not _scan_line(data, starts[li], ends[li], text_key, id_key, want_id, spans, i,
                          stack, keybuf):
            return False
    return True


_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@kernel(nogil=True)
def _line_end(data, p, high):
    """(the first newline at or after p, else the end of data; ``high`` with the bits of the bytes
    of 0x80 and above looked at on the way): 64 bytes a step, the last ones (less than a vector)
    one by one. A step may look at bytes past the newline (the next line's: looked at again)."""
    n = data.shape[0]
    while p + BYTE_LANES <= n:
        high |= byte_mask(data, p, 0, 0, 128) ^ _ALL
        m = byte_mask(data, p, 10, 10, 0)
        if m != 0:
            return p + lowest_bit(m), high
        p += BYTE_LANES
    while p < n:
        high |= np.uint64(data[p] >= 128)
        if data[p] == 10:
            return p, high
        p += 1
    return n, high


@kernel(nogil=True)
def _grown_rows(a, rows):
    """A copy of ``a`` with room for twice its rows, its first ``rows`` kept."""
    out = np.zeros((2 * a.shape[0],) + a.shape[1:], dtype=a.dtype)
    out[:rows] = a[:rows]
    return out


@kernel(nogil=True)
def _scan_block(data, text_key, id_key, want_id):
    """:func:`_scan` of every line of a whole block, each line found as it is scanned (its
    bytes, once its newline is found, in the cache for its scan: one pass over the block where
    the lines' bounds first were another). Returns (-1, spans, whether the block is all ASCII)
    when every line is an unremarkable record; (the number of the first that is not, ...) at
    that line (the rest of the block not looked at). ``spans[:, 7]``: each line's end (its
    newline's position, or the block's end)."""
    n = data.shape[0]
    spans = np.zeros((n // 1024 + 16, 8), dtype=np.int64)
    stack = np.empty(MAX_DEPTH, dtype=np.uint8)
    keybuf = np.empty(256, dtype=np.uint8)
    high = np.uint64(0)
    p = 0
    i = 0
    while p < n:
        e, high = _line_end(data, p, high)
        if i == spans.shape[0]:
            spans = _grown_rows(spans, i)
        if not _scan_line(data, p, e, text_key, id_key, want_id, spans, i, stack, keybuf):
            return i, spans[:0], False
        spans[i, 7] = e  # the line's newline (or the block's end): its bounds, for the write stage
        i += 1
        p = e + 1
    return -1, spans[:i], high == 0


@kernel(nogil=True)
def _put_utf8(out, o, cp):
    if cp < 0x80:
        out[o] = cp
        return o + 1
    if cp < 0x800:
        out[o] = 0xC0 | (cp >> 6)
        out[o + 1] = 0x80 | (cp & 0x3F)
        return o + 2
    if cp < 0x10000:
        out[o] = 0xE0 | (cp >> 12)
        out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[o + 2] = 0x80 | (cp & 0x3F)
        return o + 3
    out[o] = 0xF0 | (cp >> 18)
    out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[o + 3] = 0x80 | (cp & 0x3F)
    return o + 4


@kernel(nogil=True)
def _decode_into(data, a, b, out, o):
    """The string data[a:b] (between its quotes, already validated) decoded into out at o."""
    p = a
    while p < b:
        c = data[p]
        if c != _BACKSLASH:
            out[o] = c
            o += 1
            p += 1
            continue
        e = data[p + 1]
        if e == 117:
            cp = _hex4(data, p + 2, b)
            p += 6
            if 0xD800 <= cp < 0xDC00:
                lo = _hex4(data, p + 2, b)
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                p += 6
            o = _put_utf8(out, o, cp)
            continue
        if e == 98:
            out[o] = 8
        elif e == 102:
            out[o] = 12
        elif e == 110:
            out[o] = 10
        elif e == 114:
            out[o] = 13
        elif e == 116:
            out[o] = 9
        else:  # " \ /
            out[o] = e
        o += 1
        p += 2
    return o


@kernel(nogil=True)
def _decimal_len(v):
    n = 1 if v >= 0 else 2
    v = abs(v)
    while v >= 10:
        v //= 10
        n += 1
    return n


@kernel(nogil=True)
def _offsets(spans, want_id):
    """The offsets of the texts (int64) and ids (int32) of the lines, from their spans."""
    n = spans.shape[0]
    toff = np.zeros(n + 1, dtype=np.int64)
    ioff = np.zeros(n + 1 if want_id else 1, dtype=np.int32)
    for i in range(n):
        tl = spans[i, 2] if spans[i, 2] >= 0 else spans[i, 1] - spans[i, 0]
        toff[i + 1] = toff[i] + tl
        if want_id:
            il = spans[i, 5] if spans[i, 5] >= 0 else _decimal_len(spans[i, 6])
            ioff[i + 1] = ioff[i] + il
    return toff, ioff


@kernel(nogil=True)
def _put_id(data, spans, i, ioff, idata):
    """The id of line i into idata at ioff[i]: an integer in decimal, a string decoded."""
    o = np.int64(ioff[i])  # int32 offsets: as int64, the one version of _decode_into
    if spans[i, 5] < 0:  # an integer, in decimal
        v = spans[i, 6]
        e = ioff[i + 1]
        if v < 0:
            idata[o] = 45
            v = -v
        k = e - 1
        while True:
            idata[k] = 48 + v % 10
            v //= 10
            k -= 1
            if v == 0:
                break
    elif spans[i, 6]:
        _decode_into(data, spans[i, 3], spans[i, 4], idata, o)
    else:
        idata[o:ioff[i + 1]] = data[spans[i, 3]:spans[i, 4]]


@kernel(nogil=True)
def _gather(data, spans, want_id, toff, tdata, ioff, idata):
    """Pass 2: the texts (bytes into tdata at toff) and ids (into idata at ioff) of the lines."""
    n = spans.shape[0]
    for i in range(n):
        a, b = spans[i, 0], spans[i, 1]
        if spans[i, 2] < 0:
            tdata[toff[i]:toff[i + 1]] = data[a:b]
        else:
            _decode_into(data, a, b, tdata, toff[i])
        if want_id:
            _put_id(data, spans, i, ioff, idata)


@kernel(nogil=True)
def _gather_ids(data, spans, ioff, idata):
    """The ids of the lines alone (into idata at ioff)."""
    for i in range(spans.shape[0]):
        _put_id(data, spans, i, ioff, idata)


@kernel(nogil=True)
def _in_place(block, data, spans, want_id, starts, ends, ioff, idata):
    """Pass 2 without a copy of the texts: each text stays where it is in ``data``, a text with
    escapes decoded over its own bytes (the decoded string is never longer than its JSON: an
    escape of 2, 6 or 12 bytes stands for 1, 1-3 or 4; the bytes are written behind the ones
    read). starts[i], ends[i]: where text i is then; the ids into idata at ioff, as
    :func:`_gather` puts them (before a text is decoded: the id is elsewhere on the line).
    ``block``: ``data`` read-only, read through (the versions of the kernels that read, one)."""
    n = spans.shape[0]
    for i in range(n):
        if want_id:
            _put_id(block, spans, i, ioff, idata)
        a, b = spans[i, 0], spans[i, 1]
        starts[i] = a
        if spans[i, 2] < 0:
            ends[i] = b
        else:
            ends[i] = _decode_into(block, a, b, data, a)


class TextBuffers:
    """The buffers the texts of blocks are gathered into, used again once nothing sees them (no
    array, no Arrow buffer: a block's texts live until the kernels have hashed them, a few blocks
    at a time): a fresh 16 MB a block is as many pages to fault in and zero. Thread-safe; at most
    KEEP kept, :meth:`clear` lets them go. Not :class:`neardup.io._streams.BufferPool`, whose
    buffers are bytearrays (resized to each block, read into): a numpy array's is not zeroed and
    gets numpy's huge-page advice (one pool for both, 100k texts read 3 blocks deep: 18.1k page
    faults against 5.3k, best CPU 0.210 against 0.179 s: bench/results/text_pool_tidy23_hold3_16.json)."""

    KEEP = 8

    def __init__(self):
        import threading
        self._lock = threading.Lock()
        self._free: list = []

    def get(self, size: int) -> np.ndarray:
        """``size`` bytes: a view of a kept buffer nothing else sees, or of a new one."""
        import sys
        with self._lock:
            for buf in self._free:
                # references: the list's, the loop's and getrefcount's own; a view adds its own
                if buf.shape[0] >= size and sys.getrefcount(buf) == 3:
                    return buf[:size]
            buf = np.empty(size + size // 4, dtype=np.uint8)
            if len(self._free) < self.KEEP:
                self._free.append(buf)
            return buf[:size]

    def clear(self) -> None:
        with self._lock:
            self._free.clear()


text_buffers = TextBuffers()


COMPILE_FROM_BYTES = 1 << 30  # a source this large compiles the scanner when it is not compiled yet


def worth_it(source_bytes: int) -> bool:
    """Whether to read a source of ``source_bytes`` with the scanner: always once it is compiled
    (in this process, or in numba's disk cache); otherwise only a source of COMPILE_FROM_BYTES or
    more, for which compiling it once (about 10 s, once per neardup version) pays: a small input
    (the first run of a newcomer) is read by pyarrow as fast and compiles nothing more.
    ``NEARDUP_JSONL_SCANNER=1`` uses it always, ``0`` never."""
    choice = os.environ.get("NEARDUP_JSONL_SCANNER", "")
    if choice in ("0", "1"):
        return choice == "1"
    # the kernels every block runs (the ones after them, by the block: _in_place, _gather_ids, _gather)
    if _scan_block.signatures and _offsets.signatures:
        return True
    if source_bytes >= COMPILE_FROM_BYTES:
        return True
    try:  # numba's own check of its index (as neardup.kernels_cached); the layout is not public
        return is_cached(_scan_block) and is_cached(_offsets)
    except Exception:
        return False


def extract(data, starts: np.ndarray, ends: np.ndarray, lines: np.ndarray, text_column: str,
            id_column: Optional[str], in_place: bool = False) -> Optional[Tuple[object, Optional[pa.Array]]]:
    """``(text, ids)`` of the lines ``lines`` of a block (large_string, string or None), or
    None when any of them is not an unremarkable record (see the module). With ``in_place`` the
    texts are a :class:`neardup.kernels.shingles.TextSpans` of the block itself (no copy; the
    escapes of a text decoded over its bytes: ``data`` must then be writable, a ``bytearray``,
    unless no text has an escape, and is changed) instead of an Arrow array; the same strings."""
    block = _block(data)
    lines = np.asarray(lines, dtype=np.int64)
    spans = np.zeros((len(lines), 7), dtype=np.int64)
    if not _scan(block, starts, ends, lines, *_keys(text_column, id_column), spans):
        return None
    return _texts_and_ids(data, spans, id_column is not None, in_place)


def _block(data) -> np.ndarray:
    """What the kernels only read of a block, bytes or a bytearray: one type (a read-only view)."""
    return read_only(np.frombuffer(data, dtype=np.uint8))


def _keys(text_column: str, id_column: Optional[str]):
    """(text key, id key, want_id) as the scanning kernels take them."""
    return (np.frombuffer(text_column.encode("utf-8"), dtype=np.uint8),
            np.frombuffer((id_column or "").encode("utf-8"), dtype=np.uint8), id_column is not None)


class ScannedBlock:
    """What :func:`scan_block` found in a block: ``stop``, the number of its first line that is
    not an unremarkable record (0 for an empty block: one blank line, as the lines of an empty
    block are counted), None when every line is one; and then its lines' number
    (``len(spans)``), whether it is all ASCII (``ascii``), and what :func:`extract` makes of it
    (:meth:`extract`)."""

    __slots__ = ("data", "ascii", "spans", "want_id", "stop")

    def __init__(self, data, ascii, spans, want_id, stop=None):
        self.data, self.ascii, self.spans, self.want_id, self.stop = data, ascii, spans, want_id, stop

    def __len__(self) -> int:
        return len(self.spans)

    def line_ends(self) -> np.ndarray:
        """Each line's end in the block: its newline's position (or the block's end)."""
        return self.spans[:, 7]

    def extract(self, in_place: bool = False) -> Tuple[object, Optional[pa.Array]]:
        """:func:`extract` of every line of the block (its first pass already made)."""
        return _texts_and_ids(self.data, self.spans, self.want_id, in_place)


def scan_block(data, text_column: str, id_column: Optional[str]) -> ScannedBlock:
    """The lines of a whole block found and scanned in one pass (:func:`_scan_block`), or where
    that stopped (``ScannedBlock.stop``). The caller then finds the lines and leaves the blank
    ones out; :func:`extract` of the others would stop at that same line unless it is a blank one
    (the lines after it not scanned yet), so only then is it worth calling. For a block of
    records, the lines and spans that ``neardup.kernels.lines.line_bounds_ascii`` and
    :func:`extract` make, without the pass of the line bounds over the block before the scan."""
    text_key, id_key, want_id = _keys(text_column, id_column)
    if not len(data):
        return ScannedBlock(data, True, np.zeros((0, 7), dtype=np.int64), want_id, stop=0)
    stop, spans, ascii = _scan_block(_block(data), text_key, id_key, want_id)
    return ScannedBlock(data, bool(ascii), spans, want_id, stop=None if stop < 0 else int(stop))


def _texts_and_ids(data, spans: np.ndarray, want_id: bool, in_place: bool):
    """:func:`extract`'s second pass: the texts and ids of the lines whose spans its first made."""
    arr = np.frombuffer(data, dtype=np.uint8)
    block = read_only(arr)
    n = len(spans)
    escapes = in_place and bool((spans[:, 2] >= 0).any())
    if escapes and not arr.flags.writeable:
        in_place = False  # escapes to decode in a buffer that cannot be written: copied out
    toff, ioff = _offsets(spans, want_id)
    idata = np.empty(int(ioff[-1]), dtype=np.uint8)
    if in_place:
        from .shingles import TextSpans
        if escapes:
            tstarts = np.empty(n, dtype=np.int64)
            tends = np.empty(n, dtype=np.int64)
            _in_place(block, arr, spans, want_id, tstarts, tends, ioff, idata)
        else:  # each text as it stands (the buffer may be read-only: bytes)
            tstarts, tends = spans[:, 0].copy(), spans[:, 1].copy()
            if want_id:
                _gather_ids(block, spans, ioff, idata)
        text = TextSpans(arr, tstarts, tends)
    else:
        tdata = text_buffers.get(int(toff[-1]))
        _gather(block, spans, want_id, toff, tdata, ioff, idata)
        text = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(toff), pa.py_buffer(tdata)])
    ids = None
    if want_id:
        ids = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(ioff), pa.py_buffer(idata)])
    return text, ids
