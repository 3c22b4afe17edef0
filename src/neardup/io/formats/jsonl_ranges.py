"""The kept lines of an uncompressed local JSONL file, appended to a local output file as byte
ranges of the source that the kernel copies (:func:`copy_jsonl_ranges`): the lines are found in
one reused buffer, the bytes never pass through Python. The same bytes as
:func:`neardup.io.formats.jsonl_kept.write_kept_lines` writes line by line."""

from __future__ import annotations

import os
import stat
from codecs import BOM_UTF8
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from ...errors import InputError
from .._streams import BLOCK_BYTES
from ..kernel_copy import RangeCopier
from ..kept_rows import block_rows, run_bounds
from ..page_cache import given_back
from ..sources import Source
from ..storage import fs as _fs




def _kept_byte_ranges(f, keep: np.ndarray, name: str,
                      capture: Optional[Dict[int, Optional[bytes]]] = None,
                      block_bytes: Optional[int] = None) -> Iterator[Tuple[List[int], List[int], bool]]:
    """The kept lines of an uncompressed local JSONL file (``f`` unbuffered, at offset 0) as
    byte ranges of the file, block by block: ``(starts, ends, newline)``, the runs of
    consecutive kept lines, each with the newline that ends it; ``newline`` is True for the
    last block when the file's last line is kept and has no newline (the caller adds one).

    The same lines as :func:`~neardup.io.formats.jsonl_kept.kept_line_blocks` (a UTF-8 byte
    order mark at the start is not part of line 0; rows are lines, blank ones included), the
    same errors; no bytes are copied here but the ones read to find the lines (into one buffer,
    reused). ``capture`` as for :func:`neardup.io.writer.write_kept`, but every row asked for is
    captured (reading on past the last kept row if need be)."""
    from ...kernels.lines import newline_positions
    block_bytes = block_bytes or BLOCK_BYTES
    pos = 0  # file offset of buf[0]
    try:
        # a small file, a small buffer (one byte more than the file: its end is seen at once)
        buf = bytearray(max(1, min(block_bytes, os.fstat(f.fileno()).st_size + 1)))
        if f.read(3) == BOM_UTF8:  # a UTF-8 byte order mark starting a file is not part of line 0
            pos = 3
        f.seek(pos)
    except OSError as e:
        raise InputError(f"{name}: cannot read file ({e.strerror or e})") from None
    filled = 0
    line0 = k = 0
    eof = False
    last_capture = max(capture) if capture else -1
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
        # the newlines of the bytes read, 64 bytes a step without the GIL (a memchr per line
        # from Python cost 0.24 CPU-s over the 2.3 GB of 1M documents, this 0.15)
        ends = newline_positions(memoryview(buf)[:filled])
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
        hi, idx = block_rows(buf, starts, ends, keep, k, line0, capture, name)
        if len(idx):
            first, last = run_bounds(idx)
            run_ends = ends[idx[last]] + 1  # with the newline
            newline = bool(partial and idx[-1] == n - 1)
            if newline:
                run_ends[-1] = filled
            yield (starts[idx[first]] + pos).tolist(), (run_ends + pos).tolist(), newline
        k = hi
        line0 += n
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


def regular_local_file(path: str) -> bool:
    """Whether ``path`` is a regular file on this machine (not a pipe, not in a store)."""
    local = _fs.os_path(path)
    if local is None:
        return False
    try:
        return stat.S_ISREG(os.stat(local).st_mode)
    except (OSError, ValueError):
        return False


def local_fd(out) -> Optional[int]:
    """The descriptor of ``out`` when it is a local regular file (else None)."""
    try:
        fd = out.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):
        return None


def copy_jsonl_ranges(src: Source, keep: np.ndarray, fd_out: int,
                      capture: Optional[Dict[int, Optional[bytes]]] = None,
                      way: Optional[str] = None, block_bytes: Optional[int] = None) -> int:
    """The kept lines of an uncompressed local JSONL file appended to ``fd_out``, byte ranges
    copied by the kernel (:class:`RangeCopier`) while the next block is searched for lines:
    the same bytes as :func:`write_kept_lines` writes."""
    try:
        f = open(_fs.local_path(src.path), "rb", buffering=0)
    except OSError as e:
        raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
    # the file's pages this copy brings into the page cache given back behind it (as the read
    # stage's reads do: neardup.io.page_cache): up to the end of each block copied
    with f, given_back(_fs.local_path(src.path), f) as drop:
        copier = RangeCopier(f.fileno(), fd_out, src.name, way)
        blocks = _coalesced(_kept_byte_ranges(f, keep, src.name, capture, block_bytes))
        newline = False
        size = os.fstat(f.fileno()).st_size
        if size <= (block_bytes or BLOCK_BYTES):  # one block: no thread
            for starts, ends, newline in blocks:
                copier.copy(starts, ends)
        else:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-copy")
            try:
                pending, copied_to = None, 0
                for starts, ends, newline in blocks:
                    job = pool.submit(copier.copy, starts, ends)
                    if pending is not None:
                        pending.result()
                        if drop is not None:
                            drop.advance(copied_to)
                    pending, copied_to = job, int(ends[-1]) if len(ends) else copied_to
                if pending is not None:
                    pending.result()
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        if newline:
            while not os.write(fd_out, b"\n"):
                pass
    return len(keep)
