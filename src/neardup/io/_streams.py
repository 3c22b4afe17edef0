"""Byte streams of input files: decompression that notices truncation, blocks of whole lines
(JSONL), the JSON lines nested too deeply (:func:`deep_lines`), and where a CSV file ends inside a
quoted field (:func:`csv_open_quote`, for an error message).

gzip and zstd are decoded by pyarrow (``CompressedInputStream``, the codecs Arrow ships, working
outside the GIL), which checks the end of the stream: a file that stops before the end of its
last gzip member / zstd frame raises "Truncated compressed stream" instead of being read short.
The messages name the last complete line before the break; since pyarrow drops the bytes it
had decoded in a read that fails, the (rare) error path decodes the stream again up to the break
to find them (:func:`_tail_before_break`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

import numpy as np
import pyarrow as pa

from .._kernels import kernel
from . import fs as _fs

BLOCK_BYTES = 16 << 20  # decompressed bytes per block handed to the parser
_READ_BYTES = 256 << 10  # decompressed bytes per read (what a failing read may lose, and recover)
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BOM = b"\xef\xbb\xbf"
_WS = b" \t\r"
_AFTER_END = ("incorrect header check", "unknown compression method", "unknown frame descriptor")


class StreamError(Exception):
    """The compressed stream is not what its name says, or it is cut short / damaged.

    kind: ``not`` (no gzip / zstd header), ``truncated`` or ``corrupt``.
    """

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind, detail)
        self.kind = kind
        self.detail = detail

    def describe(self, compression: str, complete_lines: int) -> str:
        """The reason text, e.g. ``truncated gzip stream after line 120``."""
        ext = {"gzip": ".gz", "zstd": ".zst"}.get(compression, "")
        if self.kind == "not":
            return (f"not a {compression} file (the name ends in {ext} but the data does not "
                    f"start with a {compression} header)")
        where = f"after line {complete_lines}" if complete_lines else "before the first complete line"
        if self.kind == "truncated":
            return f"truncated {compression} stream {where}"
        detail = f" ({self.detail})" if self.detail else ""
        return f"corrupt {compression} stream {where}{detail}"


def _is_zstd_frame_start(head: bytes) -> bool:
    if head[:4] == _ZSTD_MAGIC:
        return True
    # skippable frames: magic 0x184D2A50..0x184D2A5F, little-endian
    return len(head) >= 4 and head[1:4] == b"\x2a\x4d\x18" and (head[0] & 0xF0) == 0x50


class _Limited:
    """The first ``limit`` bytes of a binary file (to decode a stream without its padding)."""

    def __init__(self, f, limit: int):
        self.f, self.left = f, limit
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.f.read(n)
        self.left -= len(data)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True
        self.f.close()


def _decoder(path: str, compression: str, limit: Optional[int] = None):
    """A pyarrow stream of the decompressed bytes of a file (native reads for a local file)."""
    if limit is None and not _fs.is_url(path):
        raw = pa.OSFile(path, "r")
    else:
        f = _fs.open_input(path)
        raw = pa.PythonFile(f if limit is None else _Limited(f, limit), mode="r")
    return pa.CompressedInputStream(raw, compression)


def _read_all(stream, skip: int) -> Tuple[bytes, Optional[str]]:
    """Skip ``skip`` bytes, then read to the end or the break one byte at a time: the bytes
    decoded before the break (none lost) and the error text (None at a clean end)."""
    try:
        while skip:
            skip -= len(stream.read(min(skip, 1 << 20)))
    except OSError as e:  # pragma: no cover - the same bytes decoded fine a moment ago
        return b"", str(e)
    out = bytearray()
    read = stream.read
    try:
        while True:
            c = read(1)
            if not c:
                return bytes(out), None
            out += c
    except OSError as e:
        return bytes(out), str(e)


def _tail_before_break(path: str, compression: str, done: int) -> Tuple[bytes, str]:
    with _decoder(path, compression) as stream:
        tail, err = _read_all(stream, done)
    return tail, err or "unexpected end"


def _padding_ok(path: str, compression: str, total: int) -> bool:
    """Whether the data after the last gzip member is zero padding (which gzip(1) accepts):
    the stream without its trailing zero bytes (up to 8 of which may be its own trailer) decodes
    cleanly to the ``total`` bytes already seen."""
    size = _fs.info(path).size
    with _fs.open_input(path) as f:
        f.seek(max(size - (1 << 16), 0))
        end = f.read()
    zeros = len(end) - len(end.rstrip(b"\0"))
    if zeros == 0:
        return False
    for keep in range(0, min(zeros, 8) + 1):
        limit = size - zeros + keep
        with _decoder(path, compression, limit) as stream:
            out, err = _read_all_fast(stream)
        if err is None:
            return out == total
    return False


def _read_all_fast(stream) -> Tuple[int, Optional[str]]:
    n = 0
    try:
        while True:
            c = stream.read(1 << 20)
            if not c:
                return n, None
            n += len(c)
    except OSError as e:
        return n, str(e)


def _detail(err: str) -> str:
    for prefix in ("zlib inflate failed: ", "ZSTD decompress failed: "):
        if err.startswith(prefix):
            return err[len(prefix):]
    return err


def _compressed_chunks(path: str, compression: str, f) -> Iterator[bytes]:
    head = f.read(4)
    if not head:
        return
    if compression == "gzip" and head[:2] != _GZIP_MAGIC:
        raise StreamError("not")
    if compression == "zstd" and not _is_zstd_frame_start(head + f.read(4 - len(head))):
        raise StreamError("not")
    done = 0
    with _decoder(path, compression) as stream:
        try:
            while True:
                chunk = stream.read(_READ_BYTES)
                if not chunk:
                    return
                done += len(chunk)
                yield chunk
        except OSError as e:
            if _fs.is_url(path) and not str(e).startswith(("zlib", "ZSTD", "Truncated")):
                raise  # the store, not the stream
            first = str(e)
    tail, err = _tail_before_break(path, compression, done)
    if tail:
        yield tail
    total = done + len(tail)
    low = err.lower()
    if "truncated compressed stream" in low:
        raise StreamError("truncated")
    if total and any(x in low for x in _AFTER_END):
        if compression == "gzip" and _padding_ok(path, compression, total):
            return
        raise StreamError("corrupt", f"unexpected data after the end of the {compression} stream")
    raise StreamError("corrupt", _detail(err or first))


def raw_chunks(path: str, compression: Optional[str]) -> Iterator[bytes]:
    """Decompressed bytes of a file, in chunks. Raises StreamError or OSError."""
    with _fs.open_input(path) as f:
        if compression is None:
            while True:
                chunk = f.read(BLOCK_BYTES)
                if not chunk:
                    return
                yield chunk
        elif compression in ("gzip", "zstd"):
            yield from _compressed_chunks(path, compression, f)
        else:  # pragma: no cover - Source.compression is validated by discover
            raise ValueError(f"unknown compression {compression!r}")


def _strip_bom(chunks: Iterator[bytes]) -> Iterator[bytes]:
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) >= 3:
            break
    if head.startswith(_BOM):
        head = head[3:]
    if head:
        yield head
    yield from chunks


def iter_blocks(path: str, compression: Optional[str],
                block_bytes: Optional[int] = None) -> Iterator[bytes]:
    """Blocks of whole lines (each but possibly the last ends with ``\\n``), about
    ``block_bytes`` each; a UTF-8 byte order mark at the start of the file is dropped.

    When the stream breaks (StreamError), the complete lines before the break are yielded first,
    then the error is raised: a partial last line is part of the truncation.
    """
    block_bytes = block_bytes or BLOCK_BYTES
    parts = []
    size = 0
    try:
        for chunk in _strip_bom(raw_chunks(path, compression)):
            parts.append(chunk)
            size += len(chunk)
            if size < block_bytes:
                continue
            # cut after the last newline of the last chunk (none there: a long line, read on);
            # the block is built with one copy, the bytes after the cut carried to the next
            cut = chunk.rfind(b"\n")
            if cut < 0:
                continue
            if len(parts) == 1 and cut + 1 == len(chunk):
                data = chunk
            else:
                parts[-1] = memoryview(chunk)[:cut + 1]
                data = b"".join(parts)
            rest = chunk[cut + 1:]
            parts, size = ([rest], len(rest)) if rest else ([], 0)
            yield data
    except StreamError:
        data = b"".join(parts)
        cut = data.rfind(b"\n")
        if cut >= 0:
            yield data[: cut + 1]
        raise
    if parts:
        data = b"".join(parts)
        if data:
            yield data


@kernel()
def _newlines(arr):
    """Positions of the newline bytes of arr (two passes: no array as large as the block)."""
    count = 0
    for i in range(arr.shape[0]):
        count += arr[i] == 10
    out = np.empty(count, dtype=np.int64)
    k = 0
    for i in range(arr.shape[0]):
        if arr[i] == 10:
            out[k] = i
            k += 1
    return out


def line_bounds(data: bytes) -> Tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the lines of a block (``ends`` excludes the newline)."""
    n = len(data)
    arr = np.frombuffer(data, dtype=np.uint8)
    nl = _newlines(arr)
    if n and data[-1] == 10:
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
    return _deep_lines(arr, starts, ends, np.ascontiguousarray(lines, dtype=np.int64), limit)


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
            if chunk.startswith(_BOM):  # pyarrow skips it
                arr = arr[3:]
                base = 3
        _csv_lex(arr, base, delimiter[0], st)
        base += len(arr)
    if st[_CSV_STATE] != _IN_QUOTES:
        return None
    last = int(st[_CSV_LINE]) - (1 if st[_CSV_LAST] in (10, 13) else 0)
    return OpenQuote(record=int(st[_CSV_QUOTE_RECORD]) - 1, line=int(st[_CSV_QUOTE_LINE]),
                     last_line=last, offset=int(st[_CSV_QUOTE_START]))
