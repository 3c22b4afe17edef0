"""The work of the Ray engine's tasks: plain functions over Arrow tables, without Ray.

Every function here runs inside a Ray task (a read task, a ``map_batches`` call over one block,
or the call over one whole partition after a keyed shuffle) and is a pure function of its input
and of the work directory, so that a task retried after a worker died computes the same output
and overwrites the same files. :mod:`neardup.engines.ray` wires them into Ray Data pipelines.

Partitions. A keyed shuffle here is ``ds.sort("part", boundaries=[1, ..., P-1])`` on an int32
column ``part`` in [0, P): the pull-based sort puts exactly the rows of one part value into one
output block, and ``map_batches(batch_size=None)`` hands that block to one call. ``part`` is a
hash of the key (band key, bucket anchor, pair code, graph node) or a range of document indices
(``chunk``), for steps that read per-document data from the read stage's shards.

Shards. The read stage writes each block of consecutive documents (in the global order: file
order, then row order) as one uncompressed Arrow IPC file ``read/shards/sSSSSSS-pPPPPPPPPPPPP.arrow``
(source index and position among that file's documents of its first document) with the
per-document columns; the document index of position ``pos`` of source ``s`` is
``offset[s] + pos``. Later stages memory-map a shard and take only the rows they need
(:class:`ShardIndex`); the work directory must be visible to every node (a shared file system).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import io as nio
from ..bands import band_keys, find_pairs, pair_codes, split_codes
from ..clusters import keep_order, select_representatives
from ..errors import NeardupError
from ..hashing import kernel_threads, mix64
from ..minhash import MinHasher, sort_unique_sets
from ..verify import estimated_jaccard, exact_jaccard
from .local import prefetch

SHARD_BATCH = 8192              # rows per record batch in a shard file
BLOCK_DOCS = 16384              # documents per read block (and per shard file)
BLOCK_TEXT_BYTES = 32 << 20     # ... or this many bytes of text, whichever comes first
BUCKET_BITS = 40                # bucket id = band partition << 40 | ordinal in the partition
SHARD_OPTS = dict(compression="none", use_dictionary=False, write_statistics=False)

# --------------------------------------------------------------------------- small helpers


def part_of(x, parts: int) -> np.ndarray:
    """Hash partition in [0, parts) of integer keys (int32)."""
    return (mix64(x) % np.uint64(parts)).astype(np.int32)


def _combined(arr):
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            return arr.chunk(0)
        if arr.num_chunks == 0:
            return pa.array([], type=arr.type)
        return arr.combine_chunks()
    return arr


def col(table: pa.Table, name: str, dtype=None) -> np.ndarray:
    """A numeric column as numpy (no nulls)."""
    a = _combined(table.column(name)).to_numpy(zero_copy_only=False)
    return a if dtype is None else a.astype(dtype, copy=False)


def fsb_array(mat: np.ndarray) -> pa.Array:
    """(n, w) numpy -> fixed_size_binary(w * itemsize) Arrow array, one row per document."""
    mat = np.ascontiguousarray(mat)
    n = mat.shape[0]
    width = int(mat.shape[1] * mat.itemsize) if mat.ndim == 2 else int(mat.itemsize)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(max(width, 1)), n, [None, pa.py_buffer(mat.tobytes())])


def fsb_numpy(arr, dtype, width: int) -> np.ndarray:
    """fixed_size_binary Arrow array -> (n, width) numpy of dtype."""
    arr = _combined(arr)
    n = len(arr)
    if n == 0:
        return np.zeros((0, width), dtype=dtype)
    bw = arr.type.byte_width
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=(arr.offset + n) * bw)[arr.offset * bw:]
    return raw.view(dtype).reshape(n, width)


def list_csr(arr) -> Tuple[np.ndarray, np.ndarray]:
    """list / large_list Arrow array -> (offsets int64[n+1] from 0, values)."""
    arr = _combined(arr)
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    values = arr.values.to_numpy(zero_copy_only=False)[offsets[0]:offsets[-1]]
    return offsets - offsets[0], values


def csr_list(offsets: np.ndarray, values: np.ndarray, value_type=pa.uint64()) -> pa.Array:
    return pa.LargeListArray.from_arrays(pa.array(np.asarray(offsets, np.int64)),
                                         pa.array(values, type=value_type))


def _atomic_parquet(table: pa.Table, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    pq.write_table(table, tmp, **SHARD_OPTS)
    os.replace(tmp, path)


def _atomic_arrow(table: pa.Table, path: str) -> None:
    """An uncompressed Arrow IPC file (memory-mappable: a lookup touches only its rows' pages)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with pa.OSFile(tmp, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table, max_chunksize=SHARD_BATCH)
    os.replace(tmp, path)


def read_table(path: str, columns: Optional[List[str]] = None) -> pa.Table:
    """A work-directory file (Arrow IPC, memory-mapped, or Parquet) as a table."""
    if path.endswith(".arrow"):
        with pa.memory_map(path) as f:
            t = pa.ipc.open_file(f).read_all()
        return t.select(columns) if columns is not None else t
    return pq.read_table(path, columns=columns)


def runs(*keys: np.ndarray) -> np.ndarray:
    """Start positions of runs of equal consecutive values of all keys (sorted input)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


# --------------------------------------------------------------------------- worker warm-up


def warm_up(config) -> int:
    """Loads every compiled kernel a run uses into this worker (numba's on-disk cache), on a few
    tiny inputs, so that no stage waits for it later; returns the process id."""
    with kernel_threads(1):
        hasher = MinHasher.from_config(dataclasses.replace(config, workers=1))
        texts = pa.array(["a b c d e f g h i j", "a b c d e f g h i k"], pa.large_string())
        if config.verify == "exact":
            sig, off, sh = hasher.signatures_and_shingles(texts)
            offsets, hashes = sort_unique_sets(off, sh)
            verify = lambda l, r: (exact_jaccard(offsets, hashes, l, r) >= 0.5, exact_jaccard(offsets, hashes, l, r))  # noqa: E731
        else:
            sig, _ = hasher.signatures_and_counts(texts)
            verify = lambda l, r: (estimated_jaccard(sig, l, r) >= 0.5, estimated_jaccard(sig, l, r))  # noqa: E731
        band_keys(sig, config.bands, config.rows, config.seed)
        find_pairs(np.array([0, 2], np.int64), np.array([0, 1], np.int64), verify, max_rounds=2)
        select_representatives(2, np.array([0]), np.array([1]), np.array([1.0]))
        string_hash(pa.array(["x"]))
    return os.getpid()


# --------------------------------------------------------------------------- read stage


READ_SCHEMA = pa.schema([("source", pa.int32()), ("pos", pa.int64()), ("row", pa.int64()),
                         ("text", pa.large_string()), ("id", pa.string()), ("score", pa.float64()),
                         ("reason", pa.string()), ("fatal", pa.string())])

SUMMARY_SCHEMA = pa.schema([("kind", pa.int8()),        # 0 shard segment, 1 rejected record, 2 fatal error
                            ("source", pa.int32()),
                            ("pos0", pa.int64()),        # first position in the source (rejected: order)
                            ("n", pa.int64()),           # documents of the source in the shard
                            ("zero", pa.int64()),        # ... of which without shingles
                            ("row", pa.int64()),         # rejected: the row (-1: the whole file)
                            ("reason", pa.string()), ("fatal", pa.string()), ("path", pa.string())])


def read_sources_blocks(items: Sequence[Tuple[int, nio.Source, object]], config) -> Iterator[pa.Table]:
    """The read task of consecutive input files: their documents in order as blocks of
    READ_SCHEMA, at most BLOCK_DOCS documents or BLOCK_TEXT_BYTES of text each.

    A document's ``pos`` is its position among its file's documents; a rejected record
    (on_error='skip') is a row with ``reason`` set and ``pos`` its rank among the file's
    rejections; an error that stops the run (on_error='fail') is a last row with ``fatal`` set to
    the error's class name, so that the driver raises the first one in file order, as the local
    engine does (files after it in this task are not read: their errors could not come first).
    """
    pending: List[nio.Batch] = []
    positions: List[np.ndarray] = []
    rejected: List[Tuple[int, int, str]] = []
    state = {"docs": 0, "bytes": 0}
    seq: Dict[int, int] = {}

    def flush(fatal: Optional[Tuple[int, str, str]] = None) -> Optional[pa.Table]:
        parts = []
        if pending:
            n = sum(len(b) for b in pending)
            ids = (pa.concat_arrays([b.ids for b in pending]) if config.id_column is not None
                   else pa.nulls(n, pa.string()))
            scores = (pa.array(np.concatenate([b.scores for b in pending]), pa.float64())
                      if config.score_column is not None else pa.nulls(n, pa.float64()))
            parts.append(pa.table({
                "source": pa.array(np.concatenate([np.full(len(b), b.source_index, np.int32) for b in pending])),
                "pos": pa.array(np.concatenate(positions)),
                "row": pa.array(np.concatenate([b.rows for b in pending]).astype(np.int64)),
                "text": pa.concat_arrays([b.text for b in pending]), "id": ids, "score": scores,
                "reason": pa.nulls(n, pa.string()), "fatal": pa.nulls(n, pa.string())}, schema=READ_SCHEMA))
        extra = [(si, r, x, None) for si, r, x in rejected]
        if fatal is not None:
            extra.append((fatal[0], -1, fatal[2], fatal[1]))
        if extra:
            m = len(extra)
            order = []
            for si, _, _, _ in extra:
                order.append(seq.get(si, 0))
                seq[si] = seq.get(si, 0) + 1
            parts.append(pa.table({
                "source": pa.array([e[0] for e in extra], pa.int32()), "pos": pa.array(order, pa.int64()),
                "row": pa.array([e[1] for e in extra], pa.int64()),
                "text": pa.array([""] * m, pa.large_string()), "id": pa.nulls(m, pa.string()),
                "score": pa.nulls(m, pa.float64()), "reason": pa.array([e[2] for e in extra], pa.string()),
                "fatal": pa.array([e[3] for e in extra], pa.string())}, schema=READ_SCHEMA))
        pending.clear()
        positions.clear()
        rejected.clear()
        state["docs"] = state["bytes"] = 0
        return pa.concat_tables(parts) if parts else None

    for si, src, table_ref in items:
        if table_ref is not None:
            import ray
            src = dataclasses.replace(src, table=ray.get(table_ref))
        pos = 0
        # parsing runs ahead in a thread while the kernels work on the previous block
        it = prefetch(nio.read_source(src, si, text_column=config.text_column, id_column=config.id_column,
                                      score_column=config.score_column, on_error=config.on_error,
                                      batch_size=config.batch_size),
                      depth=max(2, BLOCK_DOCS // max(1, config.batch_size) + 1))
        try:
            for batch in it:
                for row, reason in batch.rejected:
                    rejected.append((si, -1 if row is None else int(row), reason))
                if len(batch):
                    positions.append(np.arange(pos, pos + len(batch), dtype=np.int64))
                    pos += len(batch)
                    pending.append(batch)
                    state["docs"] += len(batch)
                    state["bytes"] += batch.text.nbytes
                if state["docs"] >= BLOCK_DOCS or state["bytes"] >= BLOCK_TEXT_BYTES:
                    block = flush()
                    if block is not None:
                        yield block
        except NeardupError as exc:
            block = flush((si, type(exc).__name__, str(exc)))
            if block is not None:
                yield block
            return
    block = flush()
    if block is not None:
        yield block


def shard_path(workdir: str, si: int, pos0: int) -> str:
    return os.path.join(workdir, "read", "shards", f"s{si:06d}-p{pos0:012d}.arrow")


def signature_block(table: pa.Table, *, config, workdir: str, threads: int) -> pa.Table:
    """map_batches over read blocks: the kernels over the texts, the block's documents (a run
    of consecutive documents in the global order) written as one shard file, and summary rows:
    one per file in the shard, per rejected record and per fatal error."""
    exact = config.verify == "exact"
    hasher = MinHasher.from_config(dataclasses.replace(config, workers=threads))
    is_doc = _combined(table.column("reason").is_null()).to_numpy(zero_copy_only=False)
    out = []
    docs = table.filter(pa.array(is_doc)) if not is_doc.all() else table
    if docs.num_rows:
        with kernel_threads(threads):
            out.append(_write_shard(docs, config, workdir, hasher, exact))
    if not is_doc.all():
        other = table.filter(pa.array(~is_doc))
        m = other.num_rows
        fatal = other.column("fatal")
        kind = np.where(_combined(fatal.is_null()).to_numpy(zero_copy_only=False), 1, 2).astype(np.int8)
        out.append(pa.table({"kind": pa.array(kind), "source": other.column("source"),
                             "pos0": other.column("pos"), "n": pa.array(np.zeros(m, np.int64)),
                             "zero": pa.array(np.zeros(m, np.int64)), "row": other.column("row"),
                             "reason": other.column("reason"), "fatal": fatal,
                             "path": pa.nulls(m, pa.string())}, schema=SUMMARY_SCHEMA))
    if not out:
        return SUMMARY_SCHEMA.empty_table()
    return pa.concat_tables(out)


def _write_shard(docs: pa.Table, config, workdir: str, hasher: MinHasher, exact: bool) -> pa.Table:
    text = _combined(docs.column("text"))
    src = col(docs, "source", np.int64)
    pos = col(docs, "pos", np.int64)
    cols = {"row": docs.column("row"),
            "length": pa.array(pc.binary_length(text).to_numpy(zero_copy_only=False).astype(np.int64))}
    if exact:  # as the local engine: raw shingle hashes (text order, repeats), sorted when verified
        sig, off, sh = hasher.signatures_and_shingles(text)
        counts = np.diff(off)
    else:
        sig, counts = hasher.signatures_and_counts(text)
    counts = np.asarray(counts, np.int64)
    cols["count"] = pa.array(counts)
    cols["keys"] = fsb_array(band_keys(sig, config.bands, config.rows, config.seed))
    if exact:
        cols["sh"] = csr_list(off, sh)
    else:
        cols["sig"] = fsb_array(sig)
    if config.score_column is not None:
        cols["score"] = docs.column("score")
    if config.id_column is not None:
        cols["id"] = docs.column("id")
    path = shard_path(workdir, int(src[0]), int(pos[0]))
    _atomic_arrow(pa.table(cols), path)
    seg = runs(src)
    ends = np.append(seg[1:], len(src))
    k = len(seg)
    zero = np.add.reduceat((counts == 0).astype(np.int64), seg)
    return pa.table({"kind": pa.array(np.zeros(k, np.int8)), "source": pa.array(src[seg].astype(np.int32)),
                     "pos0": pa.array(pos[seg]), "n": pa.array(ends - seg), "zero": pa.array(zero),
                     "row": pa.array(np.full(k, -1, np.int64)), "reason": pa.nulls(k, pa.string()),
                     "fatal": pa.nulls(k, pa.string()),
                     "path": pa.array([os.path.relpath(path, workdir)] * k, pa.string())}, schema=SUMMARY_SCHEMA)


# --------------------------------------------------------------------------- shards


class ShardIndex:
    """Where each document's row lives: shard files of consecutive documents (doc0, n, path),
    and the first document of every input file (``offsets``, one number per file)."""

    def __init__(self, workdir: str, shards: Sequence[Sequence], offsets: Sequence[int]):
        # shards: (doc0, n, relpath), sorted by doc0 and tiling 0..N-1
        self.workdir = workdir
        self.doc0 = np.array([s[0] for s in shards], dtype=np.int64)
        self.n = np.array([s[1] for s in shards], dtype=np.int64)
        self.path = [s[2] for s in shards]
        self.offsets = np.asarray(offsets, dtype=np.int64)

    def files(self) -> List[Tuple[str, int]]:
        return [(os.path.join(self.workdir, p), int(d)) for p, d in zip(self.path, self.doc0.tolist())]

    def source_of(self, docs: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, docs, side="right") - 1

    def lookup(self, docs: np.ndarray, columns: List[str]) -> pa.Table:
        """Columns of the given documents (sorted, unique), in that order, plus ``source``; the
        shards are memory-mapped and only the pages of these rows are read."""
        docs = np.asarray(docs, dtype=np.int64)
        idx = np.searchsorted(self.doc0, docs, side="right") - 1
        pieces = []
        for s in np.unique(idx).tolist():
            local = docs[idx == s] - self.doc0[s]
            t = read_table(os.path.join(self.workdir, self.path[s]), columns)
            pieces.append(take_sorted(t, local))
        if not pieces:
            return pa.table({c: pa.array([]) for c in columns + ["source"]})
        t = pa.concat_tables(pieces)
        return t.append_column("source", pa.array(self.source_of(docs).astype(np.int32)))

    def source_column(self, si: int, column: str) -> np.ndarray:
        """A column over all documents of one input file, in file order."""
        docs = np.arange(self.offsets[si], self.offsets[si + 1], dtype=np.int64)
        if len(docs) == 0:
            return np.zeros(0, np.int64)
        return col(self.lookup(docs, [column]), column)


def take_sorted(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table.take(rows)`` for ascending rows, chunk by chunk (Arrow's take of a chunked list
    column would first concatenate every chunk: the whole shard)."""
    out = {}
    for name in table.column_names:
        column = table.column(name)
        bounds = np.concatenate([[0], np.cumsum([len(c) for c in column.chunks])]).astype(np.int64)
        cut = np.searchsorted(rows, bounds)
        parts = [column.chunk(i).take(pa.array(rows[cut[i]:cut[i + 1]] - bounds[i]))
                 for i in range(column.num_chunks) if cut[i + 1] > cut[i]]
        out[name] = pa.concat_arrays(parts) if parts else pa.array([], type=column.type)
    return pa.table(out)


READ_BLOCK_BYTES = 64 << 20     # work files read back are yielded in blocks of about this size


def read_files(items: Sequence[Tuple[str, int]], columns: Optional[List[str]]) -> Iterator[pa.Table]:
    """Read task over files; a file with doc0 >= 0 gets a ``doc`` column doc0, doc0 + 1, ...
    Small files are yielded together (blocks of about READ_BLOCK_BYTES), so that the number of
    blocks entering a shuffle follows the data's size, not the number of files."""
    pending: List[pa.Table] = []
    size = 0
    for path, doc0 in items:
        t = read_table(path, columns)
        if doc0 >= 0:
            t = t.append_column("doc", pa.array(np.arange(doc0, doc0 + t.num_rows, dtype=np.int64)))
        if t.num_rows:
            pending.append(t)
            size += t.nbytes
        if size >= READ_BLOCK_BYTES:
            yield pa.concat_tables(pending)
            pending, size = [], 0
    if pending:
        yield pa.concat_tables(pending)


# --------------------------------------------------------------------------- duplicate ids

DUP_IN_SCHEMA = pa.schema([("part", pa.int32()), ("doc", pa.int64()), ("id", pa.string()), ("source", pa.int32()),
                           ("row", pa.int64()), ("empty", pa.bool_())])
DUP_SCHEMA = pa.schema([("later", pa.int64()), ("first", pa.int64()), ("id", pa.string()),
                        ("later_source", pa.int32()), ("later_row", pa.int64()), ("first_source", pa.int32()),
                        ("first_row", pa.int64()), ("later_empty", pa.bool_())])


@nb.njit(cache=True)
def _fnv1a(offsets, data):
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = h
    return out


def string_hash(arr) -> np.ndarray:
    """A 64-bit hash of each string (FNV-1a over its UTF-8 bytes): the same in every process."""
    arr = _combined(arr).cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=arr.offset + n + 1)[arr.offset:]
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    return _fnv1a(offsets, data)


def id_parts(table: pa.Table, *, parts: int, shards: ShardIndex) -> pa.Table:
    doc = col(table, "doc", np.int64)
    return pa.table({"part": pa.array((mix64(string_hash(table.column("id"))) % np.uint64(parts)).astype(np.int32)),
                     "doc": pa.array(doc), "id": table.column("id"),
                     "source": pa.array(shards.source_of(doc).astype(np.int32)), "row": table.column("row"),
                     "empty": pa.array(col(table, "count", np.int64) == 0)}, schema=DUP_IN_SCHEMA)


def find_dup_ids(table: pa.Table) -> pa.Table:
    """One id partition: every document whose id an earlier document has, with that first one."""
    if table.num_rows < 2:
        return DUP_SCHEMA.empty_table()
    t = table.sort_by([("id", "ascending"), ("doc", "ascending")])
    ids = _combined(t.column("id"))
    same = pc.equal(ids.slice(1), ids.slice(0, len(ids) - 1)).to_numpy(zero_copy_only=False)
    dup = np.flatnonzero(same) + 1
    if len(dup) == 0:
        return DUP_SCHEMA.empty_table()
    is_start = np.ones(len(ids), bool)
    is_start[dup] = False
    first = np.maximum.accumulate(np.where(is_start, np.arange(len(ids)), 0))[dup]
    doc, src, row = col(t, "doc", np.int64), col(t, "source", np.int32), col(t, "row", np.int64)
    return pa.table({"later": pa.array(doc[dup]), "first": pa.array(doc[first]), "id": ids.take(pa.array(dup)),
                     "later_source": pa.array(src[dup]), "later_row": pa.array(row[dup]),
                     "first_source": pa.array(src[first]), "first_row": pa.array(row[first]),
                     "later_empty": pa.array(col(t, "empty", bool)[dup])}, schema=DUP_SCHEMA)


# --------------------------------------------------------------------------- pairs stage

KEYS_SCHEMA = pa.schema([("part", pa.int32()), ("band", pa.int32()), ("key", pa.uint64()), ("doc", pa.int64())])
MEMBER_SCHEMA = pa.schema([("chunk", pa.int32()), ("doc", pa.int64()), ("tp", pa.int32()), ("bucket", pa.int64())])
CAND_SCHEMA = pa.schema([("pair_part", pa.int32()), ("kind", pa.int8()), ("code", pa.uint64()),
                         ("passed", pa.bool_()), ("sim", pa.float64()), ("buckets", pa.int64()),
                         ("rounds", pa.int64()), ("truncated", pa.int64())])
PAIRS_SUMMARY = pa.schema([("part", pa.int32()), ("path", pa.string()), ("candidates", pa.int64()),
                           ("verified", pa.int64()), ("buckets", pa.int64()), ("rounds", pa.int64()),
                           ("truncated", pa.int64()), ("checks", pa.int64())])


def explode_keys(table: pa.Table, *, bands: int, parts: int, rejected: np.ndarray) -> pa.Table:
    """(doc, count, keys) -> one row (part, band, key, doc) per band of every eligible document."""
    doc = col(table, "doc", np.int64)
    ok = col(table, "count", np.int64) > 0
    if len(rejected):
        ok &= ~np.isin(doc, rejected)
    keys = fsb_numpy(table.column("keys"), np.uint64, bands)[ok]
    doc = doc[ok]
    m = len(doc)
    key = keys.reshape(-1)
    return pa.table({"part": pa.array((key % np.uint64(parts)).astype(np.int32)),
                     "band": pa.array(np.tile(np.arange(bands, dtype=np.int32), m)),
                     "key": pa.array(key), "doc": pa.array(np.repeat(doc, bands))}, schema=KEYS_SCHEMA)


def _bucket_members(band: np.ndarray, key: np.ndarray, doc: np.ndarray):
    """Buckets of 2+ rows sharing (band, key): (members in ascending document order, sizes,
    smallest member of each). One sort on a 64-bit mix of (band, key); only the rows of runs of
    2+ are sorted again by document; a mix shared by two different (band, key) (probability
    about rows^2 / 2^64) is caught and the exact three-key sort is used instead."""
    h = key ^ mix64(band.astype(np.int64) + 1)
    order = np.argsort(h)
    hs = h[order]
    starts = runs(hs)
    sizes = np.diff(np.append(starts, len(hs)))
    big = sizes >= 2
    in_big = np.repeat(big, sizes)
    sel = order[in_big]
    bsizes = sizes[big]
    run_id = np.repeat(np.arange(len(bsizes), dtype=np.int64), bsizes)
    rb, rk = band[sel], key[sel]
    if len(bsizes) == 0:
        return doc[:0], bsizes, doc[:0]
    heads = np.concatenate([[0], np.cumsum(bsizes)[:-1]]).astype(np.int64)
    if np.any(rb != np.repeat(rb[heads], bsizes)) or np.any(rk != np.repeat(rk[heads], bsizes)):
        order = np.lexsort((doc, key, band))
        starts = runs(band[order], key[order])
        sizes = np.diff(np.append(starts, len(order)))
        big = sizes >= 2
        members = doc[order][np.repeat(big, sizes)]
        bsizes = sizes[big]
        heads = np.concatenate([[0], np.cumsum(bsizes)[:-1]]).astype(np.int64)
        return members, bsizes, members[heads] if len(bsizes) else members[:0]
    members = doc[sel][np.lexsort((doc[sel], run_id))]
    return members, bsizes, members[heads] if len(bsizes) else members[:0]


def form_buckets(table: pa.Table, *, tp_parts: int, chunk_starts: np.ndarray) -> pa.Table:
    """One band partition -> membership rows (chunk, doc, tp, bucket) of every bucket of 2+.

    A bucket is a run of equal (band, key). Its smallest document decides its pair partition
    ``tp``, so that the buckets of a group of near-duplicates sharing several bands are searched
    together (and their common pairs verified once); the members are put in keep order there."""
    if table.num_rows == 0:
        return MEMBER_SCHEMA.empty_table()
    part = int(col(table, "part")[0])
    band = col(table, "band", np.int32)
    key = col(table, "key", np.uint64)
    doc = col(table, "doc", np.int64)
    members, bsizes, first = _bucket_members(band, key, doc)
    if len(bsizes) == 0:
        return MEMBER_SCHEMA.empty_table()
    ids = (np.int64(part) << np.int64(BUCKET_BITS)) + np.arange(len(bsizes), dtype=np.int64)
    tp = part_of(first, tp_parts)
    chunk = (np.searchsorted(chunk_starts, members, side="right") - 1).astype(np.int32)
    return pa.table({"chunk": pa.array(chunk), "doc": pa.array(members),
                     "tp": pa.array(np.repeat(tp, bsizes)), "bucket": pa.array(np.repeat(ids, bsizes))},
                    schema=MEMBER_SCHEMA)


def attach_data(table: pa.Table, *, shards: ShardIndex, exact: bool, data_type: pa.DataType,
                score: bool) -> pa.Table:
    """One document chunk -> per (document, pair partition): its buckets there, its data (the
    shingle hashes for exact verification, the signature otherwise) and its keep-order keys
    (length, score), read from the shards."""
    data_col = "sh" if exact else "sig"
    if table.num_rows == 0:
        return pa.schema([("tp", pa.int32()), ("doc", pa.int64()), ("buckets", pa.large_list(pa.int64())),
                          ("data", data_type), ("length", pa.int64()), ("score", pa.float64())]).empty_table()
    doc = col(table, "doc", np.int64)
    tp = col(table, "tp", np.int32)
    bucket = col(table, "bucket", np.int64)
    order = np.lexsort((bucket, tp, doc))
    doc, tp, bucket = doc[order], tp[order], bucket[order]
    starts = runs(doc, tp)
    offsets = np.append(starts, len(doc)).astype(np.int64)
    gdoc = doc[starts]
    udocs = np.unique(gdoc)
    data = shards.lookup(udocs, [data_col, "length"] + (["score"] if score else []))
    if len(udocs) != len(gdoc):  # documents in several pair partitions: one row for each
        data = take_sorted(data, np.searchsorted(udocs, gdoc))
    n = len(gdoc)
    return pa.table({"tp": pa.array(tp[starts]), "doc": pa.array(gdoc),
                     "buckets": pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(bucket)),
                     "data": data.column(data_col), "length": data.column("length"),
                     "score": data.column("score") if score else pa.nulls(n, pa.float64())})


def search_pairs(table: pa.Table, *, config, pair_parts: int) -> pa.Table:
    """One pair partition: every bucket of it, searched with :func:`neardup.bands.find_pairs`
    (star pairs, verification, re-anchoring of failed members) against the data that came with
    the documents; returns every distinct pair it verified, passed or not, and its counts."""
    if table.num_rows == 0:
        return CAND_SCHEMA.empty_table()
    table = table.sort_by("doc")
    gdoc = col(table, "doc", np.int64)
    # members of a bucket in keep order (the local engine's bucket_runs): the rank of the
    # partition's documents, renumbered in ascending order, orders them as the global rank does
    rank = keep_order(len(gdoc), config.keep, lengths=col(table, "length", np.int64),
                      scores=col(table, "score", np.float64) if config.score_column is not None else None)
    boff, bvals = list_csr(table.column("buckets"))
    local = np.repeat(np.arange(len(gdoc), dtype=np.int64), np.diff(boff))
    order = np.lexsort((rank[local], bvals))
    bsorted, members = bvals[order], local[order]
    starts = runs(bsorted)
    run_offsets = np.append(starts, len(members)).astype(np.int64)
    threshold = config.threshold
    if config.verify == "exact":
        raw_offsets, raw = list_csr(table.column("data"))
        with kernel_threads(1):
            offsets, hashes = sort_unique_sets(raw_offsets, raw)

        def verify(left, right):
            sim = exact_jaccard(offsets, hashes, left, right)
            return sim >= threshold, sim
    else:
        sigs = fsb_numpy(table.column("data"), np.uint32, config.num_perm)
        none = config.verify == "none"

        def verify(left, right):
            sim = estimated_jaccard(sigs, left, right)
            return (np.ones(len(left), dtype=bool) if none else sim >= threshold), sim

    seen = []

    def recording(left, right):
        passed, sim = verify(left, right)
        seen.append((left, right, np.asarray(passed, bool), np.asarray(sim, np.float64)))
        return passed, sim

    with kernel_threads(1):
        search = find_pairs(run_offsets, members, recording, max_rounds=config.max_anchor_rounds)
    if seen:
        left = np.concatenate([s[0] for s in seen])
        right = np.concatenate([s[1] for s in seen])
        passed = np.concatenate([s[2] for s in seen])
        sim = np.concatenate([s[3] for s in seen])
    else:
        left = right = np.zeros(0, np.int64)
        passed = np.zeros(0, bool)
        sim = np.zeros(0, np.float64)
    codes = pair_codes(gdoc[left], gdoc[right])
    m = len(codes)
    zeros = np.zeros(m + 1, np.int64)
    return pa.table({
        "pair_part": pa.array(np.append(part_of(codes, pair_parts), 0).astype(np.int32)),
        "kind": pa.array(np.append(np.zeros(m, np.int8), 1).astype(np.int8)),
        "code": pa.array(np.append(codes, np.uint64(0)).astype(np.uint64)),
        "passed": pa.array(np.append(passed, False)),
        "sim": pa.array(np.append(sim, 0.0)),
        "buckets": pa.array(np.append(zeros[:m], search.buckets)),
        "rounds": pa.array(np.append(zeros[:m], search.rounds)),
        "truncated": pa.array(np.append(zeros[:m], search.truncated_buckets))}, schema=CAND_SCHEMA)


def search_pairs_from_shards(table: pa.Table, *, shards: ShardIndex, config, pair_parts: int,
                             data_type: pa.DataType) -> pa.Table:
    """One pair partition of membership rows: the members' data read straight from the shards
    (memory-mapped, only their rows), then :func:`search_pairs`. The path of a one-node cluster,
    where the shards are local files: no shuffle of the data by document range."""
    data = attach_data(table, shards=shards, exact=config.verify == "exact", data_type=data_type,
                       score=config.score_column is not None)
    return search_pairs(data, config=config, pair_parts=pair_parts)


def verified_path(workdir: str, part: int) -> str:
    return os.path.join(workdir, "pairs", "verified", f"part-{part:05d}.parquet")


def dedup_pairs(table: pa.Table, *, workdir: str) -> pa.Table:
    """One pair-code partition: distinct candidate pairs (a pair verified in several pair
    partitions has the same result in each), the verified ones written to the work directory."""
    if table.num_rows == 0:
        return PAIRS_SUMMARY.empty_table()
    part = int(col(table, "pair_part")[0])
    kind = col(table, "kind", np.int8)
    st = kind == 1
    buckets = int(col(table, "buckets", np.int64)[st].sum())
    rounds = int(col(table, "rounds", np.int64)[st].max()) if st.any() else 0
    truncated = int(col(table, "truncated", np.int64)[st].sum())
    ok = ~st
    code = col(table, "code", np.uint64)[ok]
    passed = col(table, "passed", bool)[ok]
    sim = col(table, "sim", np.float64)[ok]
    uniq, first = np.unique(code, return_index=True)
    keep = passed[first]
    left, right = split_codes(uniq[keep])
    path = ""
    if keep.any():
        full = verified_path(workdir, part)
        _atomic_parquet(pa.table({"left": pa.array(left), "right": pa.array(right),
                                  "sim": pa.array(sim[first][keep])}), full)
        path = os.path.relpath(full, workdir)
    return pa.table({"part": pa.array([part], pa.int32()), "path": pa.array([path]),
                     "candidates": pa.array([len(uniq)], pa.int64()),
                     "verified": pa.array([int(keep.sum())], pa.int64()),
                     "buckets": pa.array([buckets], pa.int64()), "rounds": pa.array([rounds], pa.int64()),
                     "truncated": pa.array([truncated], pa.int64()),
                     "checks": pa.array([len(code)], pa.int64())}, schema=PAIRS_SUMMARY)


# --------------------------------------------------------------------------- connected components
#
# Alternating large-star / small-star (Kiveris, Lattanzi, Mirrokni, Rastogi, Vassilvitskii,
# "Connected Components in MapReduce and Beyond", SoCC 2014). Edges are (hi, lo), hi > lo.
# large-star(u): m = min(N(u) + u); (v, m) for every neighbour v > u.
# small-star(u): N = neighbours < u, m = min(N); (v, m) for every v in N + u but m.
# The input of a large-star step is a forest of stars centred on their minimum (so: done) iff no
# node has a smaller neighbour together with any other neighbour; the step counts such nodes.

EDGE_SCHEMA = pa.schema([("hi", pa.int64()), ("lo", pa.int64()), ("ns", pa.int64())])
NODE_SCHEMA = pa.schema([("part", pa.int32()), ("node", pa.int64()), ("nbr", pa.int64())])


def pairs_to_edges(table: pa.Table) -> pa.Table:
    n = table.num_rows
    return pa.table({"hi": table.column("right"), "lo": table.column("left"),
                     "ns": pa.array(np.zeros(n, np.int64))}, schema=EDGE_SCHEMA)


def large_star_map(table: pa.Table, *, parts: int) -> pa.Table:
    hi = col(table, "hi", np.int64)
    lo = col(table, "lo", np.int64)
    ok = hi >= 0
    hi, lo = hi[ok], lo[ok]
    node = np.concatenate([hi, lo])
    nbr = np.concatenate([lo, hi])
    return pa.table({"part": pa.array(part_of(node, parts)), "node": pa.array(node), "nbr": pa.array(nbr)},
                    schema=NODE_SCHEMA)


def small_star_map(table: pa.Table, *, parts: int) -> pa.Table:
    hi = col(table, "hi", np.int64)
    lo = col(table, "lo", np.int64)
    ok = hi >= 0
    hi, lo = hi[ok], lo[ok]
    return pa.table({"part": pa.array(part_of(hi, parts)), "node": pa.array(hi), "nbr": pa.array(lo)},
                    schema=NODE_SCHEMA)


def _grouped(table: pa.Table):
    node = col(table, "node", np.int64)
    nbr = col(table, "nbr", np.int64)
    order = np.lexsort((nbr, node))
    node, nbr = node[order], nbr[order]
    keep = np.ones(len(node), bool)
    keep[1:] = (node[1:] != node[:-1]) | (nbr[1:] != nbr[:-1])
    node, nbr = node[keep], nbr[keep]
    starts = runs(node)
    sizes = np.diff(np.append(starts, len(node)))
    return node, nbr, starts, sizes


def large_star(table: pa.Table) -> pa.Table:
    if table.num_rows == 0:
        return EDGE_SCHEMA.empty_table()
    node, nbr, starts, sizes = _grouped(table)
    m = np.minimum(np.minimum.reduceat(nbr, starts), node[starts])
    smaller = np.add.reduceat((nbr < node).astype(np.int64), starts)
    nonstar = int(((smaller >= 2) | ((smaller >= 1) & (sizes > smaller))).sum())
    mm = np.repeat(m, sizes)
    out = nbr > node
    hi, lo = nbr[out], mm[out]
    ns = np.zeros(len(hi) + 1, np.int64)
    ns[-1] = nonstar
    return pa.table({"hi": pa.array(np.append(hi, -1)), "lo": pa.array(np.append(lo, -1)), "ns": pa.array(ns)},
                    schema=EDGE_SCHEMA)


def small_star(table: pa.Table) -> pa.Table:
    if table.num_rows == 0:
        return EDGE_SCHEMA.empty_table()
    node, nbr, starts, sizes = _grouped(table)
    m = np.minimum.reduceat(nbr, starts)
    mm = np.repeat(m, sizes)
    keep = nbr != mm
    hi = np.concatenate([nbr[keep], node[starts]])
    lo = np.concatenate([mm[keep], m])
    return pa.table({"hi": pa.array(hi), "lo": pa.array(lo), "ns": pa.array(np.zeros(len(hi), np.int64))},
                    schema=EDGE_SCHEMA)


# --------------------------------------------------------------------------- clusters stage

LINK_SCHEMA = pa.schema([("chunk", pa.int32()), ("kind", pa.int8()), ("doc", pa.int64()), ("label", pa.int64()),
                         ("right", pa.int64()), ("sim", pa.float64())])
ATTR_SCHEMA = pa.schema([("part", pa.int32()), ("kind", pa.int8()), ("doc", pa.int64()), ("label", pa.int64()),
                         ("right", pa.int64()), ("sim", pa.float64()), ("source", pa.int32()),
                         ("row", pa.int64()), ("length", pa.int64()), ("score", pa.float64()),
                         ("id", pa.string())])
MEMBERS_SCHEMA = pa.schema([("doc", pa.int64()), ("source", pa.int32()), ("row", pa.int64()),
                            ("head", pa.int64()), ("removed", pa.bool_()), ("sim", pa.float64()),
                            ("id", pa.string()), ("head_id", pa.string()), ("rep_id", pa.string())])
CLUSTERS_SUMMARY = pa.schema([("part", pa.int32()), ("path", pa.string()), ("members", pa.int64()),
                              ("removed", pa.int64()), ("clusters", pa.int64()), ("top", pa.string())])


def star_labels(table: pa.Table, *, chunk_starts: np.ndarray) -> pa.Table:
    """Converged star edges (leaf, centre) -> label rows (doc, label) for leaves and centres."""
    hi = col(table, "hi", np.int64)
    lo = col(table, "lo", np.int64)
    ok = hi >= 0
    hi, lo = hi[ok], lo[ok]
    centres = np.unique(lo)
    doc = np.concatenate([hi, centres])
    label = np.concatenate([lo, centres])
    n = len(doc)
    return pa.table({"chunk": pa.array((np.searchsorted(chunk_starts, doc, side="right") - 1).astype(np.int32)),
                     "kind": pa.array(np.zeros(n, np.int8)), "doc": pa.array(doc), "label": pa.array(label),
                     "right": pa.array(np.full(n, -1, np.int64)), "sim": pa.array(np.zeros(n))},
                    schema=LINK_SCHEMA)


def pair_links(table: pa.Table, *, chunk_starts: np.ndarray) -> pa.Table:
    left = col(table, "left", np.int64)
    n = len(left)
    return pa.table({"chunk": pa.array((np.searchsorted(chunk_starts, left, side="right") - 1).astype(np.int32)),
                     "kind": pa.array(np.ones(n, np.int8)), "doc": pa.array(left),
                     "label": pa.array(np.full(n, -1, np.int64)), "right": table.column("right"),
                     "sim": table.column("sim")}, schema=LINK_SCHEMA)


def attach_attributes(table: pa.Table, *, shards: ShardIndex, parts: int, config) -> pa.Table:
    """One document chunk: label rows get the documents' attributes (row, length, score, id),
    pair rows get the label of their left document; all keyed by the label's partition."""
    if table.num_rows == 0:
        return ATTR_SCHEMA.empty_table()
    kind = col(table, "kind", np.int8)
    doc = col(table, "doc", np.int64)
    label = col(table, "label", np.int64)
    lab = kind == 0
    ldoc, first = np.unique(doc[lab], return_index=True)
    llabel = label[lab][first]
    columns = ["row", "length"]
    if config.score_column is not None:
        columns.append("score")
    if config.id_column is not None:
        columns.append("id")
    attrs = shards.lookup(ldoc, columns)
    n = len(ldoc)
    members = pa.table({
        "part": pa.array(part_of(llabel, parts)), "kind": pa.array(np.zeros(n, np.int8)), "doc": pa.array(ldoc),
        "label": pa.array(llabel), "right": pa.array(np.full(n, -1, np.int64)), "sim": pa.array(np.zeros(n)),
        "source": attrs.column("source"), "row": attrs.column("row"), "length": attrs.column("length"),
        "score": attrs.column("score") if "score" in columns else pa.nulls(n, pa.float64()),
        "id": attrs.column("id") if "id" in columns else pa.nulls(n, pa.string())}, schema=ATTR_SCHEMA)
    pr = ~lab
    left = doc[pr]
    m = len(left)
    plabel = llabel[np.searchsorted(ldoc, left)]
    edges = pa.table({
        "part": pa.array(part_of(plabel, parts)), "kind": pa.array(np.ones(m, np.int8)), "doc": pa.array(left),
        "label": pa.array(plabel), "right": pa.array(col(table, "right", np.int64)[pr]),
        "sim": pa.array(col(table, "sim", np.float64)[pr]), "source": pa.nulls(m, pa.int32()),
        "row": pa.nulls(m, pa.int64()), "length": pa.nulls(m, pa.int64()), "score": pa.nulls(m, pa.float64()),
        "id": pa.nulls(m, pa.string())}, schema=ATTR_SCHEMA)
    return pa.concat_tables([members, edges])


def members_path(workdir: str, part: int) -> str:
    return os.path.join(workdir, "clusters", "members", f"part-{part:05d}.parquet")


def doc_ids(source: np.ndarray, row: np.ndarray, user_ids: Optional[pa.Array], names: Sequence[str],
            formats: Sequence[str]) -> List[str]:
    """Document ids as the local engine's IdLookup makes them."""
    if user_ids is not None:
        return user_ids.to_pylist()
    out = []
    for s, r in zip(source.tolist(), row.tolist()):
        out.append(names[s] if formats[s] == "text" else f"{names[s]}:{r}")
    return out


def select_clusters(table: pa.Table, *, config, workdir: str, names: Sequence[str], formats: Sequence[str],
                    top: int = 20, per_cluster: int = 5) -> pa.Table:
    """One label partition (whole clusters): the chain-guarded selection of
    :func:`neardup.clusters.select_representatives` on the partition's sub-graph (documents
    renumbered in ascending order, so keep order and ties are those of the whole corpus);
    writes the members with their cluster, representative and ids, returns counts and the
    partition's largest clusters (for the report's text sample)."""
    if table.num_rows == 0:
        return CLUSTERS_SUMMARY.empty_table()
    part = int(col(table, "part")[0])
    kind = col(table, "kind", np.int8)
    mem = table.filter(pa.array(kind == 0)).sort_by("doc")
    edg = table.filter(pa.array(kind == 1))
    doc = col(mem, "doc", np.int64)
    m = len(doc)
    left = np.searchsorted(doc, col(edg, "doc", np.int64))
    right = np.searchsorted(doc, col(edg, "right", np.int64))
    sim = col(edg, "sim", np.float64)
    length = col(mem, "length", np.int64)
    scores = col(mem, "score", np.float64) if config.score_column is not None else None
    rank = keep_order(m, config.keep, lengths=length, scores=scores)
    with kernel_threads(1):
        sel = select_representatives(m, left, right, sim, rank)
    source = col(mem, "source", np.int64)
    row = col(mem, "row", np.int64)
    user = _combined(mem.column("id")) if config.id_column is not None else None
    ids = pa.array(doc_ids(source, row, user, names, formats), pa.string())
    head_l = sel.cluster
    removed = sel.removed
    rep_l = np.where(removed, sel.representative, 0)
    rep_id = pc.if_else(pa.array(removed), ids.take(pa.array(rep_l)), pa.nulls(m, pa.string()))
    out = pa.table({"doc": pa.array(doc), "source": pa.array(source.astype(np.int32)), "row": pa.array(row),
                    "head": pa.array(doc[head_l]), "removed": pa.array(removed),
                    "sim": pa.array(sel.similarity), "id": ids, "head_id": ids.take(pa.array(head_l)),
                    "rep_id": rep_id}, schema=MEMBERS_SCHEMA)
    path = members_path(workdir, part)
    _atomic_parquet(out, path)
    # the largest clusters: (size desc, head asc), head first then members in document order
    heads, sizes = np.unique(head_l, return_counts=True)
    best = heads[np.lexsort((doc[heads], -sizes))][:top]
    tops = []
    for h in best.tolist():
        ms = np.flatnonzero(head_l == h)
        ms = np.concatenate([[h], ms[ms != h]])[:per_cluster]
        tops.append({"head": int(doc[h]), "size": int(len(np.flatnonzero(head_l == h))),
                     "members": [[int(doc[i]), ids[i].as_py(), int(source[i]), int(row[i])] for i in ms.tolist()]})
    return pa.table({"part": pa.array([part], pa.int32()), "path": pa.array([os.path.relpath(path, workdir)]),
                     "members": pa.array([m], pa.int64()), "removed": pa.array([int(removed.sum())], pa.int64()),
                     "clusters": pa.array([len(heads)], pa.int64()), "top": pa.array([json.dumps(tops)])},
                    schema=CLUSTERS_SUMMARY)


# --------------------------------------------------------------------------- write stage

KEPT_IN_SCHEMA = pa.schema([("group", pa.int32()), ("source", pa.int32()), ("row", pa.int64())])
KEPT_SUMMARY = pa.schema([("source", pa.int32()), ("path", pa.string()), ("kept", pa.int64()),
                          ("error", pa.string()), ("error_kind", pa.string())])


def only_removed(table: pa.Table) -> pa.Table:
    return table.filter(table.column("removed"))


def removed_rows(table: pa.Table, *, group_size: int) -> pa.Table:
    """Members -> (group, source, row) of the removed ones (for the kept files)."""
    rem = table.filter(table.column("removed"))
    src = col(rem, "source", np.int32)
    return pa.table({"group": pa.array((src // group_size).astype(np.int32)), "source": pa.array(src),
                     "row": rem.column("row")}, schema=KEPT_IN_SCHEMA)


def write_kept_group(table: pa.Table, *, group_size: int, sources: Sequence[nio.Source], shards: ShardIndex,
                     rejected_rows: Dict[int, List[int]], kept_dir: str, output_format: str,
                     text_column: str, id_column: Optional[str]) -> pa.Table:
    """One group of input files: the kept rows of each (all rows, less the removed and the
    rejected) written with :func:`neardup.io.write_kept`, as the local engine does."""
    if table.num_rows == 0:
        return KEPT_SUMMARY.empty_table()
    g = int(col(table, "group")[0])
    src = col(table, "source", np.int64)
    row = col(table, "row", np.int64)
    out = []
    for si in range(g * group_size, min((g + 1) * group_size, len(sources))):
        s = sources[si]
        if s.format == "table":
            continue
        rows = shards.source_column(si, "row")
        drop = row[src == si]
        if rejected_rows.get(si):
            drop = np.concatenate([drop, np.asarray(rejected_rows[si], np.int64)])
        kept = np.setdiff1d(rows, drop)
        rel = nio.output_relpath(s, output_format)
        if len(rows) == 0 or (s.format == "text" and len(kept) == 0):
            # nothing could be read from it (all rejected), or a removed text file
            out.append((si, "", 0, None, None))
            continue
        try:
            nio.write_kept(s, kept, os.path.join(kept_dir, rel), output_format=output_format,
                           text_column=text_column, id_column=id_column)
        except NeardupError as exc:
            out.append((si, "", 0, str(exc), type(exc).__name__))
            continue
        out.append((si, rel, len(kept), None, None))
    return pa.table({"source": pa.array([o[0] for o in out], pa.int32()), "path": pa.array([o[1] for o in out]),
                     "kept": pa.array([o[2] for o in out], pa.int64()),
                     "error": pa.array([o[3] for o in out], pa.string()),
                     "error_kind": pa.array([o[4] for o in out], pa.string())}, schema=KEPT_SUMMARY)


def fetch_texts_task(config, source: nio.Source, si: int, wanted: List[Tuple[int, int]]) -> Dict[int, str]:
    """The texts of a few documents (doc, row) of one source, by reading it again."""
    from types import SimpleNamespace

    from .local import fetch_texts
    corpus = SimpleNamespace(source={d: si for d, _ in wanted}, row={d: r for d, r in wanted})
    ctx = SimpleNamespace(config=config, sources={si: source})
    return fetch_texts(ctx, corpus, np.array(sorted(d for d, _ in wanted), np.int64))
