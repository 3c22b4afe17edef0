"""The embedded engine: every stage on this machine, streaming, every core through numba threads.

Stages (each writes its files into the work directory, see :mod:`.workdir`):

read      inputs -> per document: source, row, byte length, shingle count, score, user id,
          MinHash signature (k uint32), band keys (b uint64) and, for exact verification, the
          sorted set of 64-bit shingle hashes. Texts are streamed batch by batch and never kept.
pairs     band keys -> buckets -> verified pairs (see :mod:`neardup.bands`).
clusters  verified pairs -> clusters, representatives, removals (see :mod:`neardup.clusters`).
write     the output folder: kept/, removed.parquet, clusters.parquet, rejected.parquet,
          stats.json, report.html.

Memory. Only per-document arrays grow with the corpus: 8 (source, row) + 8 (length) + 8 (count)
+ 4k (signature, on disk, memory-mapped) + 8b (band keys) bytes, plus the shingle sets on disk
for exact verification, which are memory-mapped and touched only for documents in candidate
pairs. Texts are held one batch at a time.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import io as nio
from ..bands import band_keys, bucket_runs, find_pairs
from ..clusters import keep_order, select_representatives
from ..config import Config
from ..errors import InputError, NeardupError
from ..hashing import kernel_threads
from ..minhash import MinHasher, Scratch
from ..progress import bar, check_interrupt
from ..verify import estimated_jaccard, exact_jaccard_raw
from .workdir import AppendFile, BackgroundWriter, WorkDir, open_column

PARQUET_OPTS = dict(compression="zstd", use_dictionary=False, write_statistics=False)

# The schemas of the output files (the same for every engine).
REMOVED_SCHEMA = pa.schema([("id", pa.string()), ("representative", pa.string()), ("cluster", pa.string()),
                            ("similarity", pa.float64()), ("source", pa.string())])
CLUSTERS_SCHEMA = pa.schema([("id", pa.string()), ("cluster", pa.string()), ("is_representative", pa.bool_())])
REJECTED_SCHEMA = pa.schema([("source", pa.string()), ("row", pa.int64()), ("reason", pa.string())])
SAMPLE_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])


@dataclass
class RunContext:
    config: Config            # resolved: bands and rows set
    sources: List[nio.Source]
    work: WorkDir
    output: Optional[str]
    quiet: bool = False
    seconds: Dict[str, float] = field(default_factory=dict)
    table_kept_rows: Dict[int, np.ndarray] = field(default_factory=dict)  # in-memory sources
    stats: Optional[dict] = None


# --------------------------------------------------------------------------- helpers

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


def estimate_documents(sources: Sequence[nio.Source]) -> Optional[int]:
    """About how many documents the sources hold, for the progress bar's ETA (cheap: Parquet row
    counts from the footer, one per text file, and for uncompressed JSONL the file size over the
    mean line length of its first MiB); None when a compressed file makes it a guess."""
    total = 0
    for src in sources:
        try:
            if src.format == "text":
                total += 1
            elif src.format == "table":
                total += src.table.num_rows
            elif src.format == "parquet":
                total += pq.ParquetFile(src.path).metadata.num_rows
            elif src.compression is None:
                size = os.path.getsize(src.path)
                with open(src.path, "rb") as f:
                    head = f.read(1 << 20)
                lines = head.count(b"\n") or 1
                total += int(round(size / (len(head) / lines))) if head else 0
            else:
                return None
        except (OSError, ValueError, pa.ArrowException):
            return None
    return total


def _batches(ctx: RunContext) -> Iterator:
    cfg = ctx.config
    for si, src in enumerate(ctx.sources):
        yield from nio.read_source(src, si, text_column=cfg.text_column, id_column=cfg.id_column,
                                   score_column=cfg.score_column, on_error=cfg.on_error,
                                   batch_size=cfg.batch_size)


# --------------------------------------------------------------------------- stage: read

def stage_read(ctx: RunContext) -> dict:
    cfg = ctx.config
    d = ctx.work.stage_dir("read", fresh=True)
    exact = cfg.verify == "exact"
    hasher = MinHasher.from_config(cfg)
    scratch = Scratch()
    writer = BackgroundWriter()
    cols = {
        "source": AppendFile(os.path.join(d, "source.i32"), np.int32),
        "row": AppendFile(os.path.join(d, "row.i64"), np.int64),
        "length": AppendFile(os.path.join(d, "length.i64"), np.int64),
        "count": AppendFile(os.path.join(d, "count.i64"), np.int64),
        "keys": AppendFile(os.path.join(d, "keys.u64"), np.uint64, cfg.bands),
    }
    if cfg.score_column:
        cols["score"] = AppendFile(os.path.join(d, "score.f64"), np.float64)
    if exact:
        cols["sh"] = AppendFile(os.path.join(d, "sh.u64"), np.uint64, writer=writer)
    else:  # signatures are needed after this stage only to estimate similarities
        cols["sig"] = AppendFile(os.path.join(d, "sig.u32"), np.uint32, cfg.num_perm, writer=writer)
    ids_writer = None
    if cfg.id_column:
        ids_writer = pa.ipc.new_file(os.path.join(d, "ids.arrow.part"), pa.schema([("id", pa.string())]))
    rejected: List[tuple] = []
    n = 0
    per_source = [0] * len(ctx.sources)
    with bar("read + signatures", total=None if ctx.quiet else estimate_documents(ctx.sources),
             quiet=ctx.quiet) as progress:
        with kernel_threads(cfg.workers):
            for batch in prefetch(_batches(ctx)):
                check_interrupt()
                for row, reason in batch.rejected:
                    rejected.append((batch.source_index, row, reason))
                m = len(batch.text)
                if m == 0:
                    continue
                if exact:
                    sig, off, sh = hasher.signatures_and_shingles(batch.text, scratch=scratch)
                    counts = np.diff(off)
                    cols["sh"].append(sh)
                else:
                    sig, counts = hasher.signatures_and_counts(batch.text)
                if "sig" in cols:
                    cols["sig"].append(sig)
                cols["keys"].append(band_keys(sig, cfg.bands, cfg.rows, cfg.seed))
                cols["count"].append(counts)
                cols["source"].append(np.full(m, batch.source_index, dtype=np.int32))
                cols["row"].append(batch.rows)
                cols["length"].append(pc.binary_length(batch.text).to_numpy(zero_copy_only=False))
                if "score" in cols:
                    cols["score"].append(batch.scores)
                if ids_writer is not None:
                    ids_writer.write_batch(pa.record_batch([batch.ids.cast(pa.string())], names=["id"]))
                n += m
                per_source[batch.source_index] += m
                progress.update(m)
                progress.set_postfix_str(f"file {batch.source_index + 1}/{len(ctx.sources)}", refresh=False)
        progress.total = n  # the estimate is replaced by the true count
        progress.refresh()
    writer.drain()
    for c in cols.values():
        c.close()
    if ids_writer is not None:
        ids_writer.close()
        os.replace(os.path.join(d, "ids.arrow.part"), os.path.join(d, "ids.arrow"))
    if n == 0 and not rejected:
        raise InputError("no documents in the input")
    rejected_docs = _check_duplicate_ids(ctx, d, n) if cfg.id_column else []
    _save_rejected(d, rejected, rejected_docs)
    return {"documents": n, "per_source": per_source, "rejected_records": len(rejected),
            "rejected_documents": len(rejected_docs)}


def _check_duplicate_ids(ctx: RunContext, d: str, n: int) -> List[tuple]:
    """Duplicate user ids: an error naming both places, or (skip) the later ones rejected."""
    ids = _read_ids(d)
    order = pc.array_sort_indices(ids).to_numpy()  # stable: equal ids stay in input order
    sorted_ids = ids.take(pa.array(order))
    if len(sorted_ids) < 2:
        return []
    same = pc.equal(sorted_ids.slice(1), sorted_ids.slice(0, len(sorted_ids) - 1)).to_numpy(zero_copy_only=False)
    dup_pos = np.flatnonzero(same) + 1
    if len(dup_pos) == 0:
        return []
    source = open_column(os.path.join(d, "source.i32"), np.int32)
    row = open_column(os.path.join(d, "row.i64"), np.int64)
    # the first of each run of equal ids
    is_start = np.ones(len(order), dtype=bool)
    is_start[dup_pos] = False
    first_of = np.maximum.accumulate(np.where(is_start, np.arange(len(order)), 0))
    out = []
    for p in dup_pos:
        later = int(order[p])
        first = int(order[first_of[p]])
        where_first = place(ctx.sources[source[first]], int(row[first]))
        where_later = place(ctx.sources[source[later]], int(row[later]))
        value = sorted_ids[p].as_py()
        if ctx.config.on_error == "fail":
            raise InputError(f"{where_later}: duplicate id {value!r} (first at {where_first}); "
                             f"ids in --id-column must be unique")
        out.append((later, f"duplicate id {value!r} (first at {where_first})"))
    out.sort()
    return out


def _read_ids(d: str) -> pa.Array:
    with pa.memory_map(os.path.join(d, "ids.arrow")) as f:
        table = pa.ipc.open_file(f).read_all()
    return table.column("id").combine_chunks()


def _save_rejected(d: str, rejected_records: List[tuple], rejected_docs: List[tuple]) -> None:
    with open(os.path.join(d, "rejected.json"), "w") as f:
        json.dump({"records": rejected_records, "documents": rejected_docs}, f)


def _load_rejected(work: WorkDir) -> dict:
    with open(work.file("read", "rejected.json")) as f:
        return json.load(f)


# --------------------------------------------------------------------------- stage: pairs

class Corpus:
    """The read stage's per-document arrays, memory-mapped."""

    def __init__(self, work: WorkDir, config: Config):
        d = work.file("read", "")
        self.dir = d
        self.config = config
        self.source = open_column(os.path.join(d, "source.i32"), np.int32, mmap=False)
        self.n = len(self.source)
        self.row = open_column(os.path.join(d, "row.i64"), np.int64, mmap=False)
        self.length = open_column(os.path.join(d, "length.i64"), np.int64, mmap=False)
        self.count = open_column(os.path.join(d, "count.i64"), np.int64, mmap=False)
        score_path = os.path.join(d, "score.f64")
        self.score = open_column(score_path, np.float64, mmap=False) if os.path.exists(score_path) else None
        rej = _load_rejected(work)
        self.rejected_docs = np.array([r[0] for r in rej["documents"]], dtype=np.int64)
        self.rejected_doc_reasons = [r[1] for r in rej["documents"]]
        self.rejected_records = rej["records"]

    def signatures(self) -> np.ndarray:
        return open_column(os.path.join(self.dir, "sig.u32"), np.uint32, self.config.num_perm)

    def keys(self) -> np.ndarray:
        return open_column(os.path.join(self.dir, "keys.u64"), np.uint64, self.config.bands, mmap=False)

    def shingle_store(self) -> "ShingleStore":
        """The raw shingle hashes of every document (text order, with repeats), read on demand."""
        return ShingleStore(os.path.join(self.dir, "sh.u64"), self.count)

    def eligible(self) -> np.ndarray:
        ok = self.count > 0
        if len(self.rejected_docs):
            ok[self.rejected_docs] = False
        return ok


VERIFY_CHUNK = 1 << 16  # pairs verified at a time: bounds the shingle sets held in memory


class ShingleStore:
    """Reads the raw shingle hashes of chosen documents from the read stage's file.

    Explicit reads (coalesced across adjacent documents) rather than a memory map: a map would
    pull whole neighbourhoods of the file into the process (fault-around), so that the few
    documents of the candidate pairs, scattered over the corpus, cost the memory of all of them.
    """

    def __init__(self, path: str, counts: np.ndarray):
        self.path = path
        self.offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])

    def raw(self, docs: np.ndarray):
        """Raw shingle hashes of ``docs`` (ascending), CSR indexed by position in docs."""
        starts = self.offsets[docs]
        ends = self.offsets[docs + 1]
        sizes = ends - starts
        local = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(sizes, out=local[1:])
        buf = np.empty(local[-1], dtype=np.uint64)
        # coalesce runs of documents that lie next to each other in the file
        breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
        run_first = np.concatenate(([0], breaks))
        run_last = np.concatenate((breaks, [len(docs)])) - 1
        view = memoryview(buf).cast("B")
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for a, b in zip(run_first.tolist(), run_last.tolist()):
                lo, hi = int(starts[a]), int(ends[b])
                if hi > lo:
                    dst = view[local[a] * 8:(local[a] + hi - lo) * 8]
                    got = os.preadv(fd, [dst], lo * 8)
                    if got != (hi - lo) * 8:
                        raise NeardupError(f"work directory damaged: short read in {self.path}; run without --resume")
        finally:
            os.close(fd)
        return local, buf


def make_verifier(corpus: Corpus, config: Config):
    """verify(left, right) -> (passed, similarity) for the configured mode."""
    threshold = config.threshold
    if config.verify == "exact":
        store = corpus.shingle_store()

        def verify(left, right):
            sim = np.empty(len(left), dtype=np.float64)
            for lo in range(0, len(left), VERIFY_CHUNK):
                check_interrupt()
                hi = min(lo + VERIFY_CHUNK, len(left))
                # shingles are read only for the documents of these pairs
                docs, inverse = np.unique(np.concatenate([left[lo:hi], right[lo:hi]]), return_inverse=True)
                offsets, hashes = store.raw(docs)
                m = hi - lo
                sim[lo:hi] = exact_jaccard_raw(offsets, hashes, inverse[:m], inverse[m:])
                del offsets, hashes
            return sim >= threshold, sim
    else:
        sigs = corpus.signatures()

        if config.verify == "estimate":
            def verify(left, right):
                sim = estimated_jaccard(sigs, left, right)
                return sim >= threshold, sim
        else:  # none: every candidate pair is a duplicate; the estimate is reported
            def verify(left, right):
                sim = estimated_jaccard(sigs, left, right)
                return np.ones(len(left), dtype=bool), sim
    return verify


def stage_pairs(ctx: RunContext) -> dict:
    cfg = ctx.config
    ctx.work.stage_dir("pairs", fresh=True)
    corpus = Corpus(ctx.work, cfg)
    with bar("candidates + verify", total=2, unit="step", quiet=ctx.quiet) as progress, kernel_threads(cfg.workers):
        rank = keep_order(corpus.n, cfg.keep, lengths=corpus.length, scores=corpus.score)
        offsets, members = bucket_runs(corpus.keys(), corpus.eligible(), rank=rank)
        progress.update(1)
        verify = make_verifier(corpus, cfg)
        search = find_pairs(offsets, members, verify, max_rounds=cfg.max_anchor_rounds)
        progress.update(1)
    ctx.work.save_arrays("pairs", "pairs.npz", left=search.left, right=search.right,
                         similarity=search.similarity)
    return {"candidate_pairs": search.candidate_pairs, "verified_pairs": int(len(search.left)),
            "buckets": search.buckets, "anchor_rounds": search.rounds,
            "truncated_buckets": search.truncated_buckets}


# --------------------------------------------------------------------------- stage: clusters

def stage_clusters(ctx: RunContext) -> dict:
    cfg = ctx.config
    ctx.work.stage_dir("clusters", fresh=True)
    corpus = Corpus(ctx.work, cfg)
    pairs = ctx.work.load_arrays("pairs", "pairs.npz")
    rank = keep_order(corpus.n, cfg.keep, lengths=corpus.length, scores=corpus.score)
    sel = select_representatives(corpus.n, pairs["left"], pairs["right"], pairs["similarity"], rank)
    ctx.work.save_arrays("clusters", "selection.npz", cluster=sel.cluster, representative=sel.representative,
                         similarity=sel.similarity, removed=sel.removed)
    return {"clusters": sel.n_clusters, "removed": int(sel.removed.sum())}


# --------------------------------------------------------------------------- stage: write

class IdLookup:
    """The id of a document: the user's id column, the path of a text file, or 'NAME:ROW'."""

    def __init__(self, corpus: Corpus, sources: Sequence[nio.Source], config: Config):
        self.corpus = corpus
        self.sources = sources
        self.user_ids = _read_ids(corpus.dir) if config.id_column else None

    def __call__(self, docs: np.ndarray) -> List[str]:
        docs = np.asarray(docs, dtype=np.int64)
        if self.user_ids is not None:
            return self.user_ids.take(pa.array(docs)).to_pylist()
        src = self.corpus.source[docs]
        row = self.corpus.row[docs]
        out = []
        for s, r in zip(src.tolist(), row.tolist()):
            source = self.sources[s]
            out.append(source.name if source.format == "text" else f"{source.name}:{r}")
        return out


ROW_GROUP = 65536


class ParquetRows:
    """Writes rows streamed in any batch sizes as row groups of exactly ROW_GROUP rows, so that
    the same rows give the same bytes whichever engine produced them and however they were
    batched. Written under a temporary name and renamed on close."""

    def __init__(self, path: str, schema: pa.Schema):
        self.path = path
        self.schema = schema
        self._writer = pq.ParquetWriter(path + ".tmp", schema, **PARQUET_OPTS)
        self._pending: List[pa.Table] = []
        self._pending_rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self._pending.append(table.select(self.schema.names).cast(self.schema))
        self._pending_rows += table.num_rows
        if self._pending_rows >= ROW_GROUP:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending)
        full = (table.num_rows // ROW_GROUP) * ROW_GROUP if not final else table.num_rows
        if full:
            self._writer.write_table(table.slice(0, full).combine_chunks(), row_group_size=ROW_GROUP)
        rest = table.slice(full)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def close(self) -> None:
        self._flush(final=True)
        self._writer.close()
        os.replace(self.path + ".tmp", self.path)


def _write_parquet(table: pa.Table, path: str) -> None:
    w = ParquetRows(path, table.schema)
    w.write(table)
    w.close()


def kept_mask(corpus: Corpus, selection: dict) -> np.ndarray:
    keep = ~selection["removed"]
    if len(corpus.rejected_docs):
        keep[corpus.rejected_docs] = False
    return keep


def stage_write(ctx: RunContext, read_info: dict, pairs_info: dict) -> dict:
    cfg = ctx.config
    out = ctx.output
    corpus = Corpus(ctx.work, cfg)
    sel = ctx.work.load_arrays("clusters", "selection.npz")
    ids = IdLookup(corpus, ctx.sources, cfg)
    keep = kept_mask(corpus, sel)
    removed = np.flatnonzero(sel["removed"])
    os.makedirs(out, exist_ok=True)

    # removed.parquet
    names = [s.name for s in ctx.sources]
    removed_table = pa.table({
        "id": pa.array(ids(removed), pa.string()),
        "representative": pa.array(ids(sel["representative"][removed]), pa.string()),
        "cluster": pa.array(ids(sel["cluster"][removed]), pa.string()),
        "similarity": pa.array(sel["similarity"][removed], pa.float64()),
        "source": pa.array([names[s] for s in corpus.source[removed].tolist()], pa.string()),
    }, schema=REMOVED_SCHEMA)
    _write_parquet(removed_table, os.path.join(out, "removed.parquet"))

    # clusters.parquet: every document of a cluster of two or more, grouped by cluster
    in_cluster = np.flatnonzero(sel["cluster"] >= 0)
    order = np.lexsort((in_cluster, sel["cluster"][in_cluster]))
    members = in_cluster[order]
    clusters_table = pa.table({
        "id": pa.array(ids(members), pa.string()),
        "cluster": pa.array(ids(sel["cluster"][members]), pa.string()),
        "is_representative": pa.array(~sel["removed"][members], pa.bool_()),
    }, schema=CLUSTERS_SCHEMA)
    _write_parquet(clusters_table, os.path.join(out, "clusters.parquet"))

    # rejected.parquet: records that could not be read, and documents rejected after reading
    rej_rows = [(s, r, reason) for s, r, reason in corpus.rejected_records]
    for doc, reason in zip(corpus.rejected_docs.tolist(), corpus.rejected_doc_reasons):
        rej_rows.append((int(corpus.source[doc]), int(corpus.row[doc]), reason))
    rej_rows.sort(key=lambda t: (t[0], -1 if t[1] is None else t[1]))
    rejected_path = os.path.join(out, "rejected.parquet")
    if cfg.on_error == "skip":
        _write_parquet(pa.table({
            "source": pa.array([names[s] for s, _, _ in rej_rows], pa.string()),
            "row": pa.array([r for _, r, _ in rej_rows], pa.int64()),
            "reason": pa.array([x for _, _, x in rej_rows], pa.string()),
        }, schema=REJECTED_SCHEMA), rejected_path)
    elif os.path.exists(rejected_path):
        os.remove(rejected_path)

    # kept/: one shard per input file
    captured: Dict[int, str] = {}
    kept_files = write_kept_shards(ctx, corpus, keep, sample_members(sel), captured)

    n_input = corpus.n + len(corpus.rejected_records)
    n_rejected = len(rej_rows)
    n_kept = int(keep.sum())
    counts = {
        "input": int(n_input),
        "kept": n_kept,
        "removed": int(len(removed)),
        "rejected": int(n_rejected),
        "clusters": int(len(np.unique(sel["cluster"][in_cluster]))) if len(in_cluster) else 0,
        "empty_documents": int(((corpus.count == 0) & keep).sum()),
        "candidate_pairs": int(pairs_info["candidate_pairs"]),
        "verified_pairs": int(pairs_info["verified_pairs"]),
        "buckets": int(pairs_info["buckets"]),
        "truncated_buckets": int(pairs_info["truncated_buckets"]),
    }
    stats = build_stats(cfg, ctx.sources, counts, read_info["per_source"], kept_files)
    _write_sample_texts(ctx, corpus, sel, ids, captured)
    return stats


def build_stats(cfg: Config, sources: Sequence[nio.Source], counts: dict, per_source, kept_files: List[str]) -> dict:
    """The content of stats.json (without "seconds"), the same for every engine; checks that every
    input document is accounted for."""
    if counts["input"] != counts["kept"] + counts["removed"] + counts["rejected"]:
        raise NeardupError(f"internal error: counts do not add up: {counts}")
    return {
        "counts": counts,
        "params": {
            "threshold": cfg.threshold, "num_perm": cfg.num_perm, "bands": cfg.bands, "rows": cfg.rows,
            "ngram": cfg.ngram, "char_ngrams": cfg.char_ngrams, "seed": cfg.seed, "verify": cfg.verify,
            "keep": cfg.keep, "max_anchor_rounds": cfg.max_anchor_rounds,
            "normalize_unicode": cfg.normalize_unicode, "lowercase": cfg.lowercase,
            "remove_punctuation": cfg.remove_punctuation, "collapse_whitespace": cfg.collapse_whitespace,
            "text_column": cfg.text_column, "id_column": cfg.id_column, "on_error": cfg.on_error,
            "output_format": cfg.output_format,
        },
        "inputs": [{"name": s.name, "format": s.format, "documents": int(per_source[i])}
                   for i, s in enumerate(sources)],
        "kept_files": kept_files,
        "neardup_version": _version(),
    }


def write_kept_shards(ctx: RunContext, corpus: Corpus, keep: np.ndarray, sample: Sequence[int] = (),
                      captured: Optional[Dict[int, str]] = None) -> List[str]:
    """Writes kept/; the texts of the ``sample`` documents met on the way go into ``captured``."""
    cfg = ctx.config
    kept_dir = os.path.join(ctx.output, "kept")
    if os.path.isdir(kept_dir):
        import shutil
        shutil.rmtree(kept_dir)
    os.makedirs(kept_dir, exist_ok=True)
    written = []
    order = np.argsort(corpus.source, kind="stable")
    bounds = np.searchsorted(corpus.source[order], np.arange(len(ctx.sources) + 1))
    with bar("write kept", total=len(ctx.sources), unit="file", quiet=ctx.quiet) as progress:
        for si, src in enumerate(ctx.sources):
            check_interrupt()
            docs = order[bounds[si]:bounds[si + 1]]
            rows = np.sort(corpus.row[docs[keep[docs]]])
            progress.update(1)
            if src.format == "table":
                ctx.table_kept_rows[si] = rows
                path = os.path.join(kept_dir, "table.parquet" if len(ctx.sources) == 1 else f"table-{si}.parquet")
                _write_parquet(src.table.take(pa.array(rows, pa.int64())), path)
                written.append(os.path.relpath(path, kept_dir))
                continue
            rel = nio.output_relpath(src, cfg.output_format)
            if len(docs) == 0 or (src.format == "text" and len(rows) == 0):
                continue  # nothing could be read from it (all rejected), or a removed text file
            path = os.path.join(kept_dir, rel)
            want = {int(corpus.row[d]): d for d in sample if corpus.source[d] == si}
            capture = dict.fromkeys(want) if want and src.format == "jsonl" else None
            nio.write_kept(src, rows, path, output_format=cfg.output_format, text_column=cfg.text_column,
                           id_column=cfg.id_column, capture=capture)
            if capture and captured is not None:
                for row, line in capture.items():
                    if line is not None:
                        captured[want[row]] = json.loads(line)[cfg.text_column]
            written.append(rel)
    return written


def sample_members(sel: dict, clusters: int = 20, per_cluster: int = 5) -> List[int]:
    """The documents shown side by side in the report: the largest clusters (ties: the earlier
    cluster), each with its representative first, then removed members in input order."""
    cl = sel["cluster"]
    members = np.flatnonzero(cl >= 0)
    if len(members) == 0:
        return []
    heads, sizes = np.unique(cl[members], return_counts=True)
    top = heads[np.lexsort((heads, -sizes))][:clusters]
    wanted = []
    for h in top.tolist():
        m = members[cl[members] == h]
        m = np.concatenate([[h], m[m != h]])[:per_cluster]
        wanted.extend(m.tolist())
    return wanted


def _write_sample_texts(ctx: RunContext, corpus: Corpus, sel: dict, ids: IdLookup,
                        captured: Dict[int, str]) -> None:
    """texts_sample.parquet: texts of the members of the largest clusters, for the report."""
    path = os.path.join(ctx.output, "texts_sample.parquet")
    wanted = sample_members(sel)
    if not wanted:
        _write_parquet(SAMPLE_SCHEMA.empty_table(), path)
        return
    missing = np.array(sorted(set(wanted) - set(captured)), dtype=np.int64)
    texts = dict(captured)
    if len(missing):
        texts.update(fetch_texts(ctx, corpus, missing))
    _write_parquet(pa.table({"id": pa.array(ids(np.array(wanted, np.int64)), pa.string()),
                             "text": pa.array([texts[d] for d in wanted], pa.string())}, schema=SAMPLE_SCHEMA), path)


def fetch_texts(ctx: RunContext, corpus: Corpus, docs: np.ndarray) -> Dict[int, str]:
    """The texts of a few documents, by reading again only the sources that hold them."""
    cfg = ctx.config
    out: Dict[int, str] = {}
    by_source: Dict[int, Dict[int, int]] = {}
    for d in docs.tolist():
        by_source.setdefault(int(corpus.source[d]), {})[int(corpus.row[d])] = d
    for si in sorted(by_source):
        want = by_source[si]
        if ctx.sources[si].format == "jsonl":
            out.update(_jsonl_texts(ctx.sources[si], want, cfg.text_column))
            continue
        for batch in nio.read_source(ctx.sources[si], si, text_column=cfg.text_column, on_error="skip",
                                     batch_size=cfg.batch_size):
            rows = batch.rows
            hit = np.flatnonzero(np.isin(rows, np.fromiter(want.keys(), np.int64)))
            for i in hit.tolist():
                out[want[int(rows[i])]] = batch.text[i].as_py()
            if len(out) >= len(docs) or (len(rows) and rows[-1] >= max(want)):
                if all(w in out for w in want.values()):
                    break
    return out


def _jsonl_texts(src: nio.Source, want: Dict[int, int], text_column: str) -> Dict[int, str]:
    """Texts of a few lines of a JSONL file: the lines are found by scanning newlines, and only
    the wanted ones are parsed (the reader's row is the 0-based line index)."""
    from ..io._streams import iter_blocks, line_bounds
    rows = np.array(sorted(want), dtype=np.int64)
    out: Dict[int, str] = {}
    line0 = 0
    for block in iter_blocks(src.path, src.compression):
        starts, ends = line_bounds(block)
        lo, hi = np.searchsorted(rows, [line0, line0 + len(starts)])
        for r in rows[lo:hi].tolist():
            i = r - line0
            out[want[r]] = json.loads(block[starts[i]:ends[i]])[text_column]
        line0 += len(starts)
        if line0 > rows[-1]:
            break
    return out


def _version() -> str:
    from .. import __version__
    return __version__


# --------------------------------------------------------------------------- the run

def run_local(ctx: RunContext) -> dict:
    """Runs the stages not yet done; returns stats (with seconds per stage)."""
    work = ctx.work
    stage_funcs = [("read", lambda: stage_read(ctx)),
                   ("pairs", lambda: stage_pairs(ctx)),
                   ("clusters", lambda: stage_clusters(ctx))]
    redo = False
    for name, func in stage_funcs:
        check_interrupt()
        # a stage finished by another engine keeps its files in another layout: redo it, and
        # every stage after it
        if not redo and work.is_done(name) and work.info(name).get("engine", "local") == "local":
            ctx.seconds[name] = 0.0
            continue
        redo = True
        t0 = time.perf_counter()
        info = func()
        info["engine"] = "local"
        ctx.seconds[name] = round(time.perf_counter() - t0, 3)
        work.mark_done(name, info)
    return finish(ctx)


def finish(ctx: RunContext) -> dict:
    """The write stage and the report (shared by every engine)."""
    check_interrupt()
    t0 = time.perf_counter()
    stats = stage_write(ctx, ctx.work.info("read"), ctx.work.info("pairs"))
    ctx.seconds["write"] = round(time.perf_counter() - t0, 3)
    return publish(ctx, stats)


def publish(ctx: RunContext, stats: dict) -> dict:
    """The end of every engine's run: stats.json (with the seconds per stage), report.html, and
    the write stage recorded as done."""
    stats["seconds"] = dict(ctx.seconds)
    tmp = os.path.join(ctx.output, "stats.json.tmp")
    with open(tmp, "w") as f:
        json.dump(stats, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, os.path.join(ctx.output, "stats.json"))
    try:
        from ..report import write_report
    except ImportError:  # pragma: no cover - report module missing from a partial install
        write_report = None
    if write_report is not None:
        write_report(ctx.output)
    ctx.work.mark_done("write", {})
    return stats
