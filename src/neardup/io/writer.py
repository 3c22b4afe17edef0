"""Writing the kept records of a source: a second, streaming pass over the input.

Same-format output keeps every record exactly as it was (JSONL lines byte for byte, Parquet rows
with the source schema; the kept lines of an uncompressed local JSONL file written to a local
file are byte ranges of it that the kernel copies, see :func:`_copy_jsonl_ranges`); the bytes
written depend only on the input and ``keep_rows``, so two runs give identical files. Files are written atomically through :func:`neardup.io.storage.fs.atomic_write`
(local: ``PATH.tmp`` renamed into place; object stores: the object appears when its upload
completes), to a local path or a URL alike.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import struct
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow
from ..errors import ConfigError, InputError
from ..kernels.lines import blank_lines, line_bounds
from ._streams import BLOCK_BYTES, StreamError, iter_blocks
from .storage import fs as _fs
from .reader import one_line
from .storage.tables import parquet_file
from .sources import OUTPUT_FORMATS, Source

_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3
_PARQUET_READ_ROWS = 65536
_PARQUET_GROUP_ROWS = 131072
_PARQUET_GROUP_BYTES = 64 << 20
_PARQUET_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "ZSTD": "zstd",
                   "LZ4": "lz4", "LZ4_RAW": "lz4", "UNCOMPRESSED": "none"}


def _keep_array(keep_rows) -> np.ndarray:
    keep = np.asarray(keep_rows, dtype=np.int64).reshape(-1)
    if len(keep) and keep[0] < 0:
        raise ValueError(f"keep_rows has a negative row ({int(keep[0])})")
    if len(keep) > 1 and not np.all(keep[1:] > keep[:-1]):
        raise ValueError("keep_rows must be sorted in increasing order without repeats")
    return keep


GZIP_MEMBER = 8 << 20  # uncompressed bytes per gzip member


def _gzip_member(data: bytes) -> bytes:
    """One complete gzip member of ``data``: no name, mtime 0, OS byte 255 (as gzip.GzipFile
    writes them, whatever the platform's zlib would put), deflate level _GZIP_LEVEL. zlib
    releases the GIL while it compresses, so members are made in parallel threads."""
    c = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = c.compress(data) + c.flush()
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + body
            + struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF))


class _ParallelGzip:
    """A gzip stream written as consecutive members of GZIP_MEMBER bytes each (a valid gzip file:
    gzip, zcat, Python and Arrow read every member), compressed by one thread per core and
    written in order. The bytes depend only on the data, not on the number of threads. Python's
    single gzip stream at level 6 ran at ~36 MB/s, the write stage's whole time for .gz outputs."""

    def __init__(self, raw, workers: Optional[int] = None):
        self.raw = raw
        self.buf = bytearray()
        workers = max(1, min(int(workers or os.cpu_count() or 1), 16))
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="neardup-gzip")
        self.pending: "deque" = deque()
        self.depth = 2 * workers
        self.members = 0

    def write(self, data) -> int:
        self.buf += data
        while len(self.buf) >= GZIP_MEMBER:
            chunk = bytes(self.buf[:GZIP_MEMBER])
            del self.buf[:GZIP_MEMBER]
            self._submit(chunk)
        return len(data)

    def _submit(self, chunk: bytes) -> None:
        self.pending.append(self.pool.submit(_gzip_member, chunk))
        self.members += 1
        while len(self.pending) > self.depth:
            self.raw.write(self.pending.popleft().result())

    def close(self) -> None:
        try:
            if self.buf or not self.members:  # an empty stream is still one (empty) member
                self._submit(bytes(self.buf))
                self.buf = bytearray()
            while self.pending:
                self.raw.write(self.pending.popleft().result())
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


class _ByteSink:
    """A binary file, optionally gzip (no name, mtime 0) or zstd (level 3) compressed; closing
    the sink finishes the compressed stream, not the file under it."""

    def __init__(self, raw, compression: Optional[str]):
        self.raw = raw
        self.inner = None
        if compression == "gzip":
            self.inner = _ParallelGzip(self.raw)
            self.write = self.inner.write
        elif compression == "zstd":
            import zstandard

            # zstd's own worker threads (threads=-1: one per core) compress while the caller
            # gathers the next lines: about twice as fast on 2 cores. In zstd's multi-threaded
            # mode the bytes do not depend on the number of workers (1, 2, 4 and 8 give the same
            # stream, zstd 1.5.7), so the output is the same on every machine.
            cctx = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_checksum=True, threads=-1)
            self.inner = cctx.stream_writer(self.raw, closefd=False)
            self.write = self.inner.write
        else:
            self.write = self.raw.write

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def _block_rows(data, starts, ends, keep, k: int, line0: int, capture, name: str):
    """For a block of lines (``starts``/``ends`` in ``data``, the first one file line ``line0``):
    ``(hi, idx)``, where ``keep[k:hi]`` are the kept rows inside it and ``idx`` their line
    indices in the block. Fills the wanted lines of ``capture``; a kept blank line is an error."""
    n = len(starts)
    if capture:
        for r in capture:
            if line0 <= r < line0 + n:
                capture[r] = bytes(data[starts[r - line0]:ends[r - line0]])
    hi = int(np.searchsorted(keep, line0 + n))
    idx = keep[k:hi] - line0
    if len(idx):
        blank = blank_lines(data, starts, ends)
        if len(blank) and np.isin(idx, blank).any():
            r = int(idx[np.isin(idx, blank)][0]) + line0
            raise ValueError(f"keep_rows has row {r}, a blank line of {name}")
    return hi, idx


def _runs(idx: np.ndarray):
    """(first, last) positions in ``idx`` of each run of consecutive values."""
    cut = np.flatnonzero(np.diff(idx) != 1) + 1
    return np.concatenate(([0], cut)), np.concatenate((cut, [len(idx)])) - 1


def _kept_line_blocks(src: Source, keep: np.ndarray, runs: bool = False,
                      capture: Optional[Dict[int, Optional[bytes]]] = None) -> Iterator[List[bytes]]:
    """The kept lines of a JSONL source (without newlines), block by block.

    Reading stops once the last kept row is reached, so damage after it (a truncated stream
    whose records were rejected) does not matter; damage before it is an InputError.
    """
    line0 = 0
    k = 0
    blocks = iter_blocks(src.path, src.compression)
    try:
        while k < len(keep):
            try:
                data = next(blocks)
            except StopIteration:
                break
            except StreamError as e:
                raise InputError(f"{src.name}: " + e.describe(src.compression or "", line0)) from None
            except OSError as e:
                raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
            starts, ends = line_bounds(data)
            n = len(starts)
            hi, idx = _block_rows(data, starts, ends, keep, k, line0, capture, src.name)
            if len(idx):
                if runs:
                    # consecutive kept lines as one slice each (their inner newlines included):
                    # joined with newlines, the same bytes as the lines joined one by one
                    first, last = _runs(idx)
                    s, e = starts[idx[first]].tolist(), ends[idx[last]].tolist()
                else:
                    s, e = starts[idx].tolist(), ends[idx].tolist()
                yield [data[a:b] for a, b in zip(s, e)]
            k = hi
            line0 += n
    finally:
        blocks.close()
    if k < len(keep):
        raise ValueError(f"keep_rows has row {int(keep[k])} but {src.name} has {line0} lines")


# ------------------------------------------------------------- JSONL copied as is, in the kernel

# copy_file_range / sendfile failures that mean "not here" (another file system, an old kernel,
# a sandbox that forbids the call, a file type it does not handle): the next way is tried
_NO_COPY_FILE_RANGE = frozenset(getattr(errno, n) for n in (
    "EXDEV", "ENOSYS", "EINVAL", "EOPNOTSUPP", "ENOTSUP", "EBADF", "EPERM", "ETXTBSY", "EIO")
    if hasattr(errno, n))
_NO_SENDFILE = frozenset(getattr(errno, n) for n in (
    "EINVAL", "ENOSYS", "EOPNOTSUPP", "ENOTSUP", "EBADF", "EPERM", "ENOTSOCK", "EIO")
    if hasattr(errno, n))
_RW_BYTES = 1 << 20
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark starting a file is not part of line 0 (as in _streams)


class _RangeCopier:
    """Appends byte ranges of one local file to another at the position of ``fd_out``: with
    ``copy_file_range`` (the kernel copies, nothing passes through this process), else
    ``sendfile``, else ``pread`` + ``write``. A way that fails with an error that means "not
    supported here" is not tried again; the range is copied the next way."""

    def __init__(self, fd_in: int, fd_out: int, name: str, way: Optional[str] = None):
        self.fd_in, self.fd_out, self.name = fd_in, fd_out, name
        if way is None:
            way = ("copy_file_range" if hasattr(os, "copy_file_range")
                   else "sendfile" if hasattr(os, "sendfile") and os.uname().sysname == "Linux" else "rw")
        self.way = way

    def copy(self, starts: List[int], ends: List[int]) -> None:
        cfr = getattr(os, "copy_file_range", None)
        fd_in, fd_out = self.fd_in, self.fd_out
        for a, b in zip(starts, ends):
            while a < b:
                n = 0
                if self.way == "copy_file_range":
                    try:
                        n = cfr(fd_in, fd_out, b - a, a)
                    except OSError as e:
                        if e.errno not in _NO_COPY_FILE_RANGE:
                            raise
                        self.way = "sendfile" if hasattr(os, "sendfile") else "rw"
                        continue
                    if n == 0:  # end of file before the range ends: let the others decide
                        self.way = "sendfile" if hasattr(os, "sendfile") else "rw"
                        continue
                elif self.way == "sendfile":
                    try:
                        n = os.sendfile(fd_out, fd_in, a, b - a)
                    except OSError as e:
                        if e.errno not in _NO_SENDFILE:
                            raise
                        self.way = "rw"
                        continue
                    if n == 0:
                        self.way = "rw"
                        continue
                else:
                    n = self._read_write(a, b)
                a += n

    def _read_write(self, a: int, b: int) -> int:
        try:
            data = os.pread(self.fd_in, min(b - a, _RW_BYTES), a)
        except OSError as e:
            raise InputError(f"{self.name}: cannot read file ({e.strerror or e})") from None
        if not data:
            raise InputError(f"{self.name}: the file got shorter while it was being written")
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd_out, view):]
        return len(data)


_LONG_LINE = 1024  # bytes a line on average, from which newlines are found one by one


def _newlines(buf: bytearray, size: int, long_lines: bool) -> np.ndarray:
    """Offsets of the newlines in ``buf[:size]``: with memchr one by one when lines are long
    (fewer passes over the bytes), else with numpy."""
    if not long_lines:
        return np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=size) == 10)
    out = []
    find = buf.find
    i = find(b"\n", 0, size)
    while i >= 0:
        out.append(i)
        i = find(b"\n", i + 1, size)
    return np.array(out, dtype=np.int64)


def _kept_byte_ranges(f, keep: np.ndarray, name: str,
                      capture: Optional[Dict[int, Optional[bytes]]] = None,
                      block_bytes: Optional[int] = None) -> Iterator[Tuple[List[int], List[int], bool]]:
    """The kept lines of an uncompressed local JSONL file (``f`` unbuffered, at offset 0) as
    byte ranges of the file, block by block: ``(starts, ends, newline)``, the runs of
    consecutive kept lines, each with the newline that ends it; ``newline`` is True for the
    last block when the file's last line is kept and has no newline (the caller adds one).

    The same lines as :func:`_kept_line_blocks` (a UTF-8 byte order mark at the start is not
    part of line 0; rows are lines, blank ones included), the same errors; no bytes are copied
    here but the ones read to find the lines (into one buffer, reused). ``capture`` as for
    :func:`write_kept`, but every row asked for is captured (reading on past the last kept row
    if need be)."""
    block_bytes = block_bytes or BLOCK_BYTES
    pos = 0  # file offset of buf[0]
    try:
        # a small file, a small buffer (one byte more than the file: its end is seen at once)
        buf = bytearray(max(1, min(block_bytes, os.fstat(f.fileno()).st_size + 1)))
        if f.read(3) == _BOM:
            pos = 3
        f.seek(pos)
    except OSError as e:
        raise InputError(f"{name}: cannot read file ({e.strerror or e})") from None
    filled = 0
    line0 = k = 0
    eof = False
    last_capture = max(capture) if capture else -1
    long_lines = False
    while (k < len(keep) or line0 <= last_capture) and not eof:
        if filled == len(buf):  # one line longer than the buffer: a larger one
            bigger = bytearray(2 * len(buf))
            bigger[:filled] = buf
            buf = bigger
        view = memoryview(buf)
        try:
            while filled < len(buf):
                got = f.readinto(view[filled:])
                if not got:
                    eof = True
                    break
                filled += got
        except OSError as e:
            raise InputError(f"{name}: cannot read file ({e.strerror or e})") from None
        finally:
            view.release()
        ends = _newlines(buf, filled, long_lines)
        used = int(ends[-1]) + 1 if len(ends) else 0
        partial = eof and filled > used  # the last line, without a newline
        if partial:
            ends = np.append(ends, filled)
            used = filled
        if len(ends) == 0:
            continue  # no whole line yet: read on (or the end)
        n = len(ends)
        starts = np.empty(n, dtype=np.int64)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        hi, idx = _block_rows(buf, starts, ends, keep, k, line0, capture, name)
        if len(idx):
            first, last = _runs(idx)
            run_ends = ends[idx[last]] + 1  # with the newline
            newline = bool(partial and idx[-1] == n - 1)
            if newline:
                run_ends[-1] = filled
            yield (starts[idx[first]] + pos).tolist(), (run_ends + pos).tolist(), newline
        k = hi
        line0 += n
        long_lines = used >= _LONG_LINE * n
        rest = filled - used
        if rest:
            buf[:rest] = buf[used:filled]
        pos += used
        filled = rest
    if k < len(keep):
        raise ValueError(f"keep_rows has row {int(keep[k])} but {name} has {line0} lines")


def _coalesced(blocks: Iterator[Tuple[List[int], List[int], bool]]) -> Iterator[Tuple[List[int], List[int], bool]]:
    """The same ranges, a run that goes on into the next block joined into one range."""
    held = None
    newline = False
    for starts, ends, newline in blocks:  # newline: the last block
        if held is not None:
            if starts[0] == held[1]:
                starts[0] = held[0]
            else:
                starts.insert(0, held[0])
                ends.insert(0, held[1])
        held = (starts.pop(), ends.pop())
        if starts:
            yield starts, ends, False
    if held is not None:
        yield [held[0]], [held[1]], newline


def _regular_local_file(path: str) -> bool:
    local = _fs.os_path(path)
    if local is None:
        return False
    try:
        return stat.S_ISREG(os.stat(local).st_mode)
    except (OSError, ValueError):
        return False


def _local_fd(out) -> Optional[int]:
    """The descriptor of ``out`` when it is a local regular file (else None)."""
    try:
        fd = out.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):
        return None


def _copy_jsonl_ranges(src: Source, keep: np.ndarray, fd_out: int,
                       capture: Optional[Dict[int, Optional[bytes]]] = None,
                       way: Optional[str] = None, block_bytes: Optional[int] = None) -> int:
    """The kept lines of an uncompressed local JSONL file appended to ``fd_out``, byte ranges
    copied by the kernel (:class:`_RangeCopier`) while the next block is searched for lines:
    the same bytes as :func:`_write_jsonl_raw` writes."""
    try:
        f = open(_fs.local_path(src.path), "rb", buffering=0)
    except OSError as e:
        raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
    with f:
        copier = _RangeCopier(f.fileno(), fd_out, src.name, way)
        blocks = _coalesced(_kept_byte_ranges(f, keep, src.name, capture, block_bytes))
        newline = False
        size = os.fstat(f.fileno()).st_size
        if size <= (block_bytes or BLOCK_BYTES):  # one block: no thread
            for starts, ends, newline in blocks:
                copier.copy(starts, ends)
        else:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-copy")
            try:
                pending = None
                for starts, ends, newline in blocks:
                    job = pool.submit(copier.copy, starts, ends)
                    if pending is not None:
                        pending.result()
                    pending = job
                if pending is not None:
                    pending.result()
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        if newline:
            while not os.write(fd_out, b"\n"):
                pass
    return len(keep)


def _write_jsonl_raw(src: Source, keep: np.ndarray, out: BinaryIO, compression: Optional[str],
                     capture: Optional[Dict[int, Optional[bytes]]] = None) -> int:
    if compression is None and src.compression is None and _regular_local_file(src.path):
        fd = _local_fd(out)
        if fd is not None:
            out.flush()
            return _copy_jsonl_ranges(src, keep, fd, capture)
    sink = _ByteSink(out, compression)
    try:
        for chunks in _kept_line_blocks(src, keep, runs=True, capture=capture):
            chunks.append(b"")  # for the final newline
            sink.write(b"\n".join(chunks))
    finally:
        sink.close()
    return len(keep)


def _parquet_rows(src: Source, keep: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The kept rows of a Parquet source, all columns, in order."""
    try:
        pf = parquet_file(src.path)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{src.name}: not a readable Parquet file ({one_line(e)})") from None
    total = pf.metadata.num_rows
    if len(keep) and keep[-1] >= total:
        raise ValueError(f"keep_rows has row {int(keep[-1])} but {src.name} has {total} rows")
    row0 = 0
    k = 0
    it = pf.iter_batches(batch_size=_PARQUET_READ_ROWS, use_threads=True)
    while k < len(keep):
        try:
            rb = next(it)
        except StopIteration:
            break
        except (pa.ArrowException, OSError, ValueError) as e:
            raise InputError(
                f"{src.name}: not a readable Parquet file (after row {row0}: {one_line(e)})") from None
        n = rb.num_rows
        hi = int(np.searchsorted(keep, row0 + n))
        if hi > k:
            idx = keep[k:hi] - row0
            yield rb if len(idx) == n else rb.take(arrow(idx))
        k = hi
        row0 += n


def _source_parquet_codec(src: Source) -> str:
    try:
        md = parquet_file(src.path).metadata
        if md.num_row_groups and md.num_columns:
            return _PARQUET_CODECS.get(md.row_group(0).column(0).compression, "snappy")
    except (pa.ArrowException, OSError, ValueError):
        pass
    return "snappy"


def _write_parquet_batches(out: BinaryIO, schema: pa.Schema, batches: Iterator[pa.RecordBatch],
                           compression: str, conform: Optional[Callable] = None) -> int:
    """Write batches, grouped into row groups of up to ~128k rows / 64 MB."""
    import pyarrow.parquet as pq

    n = 0
    writer = pq.ParquetWriter(out, schema, compression=compression)
    try:
        buf: List[pa.RecordBatch] = []
        rows = nbytes = 0

        def flush() -> None:
            if buf:
                table = pa.Table.from_batches(buf)
                if conform is not None:
                    table = conform(table)
                writer.write_table(table, row_group_size=max(table.num_rows, 1))
                buf.clear()

        for rb in batches:
            if rb.num_rows == 0:
                continue
            buf.append(rb)
            rows += rb.num_rows
            nbytes += rb.nbytes
            n += rb.num_rows
            if rows >= _PARQUET_GROUP_ROWS or nbytes >= _PARQUET_GROUP_BYTES:
                flush()
                rows = nbytes = 0
        flush()
    finally:
        writer.close()
    return n


# --------------------------------------------------------------------------- JSONL -> Parquet


def _strings_for_timestamps(t: pa.DataType) -> pa.DataType:
    """pyarrow's JSON inference turns date-like strings into timestamps; keep them strings."""
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_strings_for_timestamps(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = t.value_field.with_type(_strings_for_timestamps(t.value_type))
        return pa.large_list(inner) if pa.types.is_large_list(t) else pa.list_(inner)
    return t


def _parse_kept_lines(lines: List[bytes], schema: Optional[pa.Schema], name: str) -> pa.Table:
    import pyarrow.json as pj

    feed = b"\n".join(lines)
    longest = max(len(x) for x in lines)
    ropts = pj.ReadOptions(use_threads=True, block_size=max(1 << 20, 2 * longest + 16))
    popts = pj.ParseOptions(explicit_schema=schema, newlines_in_values=False,
                            unexpected_field_behavior="infer" if schema is None else "error")
    try:
        table = pj.read_json(pa.BufferReader(feed), read_options=ropts, parse_options=popts)
        if table.num_rows == len(lines):
            if schema is None:
                table = table.cast(pa.schema([f.with_type(_strings_for_timestamps(f.type))
                                              for f in table.schema]))
            return table
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # pyarrow could not infer one schema (say, a field that is sometimes a number and sometimes
    # a string): let Python parse and Arrow convert
    objs = [json.loads(x.decode("utf-8")) for x in lines]
    try:
        if schema is not None:
            return pa.Table.from_pylist(objs, schema=schema)
        return pa.Table.from_pylist(objs)
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as e:
        raise InputError(f"{name}: cannot convert the kept records to Parquet ({one_line(e)})") from None


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    cols = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, type=f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _jsonl_to_parquet(src: Source, keep: np.ndarray, out: BinaryIO) -> int:
    # pass 1: one schema for every kept record (bounded memory: one block at a time)
    schema: Optional[pa.Schema] = None
    for lines in _kept_line_blocks(src, keep):
        s = _parse_kept_lines(lines, None, src.name).schema
        try:
            schema = s if schema is None else pa.unify_schemas([schema, s],
                                                               promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise InputError(
                f"{src.name}: cannot convert the kept records to Parquet ({one_line(e)})") from None
    if schema is None:
        schema = pa.schema([])

    # pass 2: parse again with that schema and write
    def batches() -> Iterator[pa.RecordBatch]:
        for lines in _kept_line_blocks(src, keep):
            table = _conform(_parse_kept_lines(lines, schema, src.name), schema)
            yield from table.to_batches()

    try:
        return _write_parquet_batches(out, schema, batches(), "snappy")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InputError(f"{src.name}: cannot convert the kept records to Parquet ({one_line(e)})") from None


# --------------------------------------------------------------------------- entry point


def _parquet_to_jsonl(src: Source, keep: np.ndarray, out: BinaryIO) -> int:
    n = 0
    for rb in _parquet_rows(src, keep):
        lines = [json.dumps(row, ensure_ascii=False, sort_keys=False, default=str)
                 for row in rb.to_pylist()]
        lines.append("")
        out.write("\n".join(lines).encode("utf-8"))
        n += rb.num_rows
    return n


# --------------------------------------------------------------------------- CSV / TSV


def _csv_rows(src: Source, keep: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The kept records of a CSV / TSV source, every column as the string it was, in order;
    the first batch is empty (it carries the schema, for the header of an empty output)."""
    import pyarrow.csv as pcsv

    from .reader import csv_header, csv_options, csv_stream, skip_invalid_csv_row

    try:
        names = csv_header(src)
        stream = csv_stream(src)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{src.name}: cannot read file ({one_line(e)})") from None
    row0 = 0
    k = 0
    try:
        # the records the reader rejected for their number of fields are skipped here too
        reader = pcsv.open_csv(stream, *csv_options(src, {n: pa.string() for n in names},
                                                     invalid_row_handler=skip_invalid_csv_row))
        yield pa.RecordBatch.from_pylist([], schema=reader.schema)
        while k < len(keep):
            try:
                rb = reader.read_next_batch()
            except StopIteration:
                break
            n = rb.num_rows
            hi = int(np.searchsorted(keep, row0 + n))
            if hi > k:
                idx = keep[k:hi] - row0
                yield rb if len(idx) == n else rb.take(arrow(idx))
            k = hi
            row0 += n
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{src.name}: not a readable {src.format.upper()} file "
                         f"(after row {row0}: {one_line(e)})") from None
    finally:
        stream.close()
    if k < len(keep):
        raise ValueError(f"keep_rows has row {int(keep[k])} but {src.name} has {row0} rows")


def _write_csv(src: Source, keep: np.ndarray, out: BinaryIO, target: str) -> int:
    """Kept CSV / TSV records as ``target``: the same format (a header, then the records with
    every field quoted; same compression), JSONL (one object of strings per record) or Parquet
    (string columns)."""
    import pyarrow.csv as pcsv

    batches = _csv_rows(src, keep)
    schema = next(batches).schema
    if target == "parquet":
        return _write_parquet_batches(out, schema, batches, "snappy")
    n = 0
    sink = _ByteSink(out, src.compression if target in ("csv", "tsv") else None)
    try:
        if target in ("csv", "tsv"):
            opts = pcsv.WriteOptions(include_header=True, delimiter="\t" if target == "tsv" else ",")
            buf = pa.BufferOutputStream()
            pcsv.write_csv(pa.Table.from_batches([], schema=schema), buf, opts)
            sink.write(buf.getvalue().to_pybytes())
            opts = pcsv.WriteOptions(include_header=False, delimiter=opts.delimiter)
        for rb in batches:
            if rb.num_rows == 0:
                continue
            if target in ("csv", "tsv"):
                buf = pa.BufferOutputStream()
                pcsv.write_csv(rb, buf, opts)
                sink.write(buf.getvalue().to_pybytes())
            else:
                lines = [json.dumps(row, ensure_ascii=False) for row in rb.to_pylist()]
                lines.append("")
                sink.write("\n".join(lines).encode("utf-8"))
            n += rb.num_rows
    finally:
        sink.close()
    return n


def _read_text_file(src: Source) -> str:
    try:
        with _fs.open_input(src.path) as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{src.name}: invalid UTF-8 at byte {e.start}") from None


def copy_text_files(copies: List[Tuple[Source, str]], workers: int = 8) -> None:
    """Kept text files copied whole (``(source, destination)``): local ones to local paths by a
    pool of threads (the kernel copies each file: ``sendfile``), their folders made once each:
    what :func:`write_kept` does for one text file, without its per-file costs (a folder of
    100,000 small files). The destinations lie in a run's staging folder, published whole: no
    file is renamed into place one by one. A file or destination in a store: :func:`write_kept`."""
    local = [_fs.os_path(src.path) is not None and _fs.os_path(dst) is not None for src, dst in copies]
    for (src, dst), here in zip(copies, local):
        if not here:
            write_kept(src, [0], dst)
    copies = [item for item, here in zip(copies, local) if here]
    if not copies:
        return
    folders = {os.path.dirname(dst) for _, dst in copies}
    for folder in sorted(folders):
        os.makedirs(folder, exist_ok=True)

    def copy(item: Tuple[Source, str]) -> None:
        src, dst = item
        try:
            fd = os.open(_fs.local_path(src.path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
        with open(fd, "rb") as fi, open(dst, "wb") as fo:
            try:
                _copy_fd(fi.fileno(), fo.fileno())
            except _SourceError as e:
                raise InputError(f"{src.name}: cannot read file ({e.reason})") from None

    if len(copies) == 1:
        copy(copies[0])
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="neardup-copy") as pool:
        for _ in pool.map(copy, copies):
            pass


class _SourceError(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _copy_fd(fd_in: int, fd_out: int) -> None:
    """The whole of ``fd_in`` appended to ``fd_out``: ``sendfile`` (in the kernel), else reads
    and writes; a read error is a :class:`_SourceError`."""
    size = os.fstat(fd_in).st_size
    copied = 0
    if hasattr(os, "sendfile"):
        try:
            while True:
                n = os.sendfile(fd_out, fd_in, copied, max(size - copied, 1 << 20))
                if n == 0:
                    return
                copied += n
        except OSError as e:
            if e.errno not in _NO_SENDFILE:
                raise
    while True:
        try:
            data = os.pread(fd_in, 1 << 20, copied)
        except OSError as e:
            raise _SourceError(e.strerror or str(e)) from None
        if not data:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(fd_out, view):]
        copied += len(data)


def write_kept(src: Source, keep_rows, out_path: str, *, output_format: str = "same",
               text_column: str = "text", id_column: Optional[str] = None,
               capture: Optional[Dict[int, Optional[bytes]]] = None) -> int:
    """Write the records of ``src`` at ``keep_rows`` (sorted rows, as in ``Batch.rows``) to
    ``out_path``; returns how many were written.

    ``same`` format: JSONL lines are copied byte for byte (recompressed: gzip level 6 with
    mtime 0 and no file name, as members of GZIP_MEMBER bytes made in parallel; zstd level 3), Parquet rows keep the source schema and codec, a
    text file is copied when row 0 is kept (nothing is written otherwise). ``jsonl`` /
    ``parquet`` convert: Parquet rows become ``json.dumps`` lines, JSONL records become a
    Parquet table (one schema inferred over all kept records), a text file becomes the record
    ``{"id": src.name, "text": content}``. CSV / TSV records are parsed and written again (a
    header, every field quoted, the values as they were; as ``jsonl``: objects of strings).
    ``text_column`` / ``id_column`` are accepted for
    symmetry with :func:`read_source`; every field is written as it was.

    ``capture`` (JSONL copied as is only): a dict whose keys are rows; the raw bytes of those
    lines that the pass reads (it stops after the last kept row) are stored as the values.
    """
    del text_column, id_column  # records are written whole
    if output_format not in OUTPUT_FORMATS:
        raise ConfigError(
            f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}")
    if src.format == "table":
        raise ValueError("write_kept does not write in-memory tables; take the kept rows of the table instead")
    keep = _keep_array(keep_rows)
    target = src.format if output_format == "same" else output_format

    if src.format == "text":
        if len(keep) and (len(keep) > 1 or keep[0] != 0):
            raise ValueError(f"keep_rows of a text file can only be [0] or empty, got {keep[:5].tolist()}")
        if len(keep) == 0:
            return 0
        if target == "text":
            with _fs.atomic_write(out_path) as out:
                try:
                    with _fs.open_input(src.path) as fi:
                        while True:
                            chunk = fi.read(1 << 20)
                            if not chunk:
                                break
                            out.write(chunk)
                except OSError as e:
                    raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
            return 1
        content = _read_text_file(src)
        with _fs.atomic_write(out_path) as out:
            if target == "jsonl":
                line = json.dumps({"id": src.name, "text": content}, ensure_ascii=False) + "\n"
                out.write(line.encode("utf-8"))
            else:
                import pyarrow.parquet as pq

                table = pa.table({"id": arrow([src.name], pa.string()),
                                  "text": arrow([content], pa.string())})
                pq.write_table(table, out)
        return 1

    if src.format == "jsonl":
        with _fs.atomic_write(out_path) as out:
            if target == "jsonl":
                comp = src.compression if output_format == "same" else None
                return _write_jsonl_raw(src, keep, out, comp, capture=capture)
            return _jsonl_to_parquet(src, keep, out)

    if src.format == "parquet":
        with _fs.atomic_write(out_path) as out:
            if target == "parquet":
                import pyarrow.parquet as pq

                try:
                    schema = parquet_file(src.path).schema_arrow
                except (pa.ArrowException, OSError, ValueError) as e:
                    raise InputError(f"{src.name}: not a readable Parquet file ({one_line(e)})") from None
                return _write_parquet_batches(
                    out, schema, _parquet_rows(src, keep), _source_parquet_codec(src),
                    conform=lambda t: t if t.schema.equals(schema, check_metadata=False)
                    else t.cast(schema))
            return _parquet_to_jsonl(src, keep, out)

    if src.format in ("csv", "tsv"):
        with _fs.atomic_write(out_path) as out:
            return _write_csv(src, keep, out, target)

    raise ValueError(f"unknown source format {src.format!r}")
