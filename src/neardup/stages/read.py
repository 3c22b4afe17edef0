"""Stage ``read``: one block of input files -> its document shard (see :mod:`.layout`).

Partitions: the blocks of the read plan not yet read (a block holds whole files). :func:`read_block`
is the whole work of one block: it streams the block's files through :func:`neardup.io.read_source`,
runs the kernels (tokens, shingle hashes, MinHash, band keys) on each batch, and writes the block's
files under temporary names, the summary last. Then, over the whole corpus: the run's size checks
and, with ``--id-column``, the duplicate-id check (ids shuffled on their hash:
:func:`duplicate_ids` over each partition, :func:`duplicate_id_rejections` at the end).
"""

from __future__ import annotations

import re
import queue
import sys
import threading
import time
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow, cast_strings, empty_table, string_offsets, to_numpy
from .. import io as nio
from ..errors import InputError
from ..io.opening import cannot_read
from ..io.splits import line_span
from ..io.storage.folder import Folder
from ..progress import bar, check_interrupt
from .corpus import add_row_runs, numpy_fixed_binary
from .records import ReadInfo
from .workdir import LINE_BOUNDS, LINE_STATS, MAX_DOCUMENTS, block_name, docs_schema
from .write_lines import records_lines, seen_stats

if TYPE_CHECKING:
    from ..kernels.minhash import Scratch


def place(src: nio.Source, row: Optional[int]) -> str:
    """Where a record is, for messages: 'file:LINE' (JSONL, 1-based), 'file: row N' otherwise."""
    if row is None or row < 0:
        return src.name
    if src.format == "jsonl":
        return f"{src.name}:{row + 1}"
    if src.format == "text":
        return src.name
    return f"{src.name}: row {row}"


def prefetch(it: Iterator, depth: int = 2) -> Iterator:
    """Runs an iterator in a thread, at most ``depth`` items ahead of the one the consumer holds,
    so that reading overlaps the kernels (pyarrow's parser and the numba kernels release the
    GIL); its exceptions are re-raised here. The thread takes a slot before it asks for an item
    and the consumer gives it back as it takes one: an item is made only once it has a place
    (not made and then held waiting for one), so at most ``depth`` + 1 exist at once (each
    holds its block's buffer while its texts wait to be hashed: :data:`neardup.io._streams.block_buffers`)."""
    q: "queue.Queue" = queue.Queue()
    slots = threading.Semaphore(depth)
    stop = threading.Event()

    def worker():
        try:
            while True:
                while not slots.acquire(timeout=0.1):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                try:
                    item = next(it)
                except StopIteration:
                    break
                q.put(("item", item))
                item = None
            q.put(("end", None))
        except BaseException as exc:  # re-raised in the consumer
            q.put(("error", exc))

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "item":
                slots.release()
                yield value
            elif kind == "end":
                return
            else:
                raise value
    finally:
        stop.set()
        t.join(timeout=5)


class _Writer:
    """One thread that writes the big column while the kernels compute the next batch (a write
    into the page cache can stall on a slow disk, an upload on the network; queued here, the
    stall overlaps work). Writes into ``sink``, a binary file it closes, each array queued."""

    def __init__(self, sink, depth: int = 16):
        self._f = sink
        self._queue: "queue.Queue" = queue.Queue(maxsize=depth)
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                return
            if self._error is None:
                try:
                    self._f.write(array_bytes(data))
                except BaseException as exc:  # raised again in the caller's thread
                    self._error = exc

    def write(self, data: np.ndarray) -> None:
        """Queues ``data``; not copied: the caller must not change it afterwards."""
        if self._error is not None:
            raise self._error
        self._queue.put(data)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._f.close()
        if self._error is not None:
            raise self._error


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
TRIM_BYTES = 256 << 20  # free memory a malloc arena keeps before giving it back to the system
MMAP_BYTES = 32 << 20  # allocations from this size on are mapped on their own (glibc's largest)
_malloc_tuned = False


def tune_malloc() -> None:
    """Once per process, on glibc: malloc keeps up to TRIM_BYTES of freed memory instead of
    handing it back to the system at once. The read stage allocates the same large arrays for
    every batch (texts, fingerprints, signatures, codes: ~40 MB a batch, in several threads);
    glibc's defaults (a threshold that follows the largest freed block, at most 32 / 64 MB)
    give most of them back and fault them in again, zeroed, a page at a time: measured, about
    half the read stage's page faults and system time. A setting the user made with glibc's
    variables (MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_) is kept."""
    global _malloc_tuned
    if _malloc_tuned:
        return
    _malloc_tuned = True
    import os
    import sys
    if not sys.platform.startswith("linux") or any(v in os.environ for v in ("MALLOC_TRIM_THRESHOLD_",
                                                                               "MALLOC_MMAP_THRESHOLD_")):
        return
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES)
    except (OSError, AttributeError):  # not glibc (musl): its defaults stand
        pass


def read_block(work: Folder, config, sources: Sequence[nio.Source], block: int, members: Sequence[int],
               progress: Optional[Callable[[int], None]] = None,
               finish: Optional[Callable[[int], dict]] = None,
               signatures: Optional[Callable[[np.ndarray], None]] = None, span=None,
               with_lines: bool = False) -> dict:
    """Reads the sources ``members`` (indices into ``sources``) as block ``block``; returns its
    summary: documents, documents per source, empty documents (no shingles), rejected records
    [source, row or None, reason], skipped files [source, reason] (``Batch.skipped``), the runs
    of its documents' sources and rows (:func:`neardup.stages.corpus.add_row_runs`), and for a
    range read with its rows numbered from 0 (``span`` (first, stop, None)) its ``lines``
    (:func:`neardup.io.splits.range_lines`). Raises the first bad record's error (on_error='fail').
    ``finish(documents) -> dict``, when given, runs once the block's files are complete and adds
    to the summary, which is written last; ``signatures(sig)``, when given, sees each batch's
    signatures in document order (see :func:`block_matcher`). ``span``: the block is one range
    of a split file (:mod:`neardup.io.splits`), ``members`` its one source. The lines of its
    documents read from uncompressed local JSONL files go to the block's ``lines`` file
    (:func:`write_line_bounds`) ``with_lines`` (:func:`.write_lines.records_lines`), for the
    write stage, where it copies kept lines as they are."""
    from ..kernels.minhash import MinHasher
    tune_malloc()
    exact = config.verify == "exact"
    hasher = MinHasher.from_config(config)
    scratch = take_scratch()
    schema = docs_schema(config)
    counted = _PerSource(members)
    summary = {"documents": 0, "per_source": counted, "empty": 0, "rejected": [], "skipped": [], "runs": []}
    lines: Optional[List[np.ndarray]] = [] if with_lines else None
    seen = seen_stats(sources, members) if lines is not None else None  # before the files are read
    # each file appears under its name only when complete, at the end of the with (a temporary
    # name renamed; an upload completed); a failure (a full disk, a bad record) leaves neither
    with work.atomic_write(block_name(block, "arrow")) as arrow_file, \
            work.atomic_write(block_name(block, "fp" if exact else "sig")) as big_file:
        writer = pa.ipc.new_file(arrow_file, schema)
        big = _Writer(big_file)
        try:
            _read_into(config, hasher, scratch, schema, sources, members, summary, writer, big, progress,
                       signatures, span, lines)
        finally:
            give_back_scratch(scratch)
    summary["per_source"] = counted.counts()
    if lines is not None:
        write_line_bounds(work, block, lines, seen)
    if finish is not None:  # e.g. the --against matches: part of the block, done before its summary
        summary.update(finish(summary["documents"]))
    work.write_json(block_name(block, "json"), summary, indent=None)  # one line: the C encoder (per_source of 50k files)
    return summary


_scratches: List[Scratch] = []  # the kernels' buffers of blocks read before, for the next ones
_scratches_lock = threading.Lock()
KEPT_SCRATCHES = 2  # at most this many kept (the local engine reads up to 2 blocks at once)
KEPT_IDLE_S = 2.0  # a process that takes no scratch for this long lets its kept ones go
_kept_until: Optional[float] = None  # when they go (time.monotonic()), unless a block takes one first
_idle = threading.Condition(_scratches_lock)  # wakes this process's one watcher (_let_go_when_idle)
_watcher: Optional[threading.Thread] = None
_stages_here = 0  # read stages running in this process (ReadStage.run): each releases them at its end


def take_scratch() -> Scratch:
    """The kernels' working buffers for one block: those a block read before in this process
    left (their pages already faulted in: pages the kernel zeroes on first touch; a block of 16 MB
    writes ~9 MB of fingerprints there, :func:`neardup.kernels.minhash.values_room`), or new ones."""
    global _kept_until
    from ..kernels.minhash import Scratch
    with _scratches_lock:
        _kept_until = None
        return _scratches.pop() if _scratches else Scratch()


def give_back_scratch(scratch: Scratch) -> None:
    """``scratch`` kept for the next block (at most KEPT_SCRATCHES), until :func:`release_scratches`
    or KEPT_IDLE_S without a block: a Ray worker process that read blocks (several of them on a
    cluster, one a CPU) lets its own go once the read stage is over, where no call of the driver's
    can reach each of them (:func:`released_in_calls` reaches one). One watcher thread a process
    sees to that; none where the read stage itself runs (the local engine: its end releases them)."""
    global _kept_until, _watcher
    with _scratches_lock:
        if len(_scratches) < KEPT_SCRATCHES:
            _scratches.append(scratch)
        if _stages_here:
            return
        _kept_until = time.monotonic() + KEPT_IDLE_S
        if _watcher is None or not _watcher.is_alive():  # not alive: the process forked since
            _watcher = threading.Thread(target=_let_go_when_idle, name="neardup-idle-scratches", daemon=True)
            _watcher.start()
        _idle.notify()


def _let_go_when_idle() -> None:
    """The watcher: :func:`release_scratches` each time KEPT_IDLE_S pass without a block."""
    while True:
        with _idle:
            while _kept_until is None or time.monotonic() < _kept_until:
                _idle.wait(None if _kept_until is None else _kept_until - time.monotonic())
        release_scratches()


def release_scratches(_item=None) -> None:
    """The kept buffers given up (the end of the read stage: the next stages need the memory):
    the kernels', the input blocks' (:class:`neardup.io._streams.BufferPool`) and the JSONL
    texts' (:class:`neardup.kernels.jsonl.TextBuffers`), which a process holds only once it
    imported the scanner (a Ray driver does not: no numba imported)."""
    global _kept_until
    with _scratches_lock:
        _kept_until = None
        _scratches.clear()
    from ..io._streams import block_buffers
    block_buffers.clear()
    jsonl_scanner = sys.modules.get("neardup.kernels.jsonl")
    if jsonl_scanner is not None:
        jsonl_scanner.text_buffers.clear()


@contextmanager
def released_at_the_end():
    """A read stage running in this process: the scratches its blocks leave here are released
    at its end (:func:`release_scratches`), not by the idle watcher (:func:`give_back_scratch`)."""
    global _stages_here
    with _scratches_lock:
        _stages_here += 1
    try:
        yield
    finally:
        with _scratches_lock:
            _stages_here -= 1
        release_scratches()


def released_in_calls(engine) -> None:
    """:func:`release_scratches` as one call of ``engine``, where the read's calls ran: in a Ray
    run's one worker process (:mod:`neardup.engines.ray_runner`) they were kept through the later
    stages, the driver's own release not reaching them (1M documents on 2 CPUs, load 16-18: the
    worker's peak RSS, in the pair stage's call, 906 and 955 -> 871 and 867 MiB); on the local
    engine, this process again. With several worker processes (a cluster's, one a CPU) this call
    reaches one of them; the others let theirs go KEPT_IDLE_S after their last block
    (:func:`give_back_scratch`)."""
    engine.collect(engine.map(release_scratches, [None]))


# the texts of plain JSONL blocks hashed where they lie in the block read (no copy gathers them:
# kernels.shingles.TextSpans); False: gathered into an Arrow array first (the tests compare both)
TEXT_SPANS = True
COALESCE_BYTES = 16 << 20  # text bytes of small batches gathered for one call of the kernels
ALONE_BYTES = COALESCE_BYTES // 2  # a batch of this many text bytes or more is never gathered
PREFETCH_DEPTH = 1  # batches read ahead of the one hashed: a JSONL block (16 MB) is parsed ~4x faster than hashed


def _read_into(config, hasher, scratch, schema, sources, members, summary, writer, big, progress,
               on_signatures=None, span=None, lines: Optional[List[np.ndarray]] = None) -> None:
    """The documents of ``members`` through the kernels into ``writer`` and ``big``. Batches
    smaller than ``config.batch_size`` (small files: one document each) are gathered, up to
    ``batch_size`` documents or COALESCE_BYTES, into one call of the kernels and one record
    batch, which cost the same for one document as for thousands. A batch of ALONE_BYTES or
    more (a 16 MB JSONL block holds ~15 MB of texts) is worth a call by itself: gathered, its
    texts were copied once more to join them to the next batch's (2.3 GB at 1M documents)."""
    pending: List[nio.Batch] = []
    size = {"docs": 0, "bytes": 0}

    def flush() -> None:
        if not pending:
            return
        _process(config, hasher, scratch, schema, pending, summary, writer, big, progress, on_signatures, lines)
        pending.clear()
        size["docs"] = size["bytes"] = 0

    batches = nio.read_sources(sources, members, text_column=config.text_column, id_column=config.id_column,
                               score_column=config.score_column, on_error=config.on_error,
                               batch_size=config.batch_size, span=span, group_files=True, text_spans=TEXT_SPANS)
    try:
        for batch in prefetch(batches, depth=PREFETCH_DEPTH):
            check_interrupt()
            for row, reason in batch.rejected:
                summary["rejected"].append([batch.source_index, row, reason])
            if batch.skipped is not None:
                summary["skipped"].append([batch.source_index, batch.skipped])
            if batch.lines is not None:  # a range's rows numbered from 0: its lines, for the next ranges'
                summary["lines"] = batch.lines
            if len(batch.text) == 0:
                continue
            alone = batch.text.nbytes >= ALONE_BYTES
            if alone:
                flush()  # the batches gathered before it, on their own
            pending.append(batch)
            size["docs"] += len(batch.text)
            size["bytes"] += batch.text.nbytes
            if alone or size["docs"] >= config.batch_size or size["bytes"] >= COALESCE_BYTES:
                flush()
        flush()
    finally:
        writer.close()
        big.close()


def _process(config, hasher, scratch, schema, batches: List[nio.Batch], summary, writer, big, progress,
             on_signatures=None, lines: Optional[List[np.ndarray]] = None) -> None:
    """One call of the kernels over the documents of ``batches``, one record batch written;
    ``on_signatures`` sees the batch's signatures (the --against indexes of other bands and rows);
    ``lines`` gets their documents' lines (``Batch.line_bounds``, -1 where not known)."""
    from ..kernels.bands import band_keys
    from ..kernels.shingles import TextSpans
    exact = config.verify == "exact"
    if len(batches) == 1:
        b = batches[0]
        text, rows, ids, scores = b.text, b.rows, b.ids, b.scores
        source = _row_sources(b)
    else:
        text = pa.concat_arrays([_arrow_text(b.text) for b in batches])
        rows = np.concatenate([b.rows for b in batches])
        source = np.concatenate([_row_sources(b) for b in batches])
        ids = pa.concat_arrays([b.ids for b in batches]) if config.id_column is not None else None
        scores = np.concatenate([b.scores for b in batches]) if config.score_column is not None else None
    m = len(text)
    lengths = arrow(text.lengths() if isinstance(text, TextSpans) else np.diff(string_offsets(text)))
    if batches[0].signatures is not None:  # signatures given, no text (io.formats.signatures; never exact)
        sig, counts, lengths = given_signatures(batches)
        big.write(sig)
    elif exact:
        sig, counts, codes = hasher.signatures_and_codes(text, scratch=scratch)
        big.write(codes)  # a new array each batch: the writer may still be writing the last one
    else:
        sig, counts = hasher.signatures_and_counts(text)
        big.write(sig)
    if on_signatures is not None:
        on_signatures(sig)
    cols = [arrow(source), arrow(np.asarray(rows, np.int64)), lengths, arrow(np.asarray(counts, np.int64)),
            numpy_fixed_binary(band_keys(sig, config.bands, config.rows, config.seed))]
    if config.score_column is not None:
        cols.append(arrow(scores, pa.float64()))
    if config.id_column is not None:
        cols.append(cast_strings(ids, pa.string()))
    writer.write_batch(pa.record_batch(cols, schema=schema))
    add_row_runs(summary, source, rows)
    if lines is not None:
        lines.extend(b.line_bounds if b.line_bounds is not None else np.full((len(b), 2), -1, np.int64)
                     for b in batches)
    summary["documents"] += m
    for b in batches:
        summary["per_source"].add(b)
    summary["empty"] += int((np.asarray(counts) == 0).sum())
    if progress is not None:
        progress(m)


def write_line_bounds(work: Folder, block: int, lines: List[np.ndarray], seen: np.ndarray) -> None:
    """The block's ``lines`` file (:data:`neardup.stages.workdir.LINE_BOUNDS`): each document's
    line as byte offsets of its file, int64 (start, newline's position or the file's end), -1
    where not known (another format, a compressed or remote file); none when no line is known.
    Beside it (:data:`~neardup.stages.workdir.LINE_STATS`) ``seen``: the files as they were
    before they were read (:func:`.write_lines.seen_stats`)."""
    if not any(len(x) and x[0, 0] >= 0 for x in lines):
        return
    write_int64(work, block_name(block, LINE_STATS), seen)  # no rows where every file is racily clean
    write_int64(work, block_name(block, LINE_BOUNDS), np.concatenate(lines))


def write_int64(work: Folder, name: str, values) -> None:
    """The file ``name`` of ``work``: ``values`` as int64 in C order (:func:`array_bytes`)."""
    with work.atomic_write(name) as f:
        f.write(array_bytes(np.asarray(values, np.int64)))


def array_bytes(a: np.ndarray) -> memoryview:
    """The bytes of ``a`` in C order, a view of them where ``a`` is contiguous (no copy into a
    bytes object), of any shape: an empty one's too (a memoryview's cast refuses a shape with a 0)."""
    return memoryview(np.ravel(a).view(np.uint8))


def _arrow_text(text) -> pa.Array:
    """A batch's texts as an Arrow array (:class:`TextSpans` gathered: batches coalesced)."""
    from ..kernels.shingles import TextSpans
    return text.to_arrow() if isinstance(text, TextSpans) else text


def _row_sources(b: nio.Batch) -> np.ndarray:
    """The source index of each row of ``b`` (a batch of many text files names each)."""
    if b.sources is not None:
        return b.sources.astype(np.int32, copy=False)
    return np.full(len(b.text), b.source_index, np.int32)


class _PerSource:
    """The documents of each source of a block (``members``), as the summary's ``per_source``
    keeps them ({str(source): documents}, :meth:`counts`): counted in a numpy array where the
    members are a run of consecutive sources (a plan's block of files; a batch of 100,000 text
    files names each of them, a loop of one dict update a document took 0.03-0.05 CPU-s),
    else in that dict."""

    def __init__(self, members: Sequence[int]):
        self.members = members
        self.first = int(members[0]) if len(members) else 0
        self.array: Optional[np.ndarray] = None
        self.dict: Optional[dict] = None
        if len(members) and np.array_equal(np.asarray(members), np.arange(self.first, self.first + len(members))):
            self.array = np.zeros(len(members), np.int64)
        else:
            self.dict = {str(si): 0 for si in members}

    def add(self, b: nio.Batch) -> None:
        """The documents of ``b`` added to the count of each source."""
        if self.array is not None:
            if b.sources is None:
                self.array[b.source_index - self.first] += len(b.text)
            else:
                self.array += np.bincount(np.asarray(b.sources, np.int64) - self.first, minlength=len(self.array))
        elif b.sources is None:
            self.dict[str(b.source_index)] += len(b.text)
        else:
            for si in b.sources.tolist():
                self.dict[str(si)] += 1

    def counts(self) -> dict:
        """{str(source): documents} of each member, in their order."""
        if self.array is None:
            return self.dict
        return dict(zip(map(str, self.members), self.array.tolist()))


def given_signatures(batches: List[nio.Batch]):
    """(signatures, shingle counts, text lengths) of batches read from signature files."""
    sig = np.concatenate([b.signatures for b in batches]) if len(batches) > 1 else batches[0].signatures
    counts = np.concatenate([b.counts for b in batches])
    lengths = arrow(np.concatenate([b.lengths for b in batches]).astype(np.int64))
    return np.ascontiguousarray(sig, np.uint32), counts, lengths


# --------------------------------------------------------------------------- user ids

DUP_SCHEMA = pa.schema([("later", pa.int64()), ("first", pa.int64()), ("id", pa.string())])


def duplicate_ids(docs: np.ndarray, ids: pa.Array) -> pa.Table:
    """Among documents ``docs`` with user ids ``ids`` (one partition: every document of an id is
    here): each document whose id an earlier document has, with the first of them."""
    if len(docs) < 2:
        return empty_table(DUP_SCHEMA)
    import pyarrow.compute as pc  # (ids that may repeat; sort_by imports it too)

    t = pa.table({"doc": arrow(np.asarray(docs, np.int64)), "id": ids}).sort_by([("id", "ascending"),
                                                                                    ("doc", "ascending")])
    sid = t.column("id").combine_chunks()
    same = to_numpy(pc.equal(sid.slice(1), sid.slice(0, len(sid) - 1)))
    dup = np.flatnonzero(same) + 1
    if len(dup) == 0:
        return empty_table(DUP_SCHEMA)
    is_start = np.ones(len(sid), bool)
    is_start[dup] = False
    first = np.maximum.accumulate(np.where(is_start, np.arange(len(sid)), 0))[dup]
    doc = to_numpy(t.column("doc"))
    return pa.table({"later": arrow(doc[dup]), "first": arrow(doc[first]), "id": sid.take(arrow(dup))},
                    schema=DUP_SCHEMA)


_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def duplicate_id_rejections(dups: pa.Table, where: Callable[[np.ndarray], List[Tuple[int, int]]],
                            sources: Sequence[nio.Source], on_error: str, found_column: bool = False) -> List[list]:
    """Duplicate ids: an error naming both places (on_error='fail', the first duplicate in id
    order), or the later documents rejected: [doc, reason] in document order.
    ``where(docs)`` gives (source, row) of documents. ``found_column``: the id column is the
    ``id`` field every input has, not one the user named: a repeat is an error whatever
    ``on_error`` says, one that says how to choose the ids."""
    if dups.num_rows == 0:
        return []
    dups = dups.sort_by([("id", "ascending"), ("later", "ascending")])
    later = to_numpy(dups.column("later"))
    first = to_numpy(dups.column("first"))
    ids = dups.column("id").to_pylist()
    at_later = where(later)
    at_first = where(first)
    out = []
    for i in range(len(later)):
        where_first = place(sources[at_first[i][0]], at_first[i][1])
        where_later = place(sources[at_later[i][0]], at_later[i][1])
        # a number and a string of its digits (1 and "1") are one id: say so where it may be that
        as_text = (" (ids are compared as text: a number and the string of its digits are one id)"
                   if _NUMBER.fullmatch(ids[i]) else "")
        if found_column:
            raise InputError(f"{where_later}: duplicate id {ids[i]!r} (first at {where_first}) in the 'id' field "
                             f"that every input has, taken as the ids{as_text}; choose the ids: --id-column NAME "
                             f"(id_column='NAME') for a unique field, or --id-column '' (id_column='') for "
                             f"positions (FILE:LINE, FILE:ROW)")
        if on_error == "fail":
            raise InputError(f"{where_later}: duplicate id {ids[i]!r} (first at {where_first}){as_text}; "
                             f"ids in --id-column must be unique")
        out.append([int(later[i]), f"duplicate id {ids[i]!r} (first at {where_first})"])
    out.sort(key=lambda r: r[0])
    return out


# --------------------------------------------------------------------------- the stage


class ReadStage:
    name = "read"

    def run(self, run, engine) -> ReadInfo:
        run.forget_corpus()
        blocks = run.work.plan(run.sources)
        if run.config.against:  # one state of each index for every block, and for a resumed run
            from .against import pin_indexes
            pin_indexes(run.work.folder, run.config)
        todo = [b for b in range(len(blocks)) if run.work.block_summary(b) is None]
        task = run.task(engine, with_store=False)
        spans = range_spans(run.work)
        total = None if run.quiet else nio.estimate_documents(run.sources)
        with bar("read + signatures", total=total, quiet=run.quiet) as progress:
            with released_at_the_end():
                summaries = engine.collect(engine.map(partial(read_partition, task=task,
                                                              with_lines=records_lines(run.config, run.output)),
                                                      [(b, blocks[b], spans.get(b)) for b in todo],
                                                      progress=progress, units=lambda summary: summary["documents"],
                                                      concurrent=read_concurrency(engine, spans)))
            released_in_calls(engine)
            progress.total = sum(s["documents"] for s in summaries)  # the estimate is replaced by the true count
            progress.refresh()
        return self.finish(run, engine, len(blocks), len(todo))

    def finish(self, run, engine, blocks: int, blocks_read: int) -> ReadInfo:
        """Once every block is read: the run's size checks and the duplicate-id check."""
        corpus = run.corpus
        records = corpus.rejected_records()
        skipped_files = skipped_of(run.work, corpus, records, len(run.sources))
        if corpus.n == 0 and not records:
            raise InputError(no_documents(run.sources, skipped_files, run.config.input_format))
        if corpus.n >= MAX_DOCUMENTS:
            raise InputError(f"{corpus.n:,} documents in one run; neardup handles fewer than 2^32 "
                             f"({MAX_DOCUMENTS:,}) per run: split the input and deduplicate against an index")
        store = run.store
        rejected_docs: List[Tuple[int, str]] = []
        if run.config.id_column is not None and corpus.n >= 2:
            task = run.task(engine)
            # a block's ids read and hashed a thread each here (the kernel holds no GIL): 36 blocks
            # of 1M documents one after another took 50-63 ms of the stage's end, one core idle
            ids = engine.map(partial(id_rows, task=task), range(len(corpus.blocks)), concurrent=engine.cpus)
            nbytes = corpus.n * 48
            parts = 1 if engine.one_call(nbytes) else engine.partitions(nbytes)  # one node: no shuffle to pay
            found = engine.collect(engine.map(duplicate_ids_of, engine.shuffle(ids, "key", parts)))
            dups = pa.concat_tables(found) if found else empty_table(DUP_SCHEMA)
            rejected_docs = duplicate_id_rejections(dups, partial(_where, store), run.sources, run.config.on_error,
                                                    found_column=run.config.id_column_auto)
        empty_rejected = 0
        if rejected_docs:
            counts = store.columns(np.array([d[0] for d in rejected_docs], np.int64), ["count"])["count"]
            empty_rejected = int((counts == 0).sum())
        return ReadInfo(documents=corpus.n, blocks=blocks, blocks_read=blocks_read,
                        per_source=corpus.per_source(len(run.sources)), rejected_records=len(records),
                        skipped_files=skipped_files,
                        rejected_documents=rejected_docs,
                        empty_kept=int(sum(s["empty"] for s in corpus.summaries)) - empty_rejected)


def no_documents(sources, skipped_files: Sequence[Sequence], input_format: str) -> str:
    """The message of a run whose input holds no documents: the one file named alone and why it
    holds none, or how many files were skipped of each kind, and a hint only where one helps
    (never the option the run already has)."""
    counts = nio.skip_counts(reason for _, reason in skipped_files)
    hints = []
    if input_format != "text" and "not JSON Lines (.json)" in counts:
        hints.append("--input-format text reads every file as a document")
    if "without the text field" in counts:
        hints.append("--text-column names the field that holds the text")
    if len(sources) == 1 and skipped_files:
        hint = f" ({'; '.join(hints)})" if hints else ""
        return f"no documents in the input: {sources[0].name}: {skipped_files[0][1]}{hint}"
    if not counts:
        return "no documents in the input"
    n = len(skipped_files)
    kinds = ", ".join(f"{k:,} {words}" for words, k in counts.items())
    hint = "; " + "; ".join(hints) if hints else ""
    return f"no documents in the input ({n:,} file{'s' if n != 1 else ''} skipped: {kinds}{hint})"


def skipped_of(work, corpus, records, n_sources: int) -> List[list]:
    """[source, reason] of the files that hold no documents (``Batch.skipped``), in source order:
    the blocks', and a split file none of whose ranges has a record (no document, no rejected
    line), empty as when read whole (a range never says so: it sees only part of the file)."""
    out = [x for s in corpus.summaries for x in s["skipped"]]
    split = {corpus.blocks[b][0] for b in work.ranges()}
    if split:
        per_source = corpus.per_source(n_sources)
        rejected = {r[0] for r in records}
        out += [[si, nio.EMPTY_FILE] for si in sorted(split) if per_source[si] == 0 and si not in rejected]
        out.sort(key=lambda x: x[0])
    return out


def read_partition(block_members, *, task, with_lines: bool = False, report=None) -> dict:
    """One block of the plan, (block, its sources, its range: the nominal span of one range of
    a split file, or None): read, its summary returned (a range's rows numbered from 0);
    ``with_lines`` as for :func:`read_block`."""
    block, members, span = block_members
    if span is not None:
        span = (*range_bytes(task.sources[members[0]], *span), None)
    matcher = block_matcher(task.work, task.config, block)
    return read_block(task.work, task.config, task.sources_with_tables(), block, members, progress=report,
                      finish=matcher and matcher.finish, signatures=matcher and matcher.signatures, span=span,
                      with_lines=with_lines)


def range_spans(work) -> dict:
    """{block: (nominal start, nominal end)} of the blocks that are ranges of a split file
    (:mod:`neardup.io.splits`): each is read by its own task, which finds its first and stop
    bytes and numbers its rows from 0 (no pass over the file before the ranges are read: the
    first lines are summed from the block summaries' ``lines`` once every range is read)."""
    return {b: tuple(r) for b, r in work.ranges().items()}


def read_concurrency(engine, spans: dict) -> int:
    """How many blocks an engine that runs its calls one after another reads at once: with the
    ranges of a split file, several (each range's parsing is one thread; the kernels use every
    core anyway): a quarter of the cores, at least 2; else 1 (blocks one after another)."""
    if not spans:
        return 1
    return max(2, getattr(engine, "cpus", 1) // 4)


def range_bytes(src, start: int, end: int) -> Tuple[int, int]:
    """(first byte, stop byte) of the range of nominal span [start, end) of ``src``
    (:func:`neardup.io.splits.line_span`)."""
    try:
        return line_span(src.path, start, end)
    except OSError as e:
        raise cannot_read(src, e) from None


def block_matcher(work: Folder, config, block: int):
    """What a read block does with --against indexes (None without): band keys made from the
    signatures for an index whose bands and rows are not the run's, and once the block's files
    are complete, before its summary marks it done, the matches."""
    if not config.against:
        return None
    from .against import BlockMatcher
    return BlockMatcher(work, block, config)


def _where(store, docs) -> List[Tuple[int, int]]:
    """(source, row) of documents in any order."""
    docs = np.asarray(docs, np.int64)
    order = np.argsort(docs, kind="stable")
    cols = store.columns(docs[order], ["source", "row"])
    out = np.empty((len(docs), 2), np.int64)
    out[order, 0], out[order, 1] = cols["source"], cols["row"]
    return [tuple(x) for x in out.tolist()]


def id_rows(block: int, *, task) -> pa.Table:
    """(key, doc, id) of every document of a block; key: the id's hash, to shuffle on."""
    from ..kernels.hashing import string_hash
    store = task.store
    ids = store.table(block, ["id"]).column(0).combine_chunks()
    docs = np.arange(store.block_start[block], store.block_start[block + 1], dtype=np.int64)
    return pa.table({"key": arrow(string_hash(ids)), "doc": arrow(docs), "id": ids})


def duplicate_ids_of(table: pa.Table) -> pa.Table:
    """One partition of id rows (every document of an id is in it): :func:`duplicate_ids`, unless
    the rows' keys (their ids' hashes, :func:`id_rows`) are all distinct, the usual case: the
    documents of an id share its key, so distinct keys are distinct ids, and the sort by id is
    not needed (a sort of 64-bit keys: 0.6 ms at 100,000 documents, the sort by id 4 ms). The keys
    are joined by numpy and sorted in place: Arrow's ``combine_chunks`` took fresh memory from its
    pool (huge pages zeroed at first touch), numpy's malloc reuses what the read stage freed (1M
    documents in a whole run: this call 31-44 -> 12-26 ms)."""
    if table.num_rows == 0:
        return empty_table(DUP_SCHEMA)
    keys = np.concatenate([to_numpy(chunk) for chunk in table.column("key").chunks])
    keys.sort()
    if not (keys[1:] == keys[:-1]).any():
        return empty_table(DUP_SCHEMA)
    return duplicate_ids(to_numpy(table.column("doc").combine_chunks()), table.column("id").combine_chunks())
