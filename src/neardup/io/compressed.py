"""Compressed input, known by its magic bytes: gzip, zstd, bz2 and xz.

A text file (one document a file) is decompressed whatever its name, when its first bytes are
those of a compressed kind (:func:`kind_of`, :func:`decompress`): a folder of man pages holds
``ls.1.gz``, and a ``notes`` file may be gzip without saying so. The JSON Lines and CSV / TSV
readers go by the name (``x.jsonl.xz``); bz2 and xz streams, which pyarrow's codecs do not all
read, are decoded here by the standard library (:func:`stdlib_chunks`), with the checks the
pyarrow streams have: a stream cut short, or damaged, is an error, not a short read.
"""

from __future__ import annotations

import io
import re
from typing import Iterator, Optional

from .forward_file import ForwardFile

MAGIC = (("gzip", b"\x1f\x8b"), ("zstd", b"\x28\xb5\x2f\xfd"), ("bz2", b"BZh"), ("xz", b"\xfd7zXZ\x00"))
_READ_BYTES = 256 << 10


class Unreadable(Exception):
    """Compressed data that does not decompress: cut short, or damaged (the message says)."""


def kind_of(data: bytes) -> Optional[str]:
    """The compressed kind whose magic bytes start ``data``, or None (plain data). A bz2 stream
    is known by ``BZh`` and a block size digit, so that a text starting ``BZh`` stays text."""
    for kind, magic in MAGIC:
        if data.startswith(magic):
            if kind == "bz2" and not (len(data) > 3 and data[3:4] in b"123456789"):
                continue
            return kind
    return None


def decompress(data: bytes, kind: str) -> bytes:
    """The decompressed bytes of the whole compressed file ``data`` (every member / frame /
    stream, as the command-line tools read them); :class:`Unreadable` when it is cut short or
    damaged."""
    import bz2
    import gzip
    import lzma
    import zlib

    try:
        if kind == "gzip":
            return gzip.decompress(data)
        if kind == "zstd":
            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as r:
                return r.read()
        if kind == "bz2":
            return bz2.decompress(data)
        if kind == "xz":
            return lzma.decompress(data)
    except EOFError:
        raise Unreadable(f"truncated {kind} stream") from None
    except (OSError, ValueError, zlib.error, lzma.LZMAError) as e:
        raise Unreadable(f"corrupt {kind} stream ({str(e) or type(e).__name__})") from None
    except Exception as e:  # zstandard.ZstdError
        raise Unreadable(f"corrupt {kind} stream ({str(e) or type(e).__name__})") from None
    raise ValueError(f"unknown compression {kind!r}")


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
        ext = {"gzip": ".gz", "zstd": ".zst", "bz2": ".bz2", "xz": ".xz"}.get(compression, "")
        if self.kind == "not":
            return (f"not a {compression} file (the name ends in {ext} but the data does not "
                    f"start with a {compression} header)")
        where = f"after line {complete_lines}" if complete_lines else "before the first complete line"
        if self.kind == "truncated":
            return f"truncated {compression} stream {where}"
        detail = f" ({self.detail})" if self.detail else ""
        if _CHECKSUM.search(self.detail):  # found at the stream's end: the damage is not located
            return (f"corrupt {compression} stream{detail}: the checksum at its end does not match its data, "
                    f"which may be damaged anywhere")
        return f"corrupt {compression} stream {where}{detail}"


# a stream's checksum (gzip's CRC-32 and length, zstd's and xz's check) found wrong at its end
_CHECKSUM = re.compile(r"data check|length check|checksum", re.I)


def stdlib_chunks(compression: str, f) -> Iterator[bytes]:
    """The decompressed bytes of the bz2 or xz file open as ``f``, in chunks of at most 256 KiB
    (every stream of a file of several, as bzip2 / xz read them). Raises
    :class:`StreamError`: ``not`` (no such header), ``truncated`` or
    ``corrupt``."""
    import bz2
    import lzma


    new = bz2.BZ2Decompressor if compression == "bz2" else lzma.LZMADecompressor
    data = f.read(_READ_BYTES)
    if not data:
        return
    if kind_of(data) != compression:
        raise StreamError("not")
    d = new()
    while True:
        try:
            out = d.decompress(data, _READ_BYTES)
            while out:
                yield out
                out = b"" if d.eof or d.needs_input else d.decompress(b"", _READ_BYTES)
        except (OSError, EOFError, ValueError, lzma.LZMAError) as e:
            raise StreamError("corrupt", str(e)) from None
        if d.eof:
            rest = d.unused_data or f.read(_READ_BYTES)
            if not rest:
                return
            if kind_of(rest) == compression:  # a next stream
                d, data = new(), rest
                continue
            while rest:  # zero padding is accepted, anything else is not
                if rest.strip(b"\0"):
                    raise StreamError("corrupt", f"unexpected data after the end of the {compression} stream")
                rest = f.read(_READ_BYTES)
            return
        data = f.read(_READ_BYTES)
        if not data:
            raise StreamError("truncated")


class StdlibReader(ForwardFile):
    """A binary file of the decompressed bytes of a bz2 or xz file (for pyarrow's CSV reader,
    wrapped in ``pyarrow.PythonFile``): a damaged or cut stream raises ValueError saying so."""

    def __init__(self, raw, compression: str):
        self.raw, self.compression = raw, compression
        self.chunks = stdlib_chunks(compression, raw)
        self.buf = b""

    def read(self, n: int = -1) -> bytes:

        try:
            while n is None or n < 0 or len(self.buf) < n:
                chunk = next(self.chunks, None)
                if chunk is None:
                    break
                self.buf += chunk
        except StreamError as e:
            raise ValueError(e.describe(self.compression, 0)) from None
        if n is None or n < 0:
            out, self.buf = self.buf, b""
        else:
            out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def close(self) -> None:
        super().close()
        self.chunks.close()
        self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
