"""Byte streams of JSONL files: decompression that notices truncation, and blocks of whole lines.

Both gzip and zstd are decoded with decompression objects fed by hand, so that the end of the
compressed stream is checked explicitly: a file that stops before the end of its last gzip
member / zstd frame is reported as truncated instead of silently read short.
"""

from __future__ import annotations

import zlib
from typing import BinaryIO, Iterator, Optional, Tuple

import numpy as np

from . import fs as _fs

BLOCK_BYTES = 16 << 20  # decompressed bytes per block handed to the parser
_READ_BYTES = 1 << 20  # compressed bytes per read
_ZSTD_FEED = 256 << 10  # compressed bytes per zstd call (bounds the output of one call)
_GZIP_OUT = 8 << 20  # most decompressed bytes per zlib call
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BOM = b"\xef\xbb\xbf"
_WS = b" \t\r"


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


def _read_at_least(f: BinaryIO, head: bytes, n: int) -> bytes:
    while len(head) < n:
        more = f.read(_READ_BYTES)
        if not more:
            break
        head += more
    return head


def _gzip_chunks(f: BinaryIO) -> Iterator[bytes]:
    pending = _read_at_least(f, b"", 2)
    if not pending:
        return
    if pending[:2] != _GZIP_MAGIC:
        raise StreamError("not")
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    while True:
        if not pending:
            pending = f.read(_READ_BYTES)
            if not pending:
                try:
                    tail = d.flush()
                except zlib.error as e:
                    raise StreamError("corrupt", str(e)) from None
                if tail:
                    yield tail
                if not d.eof:
                    raise StreamError("truncated")
                return
        try:
            out = d.decompress(pending, _GZIP_OUT)
        except zlib.error as e:
            raise StreamError("corrupt", str(e).replace("Error -3 while decompressing data: ", ""))
        if out:
            yield out
        if d.eof:
            rest = _read_at_least(f, d.unused_data, 2)
            if not rest:
                return
            if rest[:2] == _GZIP_MAGIC:  # another gzip member (concatenated .gz files)
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                pending = rest
                continue
            # like gzip(1), tolerate zero padding after the last member
            while rest and not rest.strip(b"\0"):
                rest = f.read(_READ_BYTES)
            if rest:
                raise StreamError("corrupt", "unexpected data after the end of the gzip stream")
            return
        pending = d.unconsumed_tail


def _zstd_chunks(f: BinaryIO) -> Iterator[bytes]:
    import zstandard

    pending = _read_at_least(f, b"", 4)
    if not pending:
        return
    if not _is_zstd_frame_start(pending):
        raise StreamError("not")
    dctx = zstandard.ZstdDecompressor()
    d = dctx.decompressobj()
    while True:
        if not pending:
            pending = f.read(_READ_BYTES)
            if not pending:
                if not d.eof:
                    raise StreamError("truncated")
                return
        feed, pending = pending[:_ZSTD_FEED], pending[_ZSTD_FEED:]
        try:
            out = d.decompress(feed)
        except zstandard.ZstdError as e:
            raise StreamError("corrupt", str(e)) from None
        if out:
            yield out
        if d.eof:
            rest = _read_at_least(f, d.unused_data + pending, 4)
            if not rest:
                return
            if not _is_zstd_frame_start(rest):
                raise StreamError("corrupt", "unexpected data after the end of the zstd stream")
            d = dctx.decompressobj()  # the next frame
            pending = rest


def raw_chunks(path: str, compression: Optional[str]) -> Iterator[bytes]:
    """Decompressed bytes of a file, in chunks. Raises StreamError or OSError."""
    with _fs.open_input(path) as f:
        if compression is None:
            while True:
                chunk = f.read(BLOCK_BYTES)
                if not chunk:
                    return
                yield chunk
        elif compression == "gzip":
            yield from _gzip_chunks(f)
        elif compression == "zstd":
            yield from _zstd_chunks(f)
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
            data = b"".join(parts) if len(parts) > 1 else parts[0]
            cut = data.rfind(b"\n")
            if cut < 0:  # one line longer than a block: keep reading
                parts = [data]
                continue
            if cut + 1 < len(data):
                rest = data[cut + 1:]
                data = data[: cut + 1]
                parts, size = [rest], len(rest)
            else:
                parts, size = [], 0
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


def line_bounds(data: bytes) -> Tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the lines of a block (``ends`` excludes the newline)."""
    n = len(data)
    arr = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(arr == 10)
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


def is_blank(line: bytes) -> bool:
    return not line.strip(_WS)
