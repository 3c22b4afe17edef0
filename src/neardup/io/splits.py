"""A large plain JSONL file cut into byte ranges of whole lines, each read by a task of its own.

One input file used to be one task: a 100 GB JSONL file was read by one core while the rest of
the cluster waited. A plain (uncompressed) JSONL file larger than :func:`split_bytes` is cut into
an even number of ranges of equal size, at most that many bytes each (:func:`nominal_ranges`): a
range starts just after the first newline at or after its nominal start (range 0 at 0) and ends
where the next range starts (the last at the end of the file). A line is therefore read by exactly one range,
and a range may be empty (one line longer than a range spans it and the next).

Rows stay line numbers of the whole file (ids ``FILE:LINE``, errors, kept/), without a pass of
their own over the bytes: a range is read with its rows numbered from its first line (a span
``(first, stop, None)``), the lines it holds counted by its parse; once every range is read,
each one's first line is the sum of the lines of those before it, which the readers of the read
stage's blocks add to its rows (:class:`neardup.stages.corpus.Corpus`). An error that stops the
run names the line of the whole file: the newlines before the range are counted then
(:func:`lines_before`; an error's cost only). :func:`count_span` gives a range's bytes and
newlines in one call (a span whose first line is known: ``read_source`` of one range).

A gzip or zstd file cannot be cut by byte range (a range of a compressed stream decodes to
nothing): it is read whole by one task, as is a ``.json`` file found by a folder walk (whether it
holds records at all is decided from its first line). A file in a store (``s3://``, ...) is cut
like a local one: each range is read by seeking in it (ranged GETs).
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

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
    """The nominal byte ranges of a file of ``size`` bytes cut into ranges of at most ``every``
    bytes: one range, the whole file, when it is not larger than ``every``; else an even number n
    of ranges (the fewest of at most ``every`` bytes, one more when that is odd) of equal size,
    range k's span [k * size // n, (k + 1) * size // n). Equal and even: ranges are read two at a
    time (:func:`neardup.stages.read.read_concurrency`), and a short last range, or one range
    left alone at the end, would leave one parsing thread at work while the other has none."""
    if size <= every:
        return [(0, size)]
    n = -(-size // every)
    n += n % 2
    return [(k * size // n, (k + 1) * size // n) for k in range(n)]


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


def line_span(path: str, start: int, end: int) -> Tuple[int, int]:
    """``(first, stop)``: the bytes [first, stop) that the range of nominal span [start, end) of
    a plain file reads (see the module docstring): two seeks, no pass over the range. OSError
    when the file cannot be read."""
    with _fs.open_input(path) as f:
        first = _line_start(f, start)
        stop = _line_start(f, end)
    return first, max(stop, first)


def _newlines_in(f, first: int, stop: int) -> int:
    from ..kernels.lines import count_newlines
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
    return newlines


def lines_before(path: str, first: int) -> int:
    """The newlines of a plain file before byte ``first`` (a range's first byte): its first
    line, 0-based. OSError when the file cannot be read."""
    with _fs.open_input(path) as f:
        return _newlines_in(f, 0, first)


def count_span(path: str, start: int, end: int) -> Tuple[int, int, int]:
    """``(first, stop, newlines)`` of the range of nominal span [start, end) of a plain file:
    :func:`line_span` and the newlines in [first, stop). OSError when the file cannot be read."""
    first, stop = line_span(path, start, end)
    with _fs.open_input(path) as f:
        return first, stop, _newlines_in(f, first, stop)


def first_lines(counted: List[Tuple[int, int, int]]) -> List[int]:
    """The first line (0-based) of each range of one file, from their :func:`count_span` in
    file order."""
    out: List[int] = []
    line = 0
    for _first, _stop, newlines in counted:
        out.append(line)
        line += newlines
    return out


# (first byte, stop byte, first line) of a range; None: the whole file. A first line None: the
# range's rows numbered from 0 (the read stage's; an error's message still names the file's line)
Span = Optional[Tuple[int, int, Optional[int]]]


def range_lines(blocks, summaries, ranges) -> List[int]:
    """The first line of each block's rows (0 but for the ranges of a split file read with rows
    numbered from 0): per split file, the sum of the ``lines`` (:func:`neardup.io.read_source`'s
    count, in the block summary) of the ranges before, in block order (file order). ``blocks``:
    the read plan; ``summaries``: the blocks' summaries; ``ranges``: the blocks that are ranges."""
    base = [0] * len(blocks)
    at: dict = {}
    for b in sorted(ranges):
        lines = summaries[b].get("lines")
        if lines is None:  # rows of the whole file (a span with its first line)
            continue
        si = blocks[b][0]
        base[b] = at.get(si, 0)
        at[si] = base[b] + lines
    return base
