"""Scanning the bytes of a block of text, compiled: where its lines are, which are blank, which
nest JSON too deeply, and where a CSV / TSV file ends inside a quoted field.

Each is one pass over the bytes (no Python object per line), used by the JSONL and CSV readers
(:mod:`neardup.io`) and by the writer of kept lines.
"""

from __future__ import annotations

from codecs import BOM_UTF8
from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

import numpy as np

from .arrays import read_only
from .compile import kernel
from .lanes import BYTE_LANES, bit_count, byte_mask, lowest_bit

_WS = b" \t\r"


@kernel(nogil=True)
def _count_newlines(arr):
    """The newline bytes of arr: 64 bytes a step (:func:`neardup.kernels.lanes.byte_mask`, the
    step's newlines the 1 bits of its mask), the last bytes (less than a vector) one by one."""
    n = arr.shape[0]
    count = 0
    p = 0
    while p + BYTE_LANES <= n:
        count += bit_count(byte_mask(arr, p, 10, 10, 0))
        p += BYTE_LANES
    for i in range(p, n):
        count += arr[i] == 10
    return count


_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@kernel(nogil=True)
def _newlines(arr):
    """``(positions, ascii)``: the newline bytes of arr, and whether every byte is below 0x80.
    One pass, 64 bytes a step (:func:`neardup.kernels.lanes.byte_mask`): each newline's bit
    taken from the step's mask, the bytes of 0x80 and above gathered beside (the ASCII test);
    the last bytes (less than a vector) one by one. The room for the positions, a line of 64
    bytes on average at first, doubles when full."""
    n = arr.shape[0]
    out = np.empty(n // BYTE_LANES + 16, dtype=np.int64)
    k = 0
    high = np.uint64(0)
    p = 0
    while p + BYTE_LANES <= n:
        m = byte_mask(arr, p, 10, 10, 0)
        high |= byte_mask(arr, p, 0, 0, 128) ^ _ALL
        while m != 0:
            if k == out.shape[0]:
                out = _grown(out)
            out[k] = p + lowest_bit(m)
            k += 1
            m &= m - np.uint64(1)
        p += BYTE_LANES
    for i in range(p, n):
        high |= np.uint64(arr[i] >= 128)
        if arr[i] == 10:
            if k == out.shape[0]:
                out = _grown(out)
            out[k] = i
            k += 1
    return out[:k].copy(), high == 0


@kernel(nogil=True)
def _grown(out):
    bigger = np.empty(2 * out.shape[0], dtype=out.dtype)
    bigger[:out.shape[0]] = out
    return bigger


def _scan_newlines(data) -> Tuple[np.ndarray, bool]:
    return _newlines(read_only(np.frombuffer(data, dtype=np.uint8)))  # bytes or a bytearray: one type


def count_newlines(data, size: Optional[int] = None) -> int:
    """The newline bytes of ``data`` (bytes, bytearray: its first ``size`` bytes), 64 bytes a step
    without the GIL (a split file's ranges are all counted before any is read, a pass over the
    whole file)."""
    block = np.frombuffer(data, dtype=np.uint8, count=len(data) if size is None else size)
    return int(_count_newlines(read_only(block)))  # bytes or a bytearray: one type


def newline_positions(data) -> np.ndarray:
    """int64 offsets of the newline bytes of ``data`` (bytes or bytearray), in order: 64 bytes a
    step (:func:`_newlines`; 8 bytes a step was about 4x the byte-by-byte search, which was a
    tenth of the read stage's CPU)."""
    return _scan_newlines(data)[0]


def _bounds(n: int, last_is_newline: bool, nl: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    if last_is_newline:
        ends = nl
        starts = np.empty(len(nl), dtype=np.int64)
        if len(nl):
            starts[0] = 0
            starts[1:] = nl[:-1] + 1
    else:
        ends = np.append(nl, n)
        starts = np.empty(len(ends), dtype=np.int64)
        starts[0] = 0
        starts[1:] = nl + 1
    return starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False)


def line_bounds(data: bytes) -> Tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the lines of a block (``ends`` excludes the newline)."""
    return _bounds(len(data), bool(len(data)) and data[-1] == 10, newline_positions(data))


def line_bounds_ascii(data: bytes) -> Tuple[np.ndarray, np.ndarray, bool]:
    """``(starts, ends, ascii)``: :func:`line_bounds` and, from the same pass over the bytes,
    whether they are all ASCII (then valid UTF-8, with no other check)."""
    nl, is_ascii = _scan_newlines(data)
    return (*_bounds(len(data), bool(len(data)) and data[-1] == 10, nl), bool(is_ascii))


def blank_lines(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sorted indices of the blank (empty or white-space only) lines of a block.

    Only lines that do not start with ``{`` can be blank; those few are checked one by one.
    """
    if len(starts) == 0:
        return np.empty(0, dtype=np.int64)
    arr = np.frombuffer(data, dtype=np.uint8)
    last = max(len(data) - 1, 0)
    first = arr[np.minimum(starts, last)] if len(data) else np.zeros(len(starts), np.uint8)
    cand = np.flatnonzero((starts == ends) | (first != 0x7B))
    if len(cand) == 0:
        return np.empty(0, dtype=np.int64)
    out = [i for i in cand.tolist() if not data[starts[i]:ends[i]].strip(_WS)]
    return np.asarray(out, dtype=np.int64)



# --------------------------------------------------------------------------- JSON nesting

MAX_NESTING = 512  # deepest JSON accepted: json.loads (which recurses per level) reads it anywhere


@kernel(nogil=True)
def _deep_lines(data, starts, ends, lines, limit):
    """The lines (of ``lines``) whose arrays and objects nest more than ``limit`` deep: brackets
    counted outside strings, the first ``limit + 1`` opened ones ending the line's scan."""
    out = np.empty(lines.shape[0], dtype=np.int64)
    k = 0
    for j in range(lines.shape[0]):
        i = lines[j]
        p = starts[i]
        end = ends[i]
        depth = 0
        in_string = False
        while p < end:
            c = data[p]
            if in_string:
                if c == 92:  # backslash: the next byte is escaped
                    p += 1
                elif c == 34:
                    in_string = False
            elif c == 34:
                in_string = True
            elif c == 123 or c == 91:
                depth += 1
                if depth > limit:
                    out[k] = i
                    k += 1
                    break
            elif c == 125 or c == 93:
                depth -= 1
            p += 1
    return out[:k]


def deep_lines(data: bytes, starts: np.ndarray, ends: np.ndarray, lines: np.ndarray,
               limit: int = MAX_NESTING) -> np.ndarray:
    """Indices (among ``lines``' values) of the lines of a block nested more than ``limit``
    deep. A line cannot be when the whole block has no more than ``limit`` opening brackets:
    then nothing is scanned."""
    if len(lines) == 0:
        return np.empty(0, dtype=np.int64)
    arr = np.frombuffer(data, dtype=np.uint8)
    if len(data) <= limit or np.count_nonzero((arr | 0x20) == 0x7B) <= limit:  # '{' and '['
        return np.empty(0, dtype=np.int64)
    return _deep_lines(read_only(arr), starts, ends, np.ascontiguousarray(lines, dtype=np.int64), limit)


# --------------------------------------------------------------------------- CSV quotes

# the CSV lexer's state, an int64 array carried from chunk to chunk
(_CSV_STATE, _CSV_LINE, _CSV_RECORD, _CSV_QUOTE_LINE, _CSV_QUOTE_RECORD, _CSV_PREV_CR, _CSV_LAST,
 _CSV_RECORD_START, _CSV_QUOTE_START, _CSV_SIZE) = range(10)
_IN_QUOTES = 3


@kernel(nogil=True)
def _csv_lex(data, base, delimiter, st):
    """Follow the records of a chunk of CSV / TSV (its first byte at offset ``base`` of the
    file) the way pyarrow's parser does: quote ``"``, a doubled quote inside quotes is a quote,
    a quote inside an unquoted field a plain byte, text after a closing quote continues the
    field, quoted fields may hold line breaks, CR, LF and CRLF end a line, an empty line is no
    record. Updates ``st`` (see the ``_CSV_`` indices): the state (0 at a line's start, 1 at a
    field's start, 2 in an unquoted field, 3 inside quotes, 4 after a quote inside quotes), the
    current physical line (from 1), the number of records begun, the line, record and record
    offset of the last quote opened, whether the previous byte was a CR, the last byte, the
    offset where the current record began."""
    state = st[0]
    line = st[1]
    record = st[2]
    prev_cr = st[5]
    for p in range(data.shape[0]):
        c = data[p]
        is_nl = c == 10 or c == 13
        if state == 0:
            if not is_nl:
                record += 1
                st[7] = base + p
                state = 1
        if state == 1:
            if c == 34:
                state = 3
                st[3] = line
                st[4] = record
                st[8] = st[7]
            elif c == delimiter:
                pass
            elif is_nl:
                state = 0
            else:
                state = 2
        elif state == 2:
            if c == delimiter:
                state = 1
            elif is_nl:
                state = 0
        elif state == 3:
            if c == 34:
                state = 4
        elif state == 4:
            if c == 34:
                state = 3
            elif c == delimiter:
                state = 1
            elif is_nl:
                state = 0
            else:
                state = 2
        if c == 13 or (c == 10 and not prev_cr):
            line += 1
        prev_cr = c == 13
    if data.shape[0]:
        st[6] = data[data.shape[0] - 1]
    st[0] = state
    st[1] = line
    st[2] = record
    st[5] = prev_cr


@dataclass(frozen=True)
class OpenQuote:
    """Where a CSV / TSV file ends inside a quoted field.

    record: the record holding the open quote, counted from 0 (the header) among the non-empty
        ones; line: the physical line (from 1) of that quote; last_line: the file's last line;
    offset: the byte offset (of the decompressed file) where that record begins.
    """

    record: int
    line: int
    last_line: int
    offset: int


def csv_open_quote(chunks: Iterator[bytes], delimiter: bytes) -> Optional[OpenQuote]:
    """Follow the (decompressed) bytes of a CSV / TSV file to its end: where it ends inside a
    quoted field, or None when every quote is closed. One pass, compiled, constant memory: for the
    rare file that needs it (an error message), never for a file that reads well."""
    st = np.zeros(_CSV_SIZE, dtype=np.int64)
    st[_CSV_LINE] = 1
    st[_CSV_LAST] = 10
    base = 0
    first = True
    for chunk in chunks:
        if not chunk:
            continue
        arr = np.frombuffer(chunk, dtype=np.uint8)
        if first:
            first = False
            if chunk.startswith(BOM_UTF8):  # a UTF-8 byte order mark: pyarrow's CSV reader skips it
                arr = arr[3:]
                base = 3
        _csv_lex(arr, base, delimiter[0], st)
        base += len(arr)
    if st[_CSV_STATE] != _IN_QUOTES:
        return None
    last = int(st[_CSV_LINE]) - (1 if st[_CSV_LAST] in (10, 13) else 0)
    return OpenQuote(record=int(st[_CSV_QUOTE_RECORD]) - 1, line=int(st[_CSV_QUOTE_LINE]),
                     last_line=last, offset=int(st[_CSV_QUOTE_START]))
