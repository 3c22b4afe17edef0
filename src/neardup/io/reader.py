"""Reading sources as a stream of :class:`Batch` es, with bounded memory.

:func:`read_source` checks its arguments and hands the source to the reader of its format (one
module a format: :mod:`neardup.io.formats`); :func:`read_sources` reads many in order, runs of
small local text files opened and read ahead by a pool of threads. A local file is checked
before it is opened for reading (a named pipe or a device would block or never end), and a file
that cannot be read stops the run whatever ``on_error`` says (:mod:`neardup.io.opening`).

The names that other rooms take from here are kept importable from here: the reasons of a
skipped file (:mod:`neardup.io.batch`) and the column rules (:mod:`neardup.io.columns`).
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

import numpy as np

from ..errors import ConfigError
from .batch import BINARY, EMPTY_FILE, NOT_RECORDS, NOT_UTF8, ON_ERROR_MODES, Batch, ReadContext
from .columns import text_column_of, text_columns
from .formats import READERS
from .formats.text import FilesRead, files_batch as _files_batch, plain_text, read_local_files, text_document
from .opening import check_local_file
from .sources import Source
from .splits import Span
from .storage import fs as _fs

# read here, and kept importable from here for the other rooms (stages.write)
__all__ = ["Batch", "read_source", "read_sources",
           "BINARY", "EMPTY_FILE", "NOT_RECORDS", "NOT_UTF8", "text_column_of", "text_columns"]


def read_source(src: Source, source_index: int = 0, *, text_column: str = "text",
                id_column: Optional[str] = None, score_column: Optional[str] = None,
                on_error: str = "fail", batch_size: int = 8192, span: Span = None,
                text_spans: bool = False) -> Iterator[Batch]:
    """Stream the documents of one source as batches of at most ``batch_size``.

    Bad input raises :class:`InputError` (one line naming the file and the line or row) with
    ``on_error="fail"``; with ``on_error="skip"`` it is reported in ``Batch.rejected`` and
    reading goes on. JSONL line numbers in messages are 1-based (like an editor's), rows in
    ``Batch.rows`` / ``rejected`` are 0-based; Parquet and table messages say ``row N``
    (0-based). A text file (one document) read with ``id_column`` gets as id its path below the
    inputs' common folder (as by position), and with ``score_column`` a NaN score. ``span``: (first
    byte, stop byte, first line) of one range of a split plain JSONL file
    (:mod:`neardup.io.splits`): only its lines, numbered as in the whole file. ``text_spans``: a
    JSONL reader may hand out the texts as :class:`neardup.kernels.shingles.TextSpans` (see
    ``Batch.text``; the read stage's, for the kernels).
    """
    ctx = _context(src, source_index, text_column=text_column, id_column=id_column, score_column=score_column,
                   on_error=on_error, batch_size=batch_size, span=span, text_spans=text_spans)
    if src.format not in READERS:
        raise ValueError(f"unknown source format {src.format!r}")
    return _checked(ctx, READERS[src.format])


def _context(src: Source, source_index: int, *, text_column: str = "text", id_column: Optional[str] = None,
             score_column: Optional[str] = None, on_error: str = "fail", batch_size: int = 8192,
             span: Span = None, text_spans: bool = False) -> ReadContext:
    """The checked arguments of :func:`read_source` for ``src`` (its text column chosen)."""
    if on_error not in ON_ERROR_MODES:
        raise ConfigError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    candidates = text_columns(text_column)
    if score_column is not None and (score_column in candidates or score_column == id_column):
        raise ConfigError(f"score_column {score_column!r} must differ from the text and id columns")
    if id_column is not None and id_column in candidates:
        raise ConfigError(f"id_column {id_column!r} must differ from text_column")
    if len(candidates) > 1:
        text_column = text_column_of(src, candidates)
    ctx = ReadContext(src, source_index, text_column, id_column, score_column, on_error, int(batch_size))
    ctx.span = span
    ctx.text_spans = bool(text_spans)
    return ctx


def _checked(ctx: ReadContext, reader) -> Iterator[Batch]:
    check_local_file(ctx.src)  # when reading starts, as every other error
    yield from reader(ctx)


_FILES_AHEAD = 512  # small files read ahead by the pool of read_sources
_FILES_A_TASK = 128  # files one task of the pool reads (read_local_files): a future per file cost more than its read
_GROUP_BYTES = 16 << 20  # text bytes of one batch of many text files


def read_sources(sources, members, *, group_files: bool = False, **options) -> Iterator[Batch]:
    """:func:`read_source` over ``sources[i]`` for each ``i`` of ``members``, in order (the
    batches' ``source_index`` is ``i``). Runs of local text files (a folder of code, of scraped
    pages: many small files) are opened and read by a pool of threads, up to _FILES_AHEAD files
    ahead, instead of one at a time; the batches, errors and their order are those of
    :func:`read_source`. ``group_files``: consecutive text files that are plain UTF-8 text come
    as one batch of up to ``batch_size`` documents (``Batch.sources`` names each row's source),
    not one batch a file; any other file of the run comes as :func:`read_source` gives it."""
    members = list(members)
    pool = None
    k = 0
    try:
        while k < len(members):
            if not _pooled(sources[members[k]]):
                yield from read_source(sources[members[k]], members[k], **options)
                k += 1
                continue
            end = k
            while end < len(members) and _pooled(sources[members[end]]):
                end += 1
            if pool is None:
                from concurrent.futures import ThreadPoolExecutor
                pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="neardup-read")
            yield from _pooled_texts(pool, sources, members[k:end], options, group_files)
            k = end
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _pooled(src: Source) -> bool:
    return src.format == "text" and _fs.os_path(src.path) is not None


def _file_parts(pool, sources, run: List[int]) -> Iterator[Tuple[List[int], FilesRead]]:
    """``(part, read)`` for each part of ``run`` in order, ``read`` its files as
    :func:`~neardup.io.formats.text.read_local_files` reads them, by ``pool`` _FILES_A_TASK files
    a task, up to _FILES_AHEAD files ahead."""
    from collections import deque

    ahead: "deque" = deque()
    nxt = 0
    while nxt < len(run) or ahead:
        while nxt < len(run) and len(ahead) * _FILES_A_TASK < _FILES_AHEAD:
            part = run[nxt:nxt + _FILES_A_TASK]
            ahead.append((part, pool.submit(read_local_files, [sources[i] for i in part])))
            nxt += len(part)
        part, future = ahead.popleft()
        yield part, future.result()


def _file_contents(pool, sources, run: List[int]) -> Iterator[tuple]:
    """``(index, bytes)`` of each file of ``run`` in order (see :func:`_file_parts`); in place of
    the bytes, the error reading it raised (for the consumer to raise in its turn, after the
    checks of the options, as read_source)."""
    for part, read in _file_parts(pool, sources, run):
        for k, si in enumerate(part):
            if k in read.others:
                yield si, read.others[k]
            else:
                yield si, read.data[read.ends[k - 1] if k else 0:read.ends[k]].tobytes()


def _pooled_texts(pool, sources, run: List[int], options: dict, group: bool = False) -> Iterator[Batch]:
    """The batches of the local text files ``run`` (see :func:`read_sources`)."""
    if not group:
        for si, data in _file_contents(pool, sources, run):
            ctx = _context(sources[si], si, **options)
            if isinstance(data, BaseException):
                raise data
            yield from text_document(ctx, data)
        return
    # the options are the same for every file: checked once, before any file's error, as read_source does
    gathered = _Gathered(sources, options, _context(sources[run[0]], run[0], **options).batch_size)
    for part, read in _file_parts(pool, sources, run):
        which = np.asarray(part, np.int64)
        starts = np.concatenate(([0], read.ends[:-1]))
        k = 0  # the first file of part not yet gathered
        for i in sorted(read.others) + [len(part)]:
            if i > k:  # files k..i-1: plain, one after another in read.data
                yield from gathered.add(read.data[starts[k]:read.ends[i - 1]], read.ends[k:i] - starts[k:i],
                                        which[k:i])
            if i == len(part):
                break
            data = read.others[i]
            if isinstance(data, BaseException):
                raise data
            if plain_text(data):
                yield from gathered.add(np.frombuffer(data, np.uint8), np.array([len(data)]), which[i:i + 1])
            else:  # compressed, binary or not UTF-8: as read_source reads it, in its turn
                yield from gathered.flush()
                yield from text_document(_context(sources[part[i]], part[i], **options), data)
            k = i + 1
    yield from gathered.flush()


class _Gathered:
    """Plain text files gathered into batches (:func:`~neardup.io.formats.text.files_batch`): a
    batch ends with its ``batch_size``-th file, or with the file that brings its bytes to
    _GROUP_BYTES."""

    def __init__(self, sources, options: dict, batch_size: int):
        self.sources, self.options, self.batch_size = sources, options, batch_size
        self.data: list = []
        self.lengths: list = []
        self.which: list = []
        self.count = self.size = 0

    def add(self, data: np.ndarray, lengths: np.ndarray, which: np.ndarray) -> Iterator[Batch]:
        """Files whose bytes are ``data``, one after another, ``lengths`` bytes each, the sources
        ``which``, added in order; the batches they complete."""
        ends = np.cumsum(lengths)
        a = 0
        while a < len(lengths):
            base = int(ends[a - 1]) if a else 0
            last = min(a + self.batch_size - self.count - 1,  # the file that completes the batch
                       int(np.searchsorted(ends, base + _GROUP_BYTES - self.size)))
            b = min(last + 1, len(lengths))
            self.data.append(data[base:ends[b - 1]])
            self.lengths.append(lengths[a:b])
            self.which.append(which[a:b])
            self.count += b - a
            self.size += int(ends[b - 1]) - base
            if last < len(lengths):
                yield from self.flush()
            a = b

    def flush(self) -> Iterator[Batch]:
        """The batch of the files gathered, if any."""
        if self.count:
            one = len(self.data) == 1
            yield _files_batch(self.sources, self.data[0] if one else np.concatenate(self.data),
                               self.lengths[0] if one else np.concatenate(self.lengths),
                               self.which[0] if one else np.concatenate(self.which), self.options)
            self.data, self.lengths, self.which = [], [], []
            self.count = self.size = 0
