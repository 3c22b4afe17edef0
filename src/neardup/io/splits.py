"""A large plain JSONL file cut into byte ranges of whole lines, each read by a task of its own.

One input file used to be one task: a 100 GB JSONL file was read by one core while the rest of
the cluster waited. A plain (uncompressed) JSONL file larger than :func:`split_bytes` is cut into
ranges of about that many bytes: range k's nominal span is [k * R, (k + 1) * R); it starts just
after the first newline at or after its nominal start (range 0 at 0) and ends where the next
range starts (the last at the end of the file). A line is therefore read by exactly one range,
and a range may be empty (one line longer than a range spans it and the next).

Rows stay line numbers of the whole file (ids ``FILE:LINE``, errors, kept/): before the ranges
are read, each range's newlines are counted by a task of its own (:func:`count_span`, a pass
over the bytes at memory speed, ranges in parallel), which gives every range its first line.

A gzip or zstd file cannot be cut by byte range (a range of a compressed stream decodes to
nothing): it is read whole by one task, as is a ``.json`` file found by a folder walk (whether it
holds records at all is decided from its first line). A file in a store (``s3://``, ...) is cut
like a local one: each range is read by seeking in it (ranged GETs).
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ..kernels.lines import count_newlines
from .sources import Source
from .storage import fs as _fs

SPLIT_BYTES = 64 << 20       # a plain JSONL file above this is split into ranges of this size
SPLIT_ENV = "NEARDUP_SPLIT_BYTES"  # overrides SPLIT_BYTES (tests cut small files into ranges)
_SCAN_BYTES = 8 << 20        # bytes read at a time when looking for a newline or counting them


def split_bytes() -> int:
    """The size of a range and the size above which a file is split: $NEARDUP_SPLIT_BYTES when
    set (a positive integer; tests force small files into several ranges), else SPLIT_BYTES."""
    value = os.environ.get(SPLIT_ENV, "").strip()
    if value:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n > 0:
            return n
    return SPLIT_BYTES


def splittable(src: Source) -> bool:
    """Whether ``src`` can be read by byte ranges: a plain JSONL file (not compressed, not a
    ``.json`` file found by a walk, which may be one JSON document rather than records)."""
    if src.format != "jsonl" or src.compression is not None:
        return False
    return not (src.walked and src.path.rsplit("/", 1)[-1].lower().endswith(".json"))


def nominal_ranges(size: int, every: int) -> List[Tuple[int, int]]:
    """The nominal byte ranges of a file of ``size`` bytes cut every ``every`` bytes (one range,
    the whole file, when it is not larger than ``every``)."""
    if size <= every:
        return [(0, size)]
    return [(k, min(k + every, size)) for k in range(0, size, every)]


def _line_start(f, nominal: int) -> int:
    """The offset just after the first newline at or after ``nominal`` (the end of the file
    when there is none); 0 for ``nominal`` 0."""
    if nominal <= 0:
        return 0
    f.seek(nominal)
    at = nominal
    while True:
        chunk = f.read(1 << 16)
        if not chunk:
            return at
        i = chunk.find(b"\n")
        if i >= 0:
            return at + i + 1
        at += len(chunk)


def count_span(path: str, start: int, end: int) -> Tuple[int, int, int]:
    """``(first, stop, newlines)`` of the range of nominal span [start, end) of a plain file:
    the bytes [first, stop) it reads (see the module docstring) and the newlines in them.
    OSError when the file cannot be read."""
    with _fs.open_input(path) as f:
        first = _line_start(f, start)
        stop = _line_start(f, end)
        stop = max(stop, first)
        f.seek(first)
        left = stop - first
        newlines = 0
        buf = bytearray(min(_SCAN_BYTES, left))  # one buffer read into again: no fresh pages a read
        view = memoryview(buf)
        while left > 0:
            got = f.readinto(view[:min(len(buf), left)])
            if not got:
                break
            left -= got
            newlines += count_newlines(buf, got)
    return first, stop, newlines


def first_lines(counted: List[Tuple[int, int, int]]) -> List[int]:
    """The first line (0-based) of each range of one file, from their :func:`count_span` in
    file order."""
    out: List[int] = []
    line = 0
    for _first, _stop, newlines in counted:
        out.append(line)
        line += newlines
    return out


Span = Optional[Tuple[int, int, int]]  # (first byte, stop byte, first line) of a range; None: whole
