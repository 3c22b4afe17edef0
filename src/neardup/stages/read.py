"""Stage ``read``: one block of input files -> its document shard (see :mod:`.layout`).

Partitions: the blocks of the read plan not yet read (a block holds whole files). :func:`read_block`
is the whole work of one block: it streams the block's files through :func:`neardup.io.read_source`,
runs the kernels (tokens, shingle hashes, MinHash, band keys) on each batch, and writes the block's
files under temporary names, the summary last. Then, over the whole corpus: the run's size checks
and, with ``--id-column``, the duplicate-id check (ids shuffled on their hash:
:func:`duplicate_ids` over each partition, :func:`duplicate_id_rejections` at the end).
"""

from __future__ import annotations

import queue
import threading
from functools import partial
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import arrow, empty_table, to_numpy
from .. import eliasfano, io as nio
from ..bands import band_keys
from ..errors import InputError
from ..hashing import string_hash
from ..minhash import MinHasher, Scratch
from ..io import fs
from ..progress import bar, check_interrupt
from .layout import MAX_DOCUMENTS, ReadInfo, block_path, docs_schema, numpy_fixed_binary, write_json


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
    """Runs an iterator in a thread, ``depth`` items ahead, so that reading overlaps the kernels
    (pyarrow's parser and the numba kernels release the GIL); its exceptions are re-raised here."""
    q: "queue.Queue" = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def worker():
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("end", None))
        except BaseException as exc:  # re-raised in the consumer
            q.put(("error", exc))

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "item":
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
    stall overlaps work). Writes into ``sink``, a binary file it closes, what ``code`` makes of
    each item queued (default: the array itself); the coding runs in this thread too."""

    def __init__(self, sink, depth: int = 16, code: Optional[Callable] = None):
        self._f = sink
        self._code = code
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
                    if self._code is not None:
                        data = self._code(*data)
                    self._f.write(memoryview(np.ascontiguousarray(data)).cast("B"))
                except BaseException as exc:  # raised again in the caller's thread
                    self._error = exc

    def write(self, *item) -> None:
        """Queues ``item``, the arguments of ``code`` (or one array to write as it is); not copied:
        the caller must not change them afterwards."""
        if self._error is not None:
            raise self._error
        self._queue.put(item if self._code is not None else item[0])

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._f.close()
        if self._error is not None:
            raise self._error


def read_block(work_path: str, config, sources: Sequence[nio.Source], block: int, members: Sequence[int],
               progress: Optional[Callable[[int], None]] = None,
               finish: Optional[Callable[[int], dict]] = None) -> dict:
    """Reads the sources ``members`` (indices into ``sources``) as block ``block``; returns its
    summary: documents, documents per source, empty documents (no shingles), rejected records
    [source, row or None, reason]. Raises the first bad record's error (on_error='fail').
    ``finish(documents) -> dict``, when given, runs once the block's files are complete and adds
    to the summary, which is written last (see :func:`neardup.stages.block_finish`)."""
    exact = config.verify == "exact"
    hasher = MinHasher.from_config(config)
    scratch = Scratch()
    schema = docs_schema(config)
    arrow_path = block_path(work_path, block, "arrow")
    big_path = block_path(work_path, block, "fp" if exact else "sig")
    summary = {"documents": 0, "per_source": {str(si): 0 for si in members}, "empty": 0, "rejected": []}
    # each file appears under its name only when complete, at the end of the with (a temporary
    # name renamed; an upload completed); a failure (a full disk, a bad record) leaves neither
    with fs.atomic_write(arrow_path) as arrow_file, fs.atomic_write(big_path) as big_file:
        writer = pa.ipc.new_file(arrow_file, schema)
        big = _Writer(big_file, code=eliasfano.encode if exact else None)
        _read_into(config, hasher, scratch, schema, sources, members, summary, writer, big, progress)
    if finish is not None:  # e.g. the --against matches: part of the block, done before its summary
        summary.update(finish(summary["documents"]))
    write_json(block_path(work_path, block, "json"), summary)
    return summary


def _read_into(config, hasher, scratch, schema, sources, members, summary, writer, big, progress) -> None:
    exact = config.verify == "exact"

    def batches():
        for si in members:
            yield from nio.read_source(sources[si], si, text_column=config.text_column, id_column=config.id_column,
                                       score_column=config.score_column, on_error=config.on_error,
                                       batch_size=config.batch_size)

    try:
        for batch in prefetch(batches()):
            check_interrupt()
            for row, reason in batch.rejected:
                summary["rejected"].append([batch.source_index, row, reason])
            m = len(batch.text)
            if m == 0:
                continue
            if exact:
                sig, off, fp = hasher.signatures_and_fingerprints(batch.text, scratch=scratch)
                counts = np.diff(off)
                big.write(off, fp)  # coded in the writer's thread (fp is a new array each batch)
            else:
                sig, counts = hasher.signatures_and_counts(batch.text)
                big.write(sig)
            cols = [arrow(np.full(m, batch.source_index, np.int32)), arrow(np.asarray(batch.rows, np.int64)),
                    pc.binary_length(batch.text).cast(pa.int64()), arrow(np.asarray(counts, np.int64)),
                    numpy_fixed_binary(band_keys(sig, config.bands, config.rows, config.seed))]
            if config.score_column is not None:
                cols.append(arrow(batch.scores, pa.float64()))
            if config.id_column is not None:
                cols.append(batch.ids.cast(pa.string()))
            writer.write_batch(pa.record_batch(cols, schema=schema))
            summary["documents"] += m
            summary["per_source"][str(batch.source_index)] += m
            summary["empty"] += int((np.asarray(counts) == 0).sum())
            if progress is not None:
                progress(m)
    finally:
        writer.close()
        big.close()


# --------------------------------------------------------------------------- user ids

DUP_SCHEMA = pa.schema([("later", pa.int64()), ("first", pa.int64()), ("id", pa.string())])


def duplicate_ids(docs: np.ndarray, ids: pa.Array) -> pa.Table:
    """Among documents ``docs`` with user ids ``ids`` (one partition: every document of an id is
    here): each document whose id an earlier document has, with the first of them."""
    if len(docs) < 2:
        return empty_table(DUP_SCHEMA)
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


def duplicate_id_rejections(dups: pa.Table, where: Callable[[np.ndarray], List[Tuple[int, int]]],
                            sources: Sequence[nio.Source], on_error: str) -> List[list]:
    """Duplicate ids: an error naming both places (on_error='fail', the first duplicate in id
    order), or the later documents rejected: [doc, reason] in document order.
    ``where(docs)`` gives (source, row) of documents."""
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
        if on_error == "fail":
            raise InputError(f"{where_later}: duplicate id {ids[i]!r} (first at {where_first}); "
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
        todo = [b for b in range(len(blocks)) if run.work.block_summary(b) is None]
        task = run.task(engine, with_store=False)
        total = None if run.quiet else nio.estimate_documents(run.sources)
        with bar("read + signatures", total=total, quiet=run.quiet) as progress:
            summaries = engine.collect(engine.map(partial(read_partition, task=task), [(b, blocks[b]) for b in todo],
                                                  progress=progress, units=lambda summary: summary["documents"]))
            progress.total = sum(s["documents"] for s in summaries)  # the estimate is replaced by the true count
            progress.refresh()
        return self.finish(run, engine, len(blocks), len(todo))

    def finish(self, run, engine, blocks: int, blocks_read: int) -> ReadInfo:
        """Once every block is read: the run's size checks and the duplicate-id check."""
        corpus = run.corpus
        records = corpus.rejected_records()
        if corpus.n == 0 and not records:
            raise InputError("no documents in the input")
        if corpus.n >= MAX_DOCUMENTS:
            raise InputError(f"{corpus.n:,} documents in one run; neardup handles fewer than 2^32 "
                             f"({MAX_DOCUMENTS:,}) per run: split the input and deduplicate against an index")
        store = run.store
        rejected_docs: List[Tuple[int, str]] = []
        positional = False
        if run.config.id_column is not None and corpus.n >= 2:
            task = run.task(engine)
            ids = engine.map(partial(id_rows, task=task), range(len(corpus.blocks)))
            found = engine.collect(engine.map(duplicate_ids_of, engine.shuffle(ids, "key", engine.partitions(corpus.n * 48))))
            dups = pa.concat_tables(found) if found else empty_table(DUP_SCHEMA)
            if run.config.id_column_auto and dups.num_rows:
                positional = True  # the input's own id field is not unique: FILE:LINE ids instead
            else:
                rejected_docs = duplicate_id_rejections(dups, partial(_where, store), run.sources, run.config.on_error)
        empty_rejected = 0
        if rejected_docs:
            counts = store.columns(np.array([d[0] for d in rejected_docs], np.int64), ["count"])["count"]
            empty_rejected = int((counts == 0).sum())
        return ReadInfo(documents=corpus.n, blocks=blocks, blocks_read=blocks_read,
                        per_source=corpus.per_source(len(run.sources)), rejected_records=len(records),
                        rejected_documents=rejected_docs, positional_ids=positional,
                        empty_kept=int(sum(s["empty"] for s in corpus.summaries)) - empty_rejected)


def read_partition(block_members, *, task, report=None) -> dict:
    """One block of the plan, (block, its sources): read, its summary returned."""
    block, members = block_members
    return read_block(task.work_path, task.config, task.sources_with_tables(), block, members, progress=report,
                      finish=block_finish(task.work_path, task.config, block))


def block_finish(work_path: str, config, block: int):
    """What a read block does once its files are complete, before its summary marks it done:
    the --against matches (None without indexes)."""
    if not config.against:
        return None
    from .against import match_block
    return lambda documents: {"against_matched": match_block(work_path, block, documents, config)}


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
    store = task.store
    ids = store.table(block, ["id"]).column(0).combine_chunks()
    docs = np.arange(store.block_start[block], store.block_start[block + 1], dtype=np.int64)
    return pa.table({"key": arrow(string_hash(ids)), "doc": arrow(docs), "id": ids})


def duplicate_ids_of(table: pa.Table) -> pa.Table:
    """One partition of id rows (every document of an id is in it): :func:`duplicate_ids`."""
    if table.num_rows == 0:
        return empty_table(DUP_SCHEMA)
    return duplicate_ids(to_numpy(table.column("doc").combine_chunks()), table.column("id").combine_chunks())
