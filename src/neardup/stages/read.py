"""Stage ``read``: one block of input files -> its document shard (see :mod:`.layout`).

:func:`read_block` is the whole stage for one block, the same call under every engine: it
streams the block's files through :func:`neardup.io.read_source`, runs the kernels (tokens,
shingle hashes, MinHash, band keys) on each batch, and writes the block's files under temporary
names, the summary last. :class:`DocStore` reads back what verification needs for any set of
documents. :func:`duplicate_ids` and :func:`duplicate_id_rejections` check user ids.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import arrow, empty_table, to_numpy, unique
from .. import io as nio
from ..bands import band_keys
from ..errors import InputError
from ..minhash import MinHasher, Scratch
from ..io import fs, ranges
from ..progress import check_interrupt
from .layout import block_path, docs_schema, numpy_fixed_binary, write_json


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
    """One thread that writes the big raw column while the kernels compute the next batch (a
    write into the page cache can stall on a slow disk, an upload on the network; queued here,
    the stall overlaps work). Writes into ``sink``, a binary file it closes."""

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
                    self._f.write(memoryview(data).cast("B"))
                except BaseException as exc:  # raised again in the caller's thread
                    self._error = exc

    def write(self, arr: np.ndarray) -> None:
        """Queues ``arr`` (not copied: the caller must not change it afterwards)."""
        if self._error is not None:
            raise self._error
        self._queue.put(np.ascontiguousarray(arr))

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
        _read_into(config, hasher, scratch, schema, sources, members, summary, writer, _Writer(big_file), progress)
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
                big.write(fp)
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


# --------------------------------------------------------------------------- reading back


class DocStore:
    """Per-document data of any documents, read from the blocks' files: signatures, raw shingle
    hashes, and the columns of the Arrow shard. Picklable (paths and offsets only), so that a
    Ray task gets one; the files are opened on demand."""

    REMOTE_TABLES = 8  # columns of Arrow shards kept in memory when the work dir is remote (one GET each otherwise)

    def __init__(self, work_path: str, block_start: np.ndarray, num_perm: int):
        self.work_path = work_path
        self.block_start = np.asarray(block_start, dtype=np.int64)
        self.num_perm = num_perm
        self._count_offsets: Dict[int, np.ndarray] = {}
        self._tables: "OrderedDict[int, pa.Table]" = OrderedDict()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tables"] = OrderedDict()  # a cache, not sent to Ray tasks
        return state

    def _path(self, block: int, ext: str) -> str:
        return block_path(self.work_path, block, ext)

    def source_rows(self, block: int, si: int) -> np.ndarray:
        """The rows of source ``si``'s documents (it lies whole in ``block``), in file order."""
        t = self.table(block, ["source", "row"])
        mask = to_numpy(t.column("source")) == si
        return to_numpy(t.column("row"))[mask]

    def _by_block(self, docs: np.ndarray):
        docs = np.asarray(docs, dtype=np.int64)
        blk = np.searchsorted(self.block_start, docs, side="right") - 1
        for b in unique(blk).tolist():
            sel = np.flatnonzero(blk == b)
            yield b, sel, docs[sel] - self.block_start[b]

    def table(self, block: int, columns: List[str]) -> pa.Table:
        return ranges.arrow_columns(self._path(block, "arrow"), columns, self._tables, self.REMOTE_TABLES)

    def columns(self, docs: np.ndarray, columns: List[str]) -> Dict[str, np.ndarray]:
        """Numeric columns of ascending ``docs``."""
        out = {c: [] for c in columns}
        for b, _sel, local in self._by_block(docs):
            t = self.table(b, columns)
            for c in columns:
                out[c].append(to_numpy(t.column(c).take(arrow(local))))
        return {c: (np.concatenate(v) if v else np.zeros(0)) for c, v in out.items()}

    def ids(self, docs: np.ndarray) -> pa.Array:
        parts = []
        for b, _sel, local in self._by_block(docs):
            parts.append(self.table(b, ["id"]).column(0).take(arrow(local)).combine_chunks())
        return pa.concat_arrays(parts) if parts else arrow([], pa.string())

    def signatures(self, docs: np.ndarray) -> np.ndarray:
        """(len(docs), num_perm) uint32 for ascending docs."""
        k = self.num_perm
        parts = []
        for b, _sel, local in self._by_block(docs):
            _, vals = ranges.read_rows(self._path(b, "sig"), local * k, (local + 1) * k, np.uint32)
            parts.append(vals.reshape(-1, k))
        if len(parts) == 1:  # one block (the usual case): no second copy
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros((0, k), np.uint32)

    def _offsets(self, block: int) -> np.ndarray:
        if block not in self._count_offsets:
            counts = to_numpy(self.table(block, ["count"]).column(0))
            off = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=off[1:])
            self._count_offsets[block] = off
        return self._count_offsets[block]

    def fingerprints(self, docs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Shingle fingerprints (uint32, the high halves of the shingle hashes, text order,
        repeats) of ascending docs, as CSR by position in docs."""
        offs, vals = [np.zeros(1, np.int64)], []
        base = 0
        for b, _sel, local in self._by_block(docs):
            off = self._offsets(b)
            o, v = ranges.read_rows(self._path(b, "fp"), off[local], off[local + 1], np.uint32)
            offs.append(o[1:] + base)
            base += len(v)
            vals.append(v)
        if len(vals) == 1:  # one block (the usual case): no second copy of the hashes
            return np.concatenate(offs), vals[0]
        return np.concatenate(offs), (np.concatenate(vals) if vals else np.zeros(0, np.uint32))


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
