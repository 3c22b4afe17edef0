"""neardup as steps of a datatrove pipeline (``pip install 'neardup[datatrove]'``).

    NeardupFilter      drops (or marks) the documents that are near-duplicates of a neardup index's
                       documents, verified like ``neardup dedup --against``; every rank of any
                       executor (local, Slurm, Ray) against the same index, folder or Redis
    NeardupCommit      adds what the filter's ranks kept (their per-rank parts) to the index, once
    commit_additions   the same, as a function
    corpus_writer      writes the ranks' documents where ``neardup dedup`` reads them (JSONL)
    NeardupDedup       runs ``neardup dedup`` on them: a whole-corpus dedup, in one task
    kept_reader        reads the kept documents back as datatrove Documents

Why parts: the index takes concurrent writers safely (a folder's writers take turns under an
exclusive lock, Redis commits optimistically), but ranks that add while others query would each
see a different index, and what one rank removed would depend on which rank ran first. So the
filter's ranks only read: each pins the index's state at its start and writes the hashes of the
documents it keeps to ``additions/rank-NNNNN.parquet`` (streamed, one row group a batch); one
task after all ranks (:class:`NeardupCommit`, or :func:`commit_additions`) adds every part in one
commit, so every document of the run is checked against the index as it was before the run and
the run's additions appear at once, or not at all. The documents of the run are not checked
against each other (that is a dedup of the corpus: :class:`NeardupDedup`).

Documents keep their datatrove ids and metadata. A matched document gets, in its metadata,
``duplicate_of`` (the indexed document's id; ``""`` from a Bloom index, which keeps no ids),
``duplicate_source`` (its source in the index) and ``similarity`` (verified; None from a Bloom
index); in ``mode="drop"`` it goes to the ``exclusion_writer`` (a datatrove writer: where the
removals are read), in ``mode="mark"`` every document passes, with those keys (None when no
match).

This module imports datatrove; ``import neardup`` does not import it.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

try:
    from datatrove.data import Document, DocumentsPipeline
    from datatrove.pipeline.base import PipelineStep
    from datatrove.pipeline.filters.base_filter import BaseFilter
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("neardup.integrations.datatrove needs datatrove: pip install 'neardup[datatrove]'") from exc

from ..errors import ConfigError, StorageError
from ..index import Index
from ..io.storage.paths import redact

__all__ = ["NeardupFilter", "NeardupCommit", "commit_additions", "corpus_writer", "NeardupDedup", "kept_reader",
           "DUPLICATE_OF", "DUPLICATE_SOURCE", "SIMILARITY"]

DUPLICATE_OF = "duplicate_of"          # the column (metadata key) neardup's marks share
DUPLICATE_SOURCE = "duplicate_source"
SIMILARITY = "similarity"
MODES = ("drop", "mark")


def part_name(rank: int) -> str:
    """The file of one rank's additions in the ``additions`` folder."""
    return f"rank-{rank:05d}.parquet"


class NeardupFilter(BaseFilter):
    """Drops (``mode="drop"``) or marks (``mode="mark"``) the documents that have a verified
    near-duplicate in the neardup index at ``index`` (a folder or ``redis://HOST:PORT/DB``), at
    ``threshold`` (default: the index's). With ``additions`` (a folder every rank can write, e.g.
    on the cluster's shared file system), the hashes of the documents kept are written there per
    rank, for :class:`NeardupCommit` to add to the index once all ranks are done (the index is
    created then if it does not exist). ``batch_size`` documents are hashed and looked up at once.
    """

    name = "🔍 neardup index"

    def __init__(self, index, *, mode: str = "drop", threshold: Optional[float] = None,
                 additions: Optional[str] = None, exclusion_writer=None, batch_size: int = 1000):
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1; got {batch_size}")
        super().__init__(exclusion_writer, batch_size)
        self.index = os.fspath(index)
        self.mode = mode
        self.threshold = threshold
        self.additions = None if additions is None else os.fspath(additions)
        self._index: Optional[Index] = None
        self._part: Optional[_Part] = None

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        idx = Index(self.index, must_exist=self.additions is None)
        if idx.storage.read_manifest() is not None:
            idx.pin(idx.snapshot())  # one state of the index for the whole rank
        self._index = idx
        self._part = None if self.additions is None else _Part(self.additions, rank, idx)
        try:
            yield from super().run(data, rank, world_size)
            if self._part is not None:
                self._part.close()  # the part appears whole only once the rank is done
        finally:
            if self._part is not None:
                self._part.abort()
            idx.close()
            self._index = self._part = None

    def filter(self, doc: Document) -> bool:
        return self.filter_batch([doc])[0]

    def filter_batch(self, batch: List[Document]) -> List[bool]:
        idx = self._index
        h = idx.hash_texts([d.text for d in batch])
        shingles = None if h["fp"] is None else (h["fp_offsets"], h["fp"])
        threshold = None if idx.store == "bloom" else self.threshold
        m = idx.match(h["keys"], h["signatures"], shingles, threshold=threshold)
        keep = np.ones(len(batch), dtype=bool)
        keep[m.doc] = False
        if self.mode == "mark":
            for d in batch:
                d.metadata.update({DUPLICATE_OF: None, DUPLICATE_SOURCE: None, SIMILARITY: None})
        sims = [None if np.isnan(s) else float(s) for s in m.similarity.tolist()]
        for pos, mid, msrc, sim in zip(m.doc.tolist(), m.id.to_pylist(), m.source.to_pylist(), sims):
            batch[pos].metadata.update({DUPLICATE_OF: mid, DUPLICATE_SOURCE: msrc, SIMILARITY: sim})
        self.stat_update("neardup_matched", value=len(m))
        if self._part is not None:
            self._part.write([None if d.id is None else str(d.id) for d in batch], h,  # null, never "None"
                             np.flatnonzero(keep))
        return [True] * len(batch) if self.mode == "mark" else keep.tolist()


class _Part:
    """One rank's additions: the id, band keys, signatures (and for an exact index the shingle
    fingerprints) of each document it kept, streamed to ``rank-NNNNN.parquet.tmp`` a batch at a
    time and renamed to ``rank-NNNNN.parquet`` when the rank is done."""

    def __init__(self, folder: str, rank: int, index: Index):
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, part_name(rank))
        self.tmp = self.path + ".tmp"
        self.exact = index.store == "exact"
        self.writer: Optional[pq.ParquetWriter] = None

    def write(self, ids: List[str], h: dict, rows: np.ndarray) -> None:
        cols = {"id": pa.array([ids[i] for i in rows.tolist()], pa.string()),
                "keys": _fixed(h["keys"][rows]), "signatures": _fixed(h["signatures"][rows])}
        if self.exact:
            off = h["fp_offsets"]
            starts, ends = off[rows], off[rows + 1]
            lengths = ends - starts
            new_off = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum(lengths, out=new_off[1:])
            take = np.repeat(starts - new_off[:-1], lengths) + np.arange(new_off[-1], dtype=np.int64)
            cols["fp"] = pa.LargeListArray.from_arrays(pa.array(new_off), pa.array(h["fp"][take]))
        table = pa.table(cols)
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.tmp, table.schema)
        self.writer.write_table(table)

    def close(self) -> None:
        if self.writer is None:
            return  # a rank that kept nothing writes no part
        self.writer.close()
        self.writer = None
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if os.path.exists(self.tmp):
            os.remove(self.tmp)


def _fixed(matrix: np.ndarray) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(matrix).ravel()), matrix.shape[1])


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    arr = column.combine_chunks()
    return arr.flatten().to_numpy().reshape(len(arr), arr.type.list_size)


def commit_additions(index, additions, name: str = "datatrove") -> dict:
    """Adds every part the ranks of :class:`NeardupFilter` wrote to ``additions`` to the index,
    in rank order, in one commit, under the source ``name``; returns the add's counts. Run it
    once, after all ranks: a second run is refused in one line (the ids are in the index already)."""
    folder = os.fspath(additions)
    parts = sorted(p for p in os.listdir(folder) if p.startswith("rank-") and p.endswith(".parquet")) \
        if os.path.isdir(folder) else []
    if not parts:
        raise StorageError(f"no additions in {redact(folder)}: run the NeardupFilter ranks with additions= first")
    idx = Index(os.fspath(index))
    try:
        with idx.writer() as w:
            for p in parts:
                t = pq.read_table(os.path.join(folder, p))
                shingles = None
                if "fp" in t.column_names:
                    fp = t["fp"].combine_chunks()
                    shingles = (fp.offsets.to_numpy(), fp.values.to_numpy())
                w.add_arrays(_matrix(t["keys"]), t["id"], name, signatures=_matrix(t["signatures"]), shingles=shingles)
        return w.result
    finally:
        idx.close()


class NeardupCommit(PipelineStep):
    """:func:`commit_additions` as a step: run it as one task (``tasks=1``), after the
    :class:`NeardupFilter` ranks (``depends=`` their executor)."""

    name = "📥 neardup index add"
    type = "🫂 - DEDUP"

    def __init__(self, index, additions, name: str = "datatrove"):
        super().__init__()
        self.index, self.additions, self.source = os.fspath(index), os.fspath(additions), name

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        _one_task(self, world_size)
        if data:
            yield from data
        result = commit_additions(self.index, self.additions, self.source)
        self.stat_update("neardup_added", value=int(result.get("added", 0)))


def _one_task(step: PipelineStep, world_size: int) -> None:
    if world_size != 1:
        raise ConfigError(f"{type(step).__name__} works on the whole corpus at once: run it with tasks=1 "
                          f"(got {world_size})")


def corpus_writer(folder, **kwargs):
    """A datatrove ``JsonlWriter`` that writes the ranks' documents (text, id, metadata) to
    ``folder`` as ``NNNNN.jsonl.gz``, where :class:`NeardupDedup` reads them. Every id is
    written, as a string: datatrove's own adapter leaves out a falsy value, so a document whose
    id is ``0`` (a JSONL ``"id": 0``) would reach ``neardup dedup`` without one; a null id stays
    null (``NeardupDedup`` refuses it in one line), never the string ``"None"``."""
    from datatrove.pipeline.writers import JsonlWriter
    return JsonlWriter(os.fspath(folder), **{"adapter": _corpus_record, **kwargs})


def _corpus_record(writer, doc: Document) -> dict:
    """What :func:`corpus_writer` writes of a document (a module function: ranks pickle it)."""
    return {"text": doc.text, "id": None if doc.id is None else str(doc.id), "metadata": doc.metadata}  # null, never "None"


class NeardupDedup(PipelineStep):
    """Runs ``neardup dedup INPUT -o OUTPUT`` (:func:`neardup.dedup`, ids from the ``id`` field
    that datatrove writes; every other keyword is an option of :func:`neardup.dedup`) on the
    documents the ranks wrote with :func:`corpus_writer`: the whole corpus in one task
    (``tasks=1``), with neardup's verification, ``removed.parquet`` (each removed document's id
    and the kept one it duplicates) and report. :func:`kept_reader` reads the result back."""

    name = "🫂 neardup dedup"
    type = "🫂 - DEDUP"

    def __init__(self, input_folder, output_folder, **options: Any):
        super().__init__()
        self.input_folder, self.output_folder = os.fspath(input_folder), os.fspath(output_folder)
        self.options = {"id_column": "id", **options}

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        _one_task(self, world_size)
        if data:
            yield from data
        from ..api import dedup
        counts = dedup(self.input_folder, self.output_folder, **self.options).stats["counts"]
        for key in ("input", "kept", "removed"):
            self.stat_update(f"neardup_{key}", value=int(counts[key]))


def kept_reader(output_folder, **kwargs):
    """A datatrove ``JsonlReader`` of ``OUTPUT/kept``: the documents :class:`NeardupDedup` kept,
    with their ids and metadata as the ranks wrote them."""
    from datatrove.pipeline.readers import JsonlReader
    return JsonlReader(os.path.join(os.fspath(output_folder), "kept"), **kwargs)
