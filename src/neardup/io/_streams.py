"""Byte streams of input files: decompression that notices truncation, blocks of whole lines
(JSONL), the JSON lines nested too deeply (:func:`deep_lines`), and where a CSV file ends inside a
quoted field (:func:`csv_open_quote`, for an error message).

gzip and zstd are decoded by pyarrow (``CompressedInputStream``, the codecs Arrow ships, working
outside the GIL), which checks the end of the stream: a file that stops before the end of its
last gzip member / zstd frame raises "Truncated compressed stream" instead of being read short.
The messages name the last complete line before the break; since pyarrow drops the bytes it
had decoded in a read that fails, the (rare) error path decodes the stream again up to the break
to find them (:func:`_tail_before_break`). bz2 and xz are decoded by the standard library
(:func:`neardup.io.compressed.stdlib_chunks`), with the same checks.
"""

from __future__ import annotations

import threading
from codecs import BOM_UTF8
from typing import Iterator, List, Optional, Tuple

import pyarrow as pa

from .compressed import StreamError, stdlib_chunks
from .forward_file import ForwardFile
from .page_cache import DropBehind, given_back
from .storage import fs as _fs

BLOCK_BYTES = 16 << 20  # decompressed bytes per block handed to the parser
_READ_BYTES = 256 << 10  # decompressed bytes per read (what a failing read may lose, and recover)
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_AFTER_END = ("incorrect header check", "unknown compression method", "unknown frame descriptor")
_DROP_EVERY = 16  # decompressed reads between two calls that give back the pages passed (~4 MB)


def _is_zstd_frame_start(head: bytes) -> bool:
    if head[:4] == _ZSTD_MAGIC:
        return True
    # skippable frames: magic 0x184D2A50..0x184D2A5F, little-endian
    return len(head) >= 4 and head[1:4] == b"\x2a\x4d\x18" and (head[0] & 0xF0) == 0x50


class _Limited(ForwardFile):
    """The first ``limit`` bytes of a binary file (to decode a stream without its padding)."""

    def __init__(self, f, limit: int):
        self.f, self.left = f, limit

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.f.read(n)
        self.left -= len(data)
        return data

    def close(self) -> None:
        super().close()
        self.f.close()


def _decoder(path: str, compression: str, limit: Optional[int] = None):
    """A pyarrow stream of the decompressed bytes of a file (native reads for a local file)."""
    local = _fs.os_path(path)
    if limit is None and local is not None:
        raw = pa.OSFile(local, "r")
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
    local = _fs.os_path(path)
    # a local file's pages that this read brings into the page cache given back behind it
    # (neardup.io.page_cache; asked before the first bytes are read, and at the end what its
    # reads brought in past where it stopped): the raw file is pyarrow's, its place asked every
    # few chunks
    with given_back(local, f) as drop:
        yield from _compressed_chunks_of(path, compression, f, local, drop)


def _compressed_chunks_of(path: str, compression: str, f, local: Optional[str],
                          drop: Optional[DropBehind]) -> Iterator[bytes]:
    head = f.read(4)
    if not head:
        return
    if compression == "gzip" and head[:2] != _GZIP_MAGIC:
        raise StreamError("not")
    if compression == "zstd" and not _is_zstd_frame_start(head + f.read(4 - len(head))):
        raise StreamError("not")
    done = 0
    raw = pa.OSFile(local, "r") if drop is not None else None
    with (_decoder(path, compression) if raw is None else pa.CompressedInputStream(raw, compression)) as stream:
        try:
            k = 0
            while True:
                chunk = stream.read(_READ_BYTES)
                if not chunk:
                    return
                done += len(chunk)
                k += 1
                if drop is not None and k % _DROP_EVERY == 0:
                    drop.advance(raw.tell())
                yield chunk
        except OSError as e:
            if local is None and not str(e).startswith(("zlib", "ZSTD", "Truncated")):
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


def raw_chunks(path: str, compression: Optional[str],
               span: Optional[Tuple[int, int]] = None) -> Iterator[bytes]:
    """Decompressed bytes of a file, in chunks. Raises StreamError or OSError. ``span``:
    the bytes [start, end) of an uncompressed file only (a range of a split file)."""
    with _fs.open_input(path) as f:
        if compression is None:
            left = None
            if span is not None:
                f.seek(span[0])
                left = span[1] - span[0]
            pos = 0 if span is None else span[0]
            with given_back(_fs.os_path(path), f, span) as drop:  # (see _compressed_chunks)
                while left is None or left > 0:
                    chunk = f.read(BLOCK_BYTES if left is None else min(BLOCK_BYTES, left))
                    if not chunk:
                        return
                    if left is not None:
                        left -= len(chunk)
                    pos += len(chunk)
                    if drop is not None:
                        drop.advance(pos)
                    yield chunk
        elif compression in ("gzip", "zstd"):
            yield from _compressed_chunks(path, compression, f)
        elif compression in ("bz2", "xz"):  # the standard library's decoders
            yield from stdlib_chunks(compression, f)
        else:  # pragma: no cover - Source.compression is validated by discover
            raise ValueError(f"unknown compression {compression!r}")


def _strip_bom(chunks: Iterator[bytes]) -> Iterator[bytes]:
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) >= 3:
            break
    if head.startswith(BOM_UTF8):
        head = head[3:]
    if head:
        yield head
    yield from chunks


def iter_blocks(path: str, compression: Optional[str],
                block_bytes: Optional[int] = None, span: Optional[Tuple[int, int]] = None,
                recycle: Optional[BufferPool] = None) -> Iterator[bytes]:
    """Blocks of whole lines (each but possibly the last ends with ``\\n``), about
    ``block_bytes`` each; a UTF-8 byte order mark at the start of the file is dropped.
    ``span``: only the bytes [start, end) of an uncompressed file, a range of whole lines
    (:mod:`neardup.io.splits`; the mark is dropped only in the range that starts at 0).

    When the stream breaks (StreamError), the complete lines before the break are yielded first,
    then the error is raised: a partial last line is part of the truncation.

    ``recycle``: a pool the caller puts each block back into (:meth:`BufferPool.put`) once it holds
    no reference to it (nor a view of it: a numpy array, a pyarrow buffer): the blocks of an
    uncompressed local file are then ``bytearray`` s read straight into a buffer used again for a later block (no fresh
    pages to fault in, no copy to join the pieces of a block: a tenth of the read stage's
    system time). The same blocks, cut at the same places, as without it.
    """
    block_bytes = block_bytes or BLOCK_BYTES
    if recycle is not None and compression is None and _fs.os_path(path) is not None and BLOCK_BYTES >= 3:
        yield from _plain_blocks(path, block_bytes, span, recycle)
        return
    parts = []
    size = 0
    try:
        chunks = raw_chunks(path, compression, span)
        for chunk in (_strip_bom(chunks) if span is None or span[0] == 0 else chunks):
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


class BufferPool:
    """The buffers blocks of whole lines are read into (:func:`iter_blocks`' ``recycle``): each
    put back once its block is parsed, and read into again by a later block once nothing sees it
    (no numpy array, no pyarrow buffer: the texts of its block not yet hashed): no fresh pages to
    fault in. Thread-safe (two ranges of a split file read at once share one); at most KEEP kept,
    :meth:`clear` lets them go. Bytearrays, not the numpy arrays of the scanner's texts' pool
    (:class:`neardup.kernels.jsonl.TextBuffers`): a block is read into its buffer after the bytes
    carried from the last one and cut at its last line, and a resize refused tells a buffer seen."""

    KEEP = 12  # the blocks of texts still hashed among them: two ranges' at once
    HEADROOM = 1 << 20  # bytes a new buffer is allocated beyond its first block (see take)

    def __init__(self):
        self._lock = threading.Lock()
        self._kept: List[bytearray] = []

    def put(self, buf: bytearray) -> None:
        """``buf`` kept for a later block (the caller holds no reference to it any more)."""
        with self._lock:
            self._kept.append(buf)

    def take(self, size: int, keep: bytes) -> bytearray:
        """A buffer of ``size`` bytes that starts with ``keep``: a kept one that can be resized,
        or a new one. A buffer still exported (seen by a numpy array or a pyarrow buffer) cannot
        be: it stays kept for a later block (never written while seen), up to KEEP of them.

        A new buffer is made HEADROOM bytes longer and cut back to ``size`` (a bytearray keeps
        its allocation when cut by less than half): the next blocks it holds, a few KB longer or
        shorter each (a block ends after the last line that fits), are then resized in place,
        not moved by a ``realloc`` with fresh pages to fault in. A kept buffer less than half
        ``size`` long (a short block copied out, :func:`_plain_blocks`) is let go, not grown."""
        with self._lock:
            buf = self._reusable(size)
        if buf is None:
            buf = bytearray(size + self.HEADROOM)
            del buf[size:]
        elif len(buf) < size:
            buf.extend(bytes(size - len(buf)))
        elif len(buf) > size:
            del buf[size:]
        buf[:len(keep)] = keep
        return buf

    def _reusable(self, size: int) -> Optional[bytearray]:
        """A kept buffer that nothing sees, taken out; or None (the oldest still seen let go
        beyond KEEP - 1, and those less than half ``size`` long that nothing sees)."""
        kept = self._kept
        for k in range(len(kept) - 1, -1, -1):
            buf = kept[k]
            try:
                if len(buf):
                    buf.pop()  # a resize (even to the same size, the check is skipped): refused while exported
            except BufferError:  # still seen through a view: left alone
                continue
            del kept[k]
            if 2 * (len(buf) + 1) < size:  # (one byte popped)
                continue  # a short one: let go
            return buf
        del kept[:max(0, len(kept) - self.KEEP + 1)]  # the oldest still seen let go
        return None

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


# the buffers of the blocks the read stage reads in this process, put back by read_jsonl and used
# again by the next block of any file or range: a range of a split file holds only ~4 blocks, all
# still seen while it reads (queued, parsed, hashed), so a pool of its own never gave one back
# (1M documents: 144 blocks, 144 new buffers, 2.4 GB zeroed); cleared with the read stage's buffers
block_buffers = BufferPool()


def _plain_blocks(path: str, block_bytes: int, span: Optional[Tuple[int, int]],
                  recycle: BufferPool) -> Iterator[bytearray]:
    """:func:`iter_blocks` of an uncompressed local file, read into buffers used again: reads
    of BLOCK_BYTES (the pieces of :func:`raw_chunks`) go straight into the buffer after the
    bytes carried from the previous block; a block is cut after the last newline of its last
    read once it holds ``block_bytes`` or more, as :func:`iter_blocks` cuts."""
    read_bytes = BLOCK_BYTES
    local = _fs.os_path(path)
    with open(local, "rb", buffering=0) as f, given_back(local, f, span) as drop:  # (see _compressed_chunks)
        yield from _plain_blocks_of(f, block_bytes, span, recycle, drop, read_bytes)


def _plain_blocks_of(f, block_bytes: int, span: Optional[Tuple[int, int]], recycle: BufferPool,
                     drop: Optional[DropBehind], read_bytes: int) -> Iterator[bytearray]:
    left = None
    if span is not None:
        f.seek(span[0])
        left = span[1] - span[0]
    keep = b""
    head = 0  # bytes of the first read taken ahead (the mark, or the start of the first line)
    if span is None or span[0] == 0:  # the byte order mark, as _strip_bom drops it
        first = _read_full(f, 3 if left is None else min(3, left))
        if left is not None:
            left -= len(first)
        keep = b"" if first == BOM_UTF8 else first
        head = len(first)
    buf = None
    filled = len(keep)
    while True:
        # each read ends where raw_chunks' does; the first one is short by the bytes read ahead
        want = (read_bytes if left is None else min(read_bytes, left + head)) - head
        if buf is None:
            buf = recycle.take(max(filled + want, block_bytes), keep)
        elif len(buf) < filled + want:
            buf.extend(bytes(filled + want - len(buf)))
        got = _readinto_full(f, buf, filled, want) if want > 0 else 0
        if left is not None:
            left -= got
        if drop is not None:
            drop.advance(f.tell())
        if got + head == 0:
            break
        # a read short of what it asked: the file's end (the read after it would find none: not
        # made, nor the buffer grown by a read's length for it; a file of 8-16 MB grew to 24-32)
        ended = got < want
        # the read's bytes in buf: from 0 for the first (the start of the first line with it)
        start, filled = (0 if head else filled), filled + got
        head = 0
        if filled < block_bytes:
            if ended:
                break
            continue
        cut = buf.rfind(b"\n", start, filled)
        if cut < 0:
            if ended:
                break
            continue
        keep = bytes(buf[cut + 1:filled])
        del buf[cut + 1:]
        yield buf
        buf, filled = None, len(keep)
    if filled:
        if 2 * filled < buf.__alloc__():
            # a short last block (a range's or a file's) copied out: cut in place, the buffer
            # would lose its allocation (a bytearray cut to under half of it is reallocated)
            # and be moved again to grow for its next block
            block = bytearray(memoryview(buf)[:filled])
            recycle.put(buf)
            yield block
        else:
            del buf[filled:]
            yield buf


def _read_full(f, n: int) -> bytes:
    out = b""
    while len(out) < n:
        part = f.read(n - len(out))
        if not part:
            break
        out += part
    return out


def _readinto_full(f, buf: bytearray, at: int, n: int) -> int:
    """Reads up to ``n`` bytes into ``buf[at:]`` (fewer only at the end of the file)."""
    done = 0
    with memoryview(buf) as view:
        while done < n:
            with view[at + done:at + n] as part:
                got = f.readinto(part)
            if not got:
                break
            done += got
    return done
