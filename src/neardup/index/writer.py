"""Adding documents to an index: new segments, committed together with one manifest switch."""

from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, InputError
from ..io.columns import id_values
from ..progress import check_interrupt, commit_point
from .bloom import BloomBuilder, refuse_rate
from .inputs import documents
from .manifest import check_manifest
from .removal import dead_mask, ids_of
from .segments import hashed_documents, SegmentBuilder, new_segment_name
from .storage import Storage


class IndexWriter:
    """Adds documents to an index as new segments, committed together by :meth:`commit`, which
    runs when the ``with`` block ends without an exception.

    Use as a context manager: on an exception nothing becomes visible (the written segments
    are removed), and a process killed at any moment leaves the index as it was. Under the
    command line's signal handler, Ctrl-C or SIGTERM stops an add at the next batch, or at the
    commit point (just before the manifest switch) at the latest, with nothing committed; one
    after the commit point lets the commit finish (:func:`neardup.progress.commit_point`).
    ``result`` holds the counts after the commit.
    """

    def __init__(self, index):
        self.index = index
        self.storage = index.storage
        self.config = index.config
        self.entries: List[dict] = []
        self.builder: Optional[SegmentBuilder] = None
        self.result: dict = {}
        self.added = 0
        self.empty = 0
        self.rejected = 0
        self._lock = None
        self._t0 = time.perf_counter()
        self.notes: List[str] = []  # said to the user (the ids a mixed input takes: io.columns.id_note)
        self._ids: List[pa.Array] = []  # the ids of this add, and their sources: checked at the commit
        self._sources: List = []

    def __enter__(self):
        # a new folder index gets its (empty) manifest before any segment: segments without
        # a manifest are then always a lost manifest, never a first add that was killed
        self._lock = self.storage.writer(initial=self.index.empty_manifest())
        self._lock.__enter__()
        try:
            manifest = self.storage.read_manifest()
            if manifest is not None:
                check_manifest(self.index.display, manifest, self.config, self.index.store, self.index.bloom)
                self.index.check_files(manifest)  # a lost or truncated file: refused, as by a query
            self.storage.drop_orphans(manifest)
        except BaseException as exc:
            self._lock.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.commit()
            else:
                self.abort()
        except BaseException as failed:  # the commit failed: nothing of it stays, and the lock's cleanup must know
            self.abort()
            self._lock.__exit__(type(failed), failed, failed.__traceback__)
            raise
        self._lock.__exit__(exc_type, exc, tb)
        return False

    # ------------------------------------------------------------------ input
    def add(self, data, ids=None, name=None, *, text_column="text", id_column=None, on_error="fail") -> None:
        """See :meth:`Index.add`."""
        for texts, batch_ids, sources in documents(data, ids, name, text_column, id_column, on_error,
                                                    self.config.batch_size, self):
            h = self.index.hash_texts(texts)
            self._append(h["keys"], h["nonempty"], batch_ids, sources, h["fp_offsets"], h["fp"], h["signatures"])

    def add_arrays(self, keys: np.ndarray, ids, source, *, signatures: Optional[np.ndarray] = None,
                   shingles: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> None:
        """Adds documents already hashed with this index's parameters (e.g. a dedup run's kept
        documents for ``--update-index``). Call it once per batch; the commit is at close.

        keys: (n, bands) uint64 band keys (:func:`neardup.kernels.bands.band_keys`).
        ids: n ids (strings or integers, a list or a pyarrow array; unique, in the add and in the index).
        source: one source name for all, or n names.
        signatures: (n, num_perm) uint32; needed by an ``estimate`` index (and, without
            shingles, to recognise empty documents).
        shingles: (offsets int64[n+1], uint64 hashes or uint32 fingerprints) per document, any order, repeats allowed;
            needed by an ``exact`` index.
        """
        cfg = self.config
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        if keys.ndim != 2 or keys.shape[1] != cfg.bands:
            raise ConfigError(f"keys must be (documents, {cfg.bands}) uint64 band keys, got shape {keys.shape}")
        n = len(keys)
        ids = id_values(ids)  # strings or integers, by the rule of every entry point
        if isinstance(ids, pa.ChunkedArray):
            ids = ids.combine_chunks()
        if len(ids) != n:
            raise ConfigError(f"{len(ids)} ids for {n} documents")
        fp_off, fp, nonempty = hashed_documents(n, signatures, shingles, "add_arrays")
        if self.index.store == "exact" and fp is None:
            raise ConfigError(f"index {self.index.display} keeps shingle fingerprints: pass shingles")
        if self.index.store == "estimate":
            if signatures is None:
                raise ConfigError(f"index {self.index.display} keeps signatures: pass signatures")
            signatures = np.asarray(signatures, dtype=np.uint32)
            if signatures.shape != (n, cfg.num_perm):
                raise ConfigError(f"signatures must be ({n}, {cfg.num_perm}) uint32, got {signatures.shape}")
        self._append(keys, nonempty, ids, source, fp_off, fp, signatures)

    # ------------------------------------------------------------------ segments
    def _append(self, keys, nonempty, ids, source, fp_off, fp, signatures) -> None:
        check_interrupt()  # a batch at a time: a signal stops the add here, nothing committed
        if self.builder is None:
            if self.index.store == "bloom":
                self.builder = BloomBuilder(store="bloom", bands=self.config.bands, num_perm=self.config.num_perm,
                                            rate=self.index.bloom["false_positive_rate"])
            else:
                self.builder = SegmentBuilder(store=self.index.store, bands=self.config.bands,
                                              num_perm=self.config.num_perm)
        b = self.builder
        n = len(nonempty)
        if isinstance(source, str):
            src = np.full(n, b.source_index(source), dtype=np.uint32)
        else:
            names = list(source)
            if len(names) != n:
                raise ConfigError(f"{len(names)} source names for {n} documents")
            src = np.array([b.source_index(s) for s in names], dtype=np.uint32)
        if self.index.store != "bloom":  # a bloom index keeps no ids
            ids = _checked_ids(ids)
            self._ids.append(ids)
            self._sources.append(source)
        b.append(keys, nonempty, ids, src, fp_offsets=fp_off, fp_values=fp,
                 signatures=signatures if self.index.store == "estimate" else None)
        self.added += n
        self.empty += int(n - nonempty.sum())
        if b.full():
            self._flush()

    def _flush(self) -> None:
        if self.builder is None or self.builder.docs == 0:
            return
        b, self.builder = self.builder, None
        if isinstance(b, BloomBuilder):
            self.entries.append(b.write(self.storage))
            return
        arrays = b.build()
        counts = np.bincount(arrays["src.u32"].astype(np.int64), minlength=len(b.sources))
        self.entries.append(write_entry(self.storage, arrays, b.sources, counts))

    def commit(self) -> None:
        self._flush()
        entries = self.entries
        index = self.index
        if entries and self._ids:
            check_unique_ids(index, self._ids, self._sources, self.config)

        def update(current):
            if current is None:
                current = index.empty_manifest()
            else:  # read again under the lock (the Redis transaction): another writer may have been first
                check_manifest(index.display, current, self.config, index.store, index.bloom)
            segments = current["segments"] + entries
            refuse_rate(index.display, current, "this add would leave it", segments)
            return dict(current, generation=current["generation"] + 1, segments=segments)

        commit_point()  # a signal before it: nothing committed (__exit__ removes the segments); after it: none stops it
        if entries:
            try:
                self.storage.commit(update)
            except BaseException:
                self.abort()
                raise
            index.forget_manifest()
        self.result = {"added": self.added, "empty": self.empty, "rejected": self.rejected,
                       "segments": len(entries), "seconds": round(time.perf_counter() - self._t0, 3)}
        if self.notes:
            self.result["notes"] = list(self.notes)
        self.entries = []

    def abort(self) -> None:
        """Removes the segments this writer wrote, except any that a manifest names already (a
        commit that failed after its switch)."""
        self.builder = None
        self._ids, self._sources = [], []
        names = [e["name"] for e in self.entries]
        self.entries = []
        try:
            current = self.storage.read_manifest()
            named = {s["name"] for s in (current or {}).get("segments", [])}
            self.storage.drop_segments([n for n in names if n not in named])
        except Exception:  # the orphans are removed by the next writer
            pass


def write_entry(storage: Storage, arrays: Dict[str, np.ndarray], sources: Sequence[str],
                 counts: Optional[np.ndarray] = None) -> dict:
    name = new_segment_name()
    if counts is None:
        counts = np.bincount(np.asarray(arrays["src.u32"], dtype=np.int64), minlength=len(sources))
    files = storage.write_segment(name, arrays)
    return {"name": name, "docs": int(len(arrays["src.u32"])), "sources": list(sources),
            "source_docs": [int(c) for c in counts], "files": files,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


# --------------------------------------------------------------------------- one id, one document

HOW = (" (positional ids name each file as the add names it: add each dump under its own --name NAME "
       "(name='NAME'), its ids then NAME/FILE:LINE; or choose a unique id column, --id-column NAME)")


def _checked_ids(ids) -> pa.Array:
    """The ids of a batch as strings; one with a line break or an empty one is refused (``neardup
    index remove --ids FILE`` reads one id a line, blank lines skipped: it could never be removed),
    as is a null."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    ids = ids.cast(pa.string())
    if ids.null_count:
        raise ConfigError("an id is None: an id is a string or an integer")
    broken = pc.match_substring_regex(ids, "[\r\n]")
    if pc.any(broken).as_py():
        bad = ids.filter(broken)[0].as_py()
        raise InputError(f"id {bad!r} holds a line break: an index refuses it (neardup index remove --ids reads "
                         f"one id a line, so it could never be removed); nothing was added")
    if pc.any(pc.equal(pc.utf8_length(ids), 0)).as_py():
        raise InputError("an id is empty (''): an index refuses it (neardup index remove --ids skips blank lines, "
                         "so it could never be removed); nothing was added")
    return ids


def _source_of(ids: List[pa.Array], sources: List, wanted: str) -> str:
    """The source name of the first document of this add whose id is ``wanted``."""
    for arr, src in zip(ids, sources):
        at = pc.index(arr, wanted).as_py()
        if at >= 0:
            return src if isinstance(src, str) else list(src)[at]
    return "?"


def check_unique_ids(index, ids: List[pa.Array], sources: List, config=None) -> None:
    """One id, one document, in an index: an add whose ids repeat one another, or repeat the id
    of a live document of the index (a removed one's id may come back), is refused in one line,
    nothing added. The ids are compared as text (an integer id is its decimal digits)."""
    new = pa.chunked_array(ids, pa.string()).combine_chunks()
    counts = pc.value_counts(new)
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    if len(repeated):
        dup = repeated.field("values")[0].as_py()
        raise InputError(f"duplicate id {dup!r} in the documents added (first in {_source_of(ids, sources, dup)!r}; "
                         f"ids in an index must be unique){HOW}; nothing was added")
    unique = pc.unique(new)
    manifest = index.storage.read_manifest()
    if manifest is not None and config is not None:  # another writer's first add, of another kind, came first:
        check_manifest(index.display, manifest, config, index.store, index.bloom)  # its line, not a KeyError
    for entry in (manifest or {}).get("segments", []):
        n = int(entry["docs"])
        if not n:
            continue
        seg_ids = ids_of(index.storage.open_segment(entry), n)
        hit = np.asarray(pc.is_in(seg_ids, value_set=unique.cast(pa.large_string())).to_numpy(zero_copy_only=False),
                         bool)
        dead = dead_mask(index.storage, entry)
        if dead is not None:
            hit &= ~dead
        if hit.any():
            at = int(np.flatnonzero(hit)[0])
            dup = seg_ids[at].as_py()
            held = entry["sources"][int(np.asarray(index.storage.open_segment(entry).array("src.u32"))[at])]
            raise InputError(f"id {dup!r} of {_source_of(ids, sources, dup)!r} is already the id of a document of "
                             f"index {index.display} (source {held!r}); ids in an index must be unique{HOW}; "
                             f"nothing was added")

