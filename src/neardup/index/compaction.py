"""Compaction: :func:`compact` merges an index's segments into as few as the size bounds allow
(:func:`merge_groups`) and switches the manifest; :func:`merge_group` merges several segments
into one as streams, in bounded memory.

Every file of the merged segment is written in chunks while the old segments' files are read in
chunks, front to back: each old file twice, first to compare its CRC-32 with the manifest's (a
damaged file is refused before any of its values is used), then to merge it (checked again).

* The per-document files (ids, sources, fingerprints or signatures, their offsets) are the old
  segments' live documents in order: chunks of at most ``CHUNK_DOCS`` documents and
  ``CHUNK_VALUES`` values.
* The sorted band keys are a k-way merge: each old segment contributes a buffer of its next
  keys; the keys below the smallest last key of the buffers still to be refilled are final and
  written, sorted by (key, new document) as one sort of all the keys would order them.

What is held: those buffers (``MERGE_KEYS`` keys in all, at least ``MIN_BUFFER`` a segment, and
a bucket of equal keys whole), one chunk of a per-document file, and 5 bytes per document of the
merged segment (its removed-document mask and new positions), whatever the sizes of the segments.
Removed documents (tombstones) are left out, so the merged segment has none.
"""

from __future__ import annotations

import time
import zlib
from typing import Dict, List, Sequence

import numpy as np

from ..errors import ConfigError, StorageError
from ..progress import check_interrupt, commit_point
from . import segments as layout
from .maintenance import committed_manifest
from .removal import dead_mask, dead_name, live_docs
from .segments import BLOCK_SUMS, FILE_DTYPES, STORE_FILES, new_segment_name
from .storage import damaged, entry_files

CHUNK_DOCS = 1 << 16        # documents of a per-document chunk
CHUNK_VALUES = 1 << 22      # values (fingerprints, id bytes, signature values) of a chunk
MERGE_KEYS = 1 << 20        # band keys buffered over all merged segments
MIN_BUFFER = 1 << 10        # band keys buffered per segment, at least


class Stream:
    """One old file read front to back in pieces, its CRC-32 checked when it ends."""

    def __init__(self, reader, entry: dict, file: str, where: str):
        self.reader, self.entry, self.file, self.where = reader, entry, file, where
        info = entry_files(entry, where)[file]
        self.dtype = np.dtype(FILE_DTYPES[file])
        self.size = info["bytes"] // self.dtype.itemsize
        self.want = info.get("crc32")
        self.pos = 0
        self.crc = 0

    def take(self, count: int) -> np.ndarray:
        count = max(0, min(count, self.size - self.pos))
        out = self.reader.read(self.file, self.pos, self.pos + count) if count else np.zeros(0, self.dtype)
        self.crc = zlib.crc32(memoryview(np.ascontiguousarray(out)).cast("B"), self.crc)
        self.pos += count
        return out

    @property
    def left(self) -> int:
        return self.size - self.pos

    def close(self) -> None:
        if self.pos != self.size:
            raise RuntimeError(f"internal error: compaction read {self.pos} of {self.size} values of {self.file}")
        got = self.crc & 0xFFFFFFFF
        if self.want is not None and got != self.want:
            raise StorageError(damaged(self.where, self.entry["name"], self.file, got, self.want))


class Part:
    """One old segment: its reader, removed documents and new positions."""

    def __init__(self, storage, entry: dict, offset: int, where: str):
        self.entry = entry
        self.reader = storage.open_segment(entry)
        self.where = where
        n = int(entry["docs"])
        dead = dead_mask(storage, entry)
        self.live = np.ones(n, dtype=bool) if dead is None else ~dead
        self.newpos = (offset + np.cumsum(self.live, dtype=np.int64) - 1).astype(np.uint32)
        self.count = int(self.live.sum())
        for file in entry_files(entry, where):  # checked whole before any value of it is used
            s = self.stream(file)
            while s.left:
                s.take(CHUNK_VALUES)
            s.close()

    def stream(self, file: str) -> Stream:
        return Stream(self.reader, self.entry, file, self.where)


def _csr(part: Part, off_file: str, val_file: str, out_off: str, out_val: str, base: List[int]):
    """(file, chunk) pairs of the live documents' offsets and values of one CSR pair of files."""
    offs, vals = part.stream(off_file), part.stream(val_file)
    n = len(part.live)
    prev = offs.take(1)
    for a in range(0, n, CHUNK_DOCS):
        b = min(n, a + CHUNK_DOCS)
        off = np.concatenate([prev, offs.take(b - a)]).astype(np.int64)
        prev = off[-1:]
        d = a
        while d < b:  # sub-chunks of at most CHUNK_VALUES values (at least one document)
            e = int(np.searchsorted(off, off[d - a] + CHUNK_VALUES, side="right")) - 1 + a
            e = min(b, max(e, d + 1))
            raw = vals.take(int(off[e - a] - off[d - a]))
            lengths = np.diff(off[d - a:e - a + 1])
            keep = part.live[d:e]
            if keep.all():
                chosen, kept_len = raw, lengths
            else:
                mask = np.repeat(keep, lengths)
                chosen, kept_len = raw[mask], lengths[keep]
            new = base[0] + np.cumsum(kept_len, dtype=np.int64)
            base[0] = int(new[-1]) if len(new) else base[0]
            yield out_off, new
            yield out_val, chosen
            d = e
    offs.close()
    vals.close()


def _rows(part: Part, file: str, width: int):
    """(file, chunk) pairs of the live documents' rows of a fixed-width file (``width`` values each)."""
    s = part.stream(file)
    n = len(part.live)
    step = max(1, min(CHUNK_DOCS, CHUNK_VALUES // max(width, 1)))
    for a in range(0, n, step):
        check_interrupt()
        b = min(n, a + step)
        rows = s.take((b - a) * width).reshape(b - a, width)
        yield file, rows[part.live[a:b]].ravel()
    s.close()


def _keys(parts: Sequence[Part]):
    """("keys.u64", chunk), ("kdoc.u32", chunk) pairs: the k-way merge of the parts' sorted keys."""
    size = max(MIN_BUFFER, MERGE_KEYS // max(1, len(parts)))
    streams = [(p.stream("keys.u64"), p.stream("kdoc.u32")) for p in parts]
    buf_k: List[np.ndarray] = [np.zeros(0, np.uint64) for _ in parts]
    buf_d: List[np.ndarray] = [np.zeros(0, np.uint32) for _ in parts]

    def refill(i: int) -> None:
        ks, ds = streams[i]
        buf_k[i] = np.concatenate([buf_k[i], ks.take(size)])
        buf_d[i] = np.concatenate([buf_d[i], ds.take(size)])

    for i in range(len(parts)):
        refill(i)
    while True:
        open_ = [i for i in range(len(parts)) if streams[i][0].left]
        if open_:
            blocking = min(open_, key=lambda i: int(buf_k[i][-1]) if len(buf_k[i]) else -1)
            bound = int(buf_k[blocking][-1]) if len(buf_k[blocking]) else 0
        else:
            blocking, bound = None, None
        out_k, out_d = [], []
        for i, p in enumerate(parts):
            cut = len(buf_k[i]) if bound is None else int(np.searchsorted(buf_k[i], np.uint64(bound), side="left"))
            k, d = buf_k[i][:cut], buf_d[i][:cut]
            buf_k[i], buf_d[i] = buf_k[i][cut:], buf_d[i][cut:]
            live = p.live[d]
            out_k.append(k[live])
            out_d.append(p.newpos[d[live]])
        keys = np.concatenate(out_k) if out_k else np.zeros(0, np.uint64)
        if len(keys):
            docs = np.concatenate(out_d)
            order = np.lexsort((docs, keys))
            yield "keys.u64", keys[order]
            yield "kdoc.u32", docs[order]
        if blocking is None:
            break
        refill(blocking)
    for ks, ds in streams:
        ks.close()
        ds.close()


def merged_chunks(parts: Sequence[Part], store: str, num_perm: int, sources: Dict[str, int]):
    """Every (file, chunk) of the merged segment; ``sources``: the merged segment's source
    numbers by name."""
    id_base, fp_base = [0], [0]
    for file in STORE_FILES[store]:  # every file is written, even one left empty
        if file not in BLOCK_SUMS.values():  # those are written from their data files
            yield file, np.zeros(0, FILE_DTYPES[file])
    yield "idoff.i64", np.zeros(1, np.int64)
    for p in parts:
        yield from _csr(p, "idoff.i64", "id.bin", "idoff.i64", "id.bin", id_base)
    if store == "exact":
        yield "fpoff.i64", np.zeros(1, np.int64)
        for p in parts:
            yield from _csr(p, "fpoff.i64", "fp.u32", "fpoff.i64", "fp.u32", fp_base)
    else:
        for p in parts:
            yield from _rows(p, "sig.u32", num_perm)
    for p in parts:
        remap = np.array([sources.get(s, 0) for s in p.entry["sources"]] or [0], np.uint32)
        for _, src in _rows(p, "src.u32", 1):
            yield "src.u32", remap[src.astype(np.int64)]
    yield from _keys(parts)


def merge_group(storage, group: Sequence[dict], store: str, num_perm: int, where: str, name: str) -> dict:
    """Writes the merged segment of ``group`` (entries, in order) under ``name``; returns its
    manifest entry (its documents per source counted on the way)."""
    parts: List[Part] = []
    offset = 0
    for entry in group:
        parts.append(Part(storage, entry, offset, where))
        offset += parts[-1].count
    # the sources with documents left, in the order of their first appearance (a source whose
    # documents were all removed is gone); their counts are the manifest's
    counts: Dict[str, int] = {}
    for entry in group:
        dead = entry["dead"]["source_docs"] if entry.get("dead") else [0] * len(entry["sources"])
        for s, c, gone in zip(entry["sources"], entry["source_docs"], dead):
            if c - gone:
                counts[s] = counts.get(s, 0) + c - gone
    sources = {s: i for i, s in enumerate(counts)}
    files = storage.write_segment(name, merged_chunks(parts, store, num_perm, sources))
    if set(files) != set(STORE_FILES[store]):
        raise RuntimeError(f"internal error: compaction wrote {sorted(files)}")
    return {"name": name, "docs": offset, "sources": list(counts), "source_docs": list(counts.values()),
            "files": files}


# --------------------------------------------------------------------------- the compaction of an index

def compact(index) -> dict:
    """See :meth:`neardup.Index.compact`."""
    t0 = time.perf_counter()
    if index.store == "bloom":
        raise ConfigError(f"index {index.display} is a bloom index: its filters cannot be merged without the "
                          f"keys they were built from, so it is not compacted (a query tests each segment's "
                          f"filters)")
    storage = index.storage
    with storage.writer():
        manifest = committed_manifest(index)
        index.check_files(manifest)
        storage.drop_orphans(manifest, thorough=True)
        old = manifest["segments"]
        groups = merge_groups(old)
        if len(groups) == len(old) and not any(e.get("dead") for e in old):
            return {"segments_before": len(old), "segments_after": len(old), "removed": 0, "seconds": 0.0}
        new_entries = _merged_entries(index, groups, old)
        try:
            commit_point()  # a signal before it: nothing compacted (the new segments go); after it: none stops it
            storage.commit(_switch(index, old, new_entries))
        except BaseException:
            storage.drop_segments([e["name"] for e in new_entries if e not in old])
            raise
        kept = {e["name"] for e in new_entries}
        storage.drop_segments([n for e in old for n in (e["name"], dead_name(e))
                               if n is not None and n not in kept])
    index.forget_manifest(segments=True)
    return {"segments_before": len(old), "segments_after": len(new_entries),
            "removed": sum(e["dead"]["docs"] for e in old if e.get("dead")),
            "seconds": round(time.perf_counter() - t0, 3)}


def merge_groups(entries: Sequence[dict]) -> List[List[dict]]:
    """The segments (manifest entries, in order) cut into runs of consecutive ones, each as long
    as its live documents and bytes stay within one segment's bounds: each run becomes one segment."""
    groups: List[List[dict]] = []
    group: List[dict] = []
    docs = size = 0
    for entry in entries:
        bytes_ = sum(f["bytes"] for f in entry["files"].values())
        if group and (docs + live_docs(entry) > layout.MAX_SEGMENT_DOCS
                      or size + bytes_ > layout.MAX_SEGMENT_BYTES):
            groups.append(group)
            group, docs, size = [], 0, 0
        group.append(entry)
        docs += live_docs(entry)
        size += bytes_
    if group:
        groups.append(group)
    return groups


def _merged_entries(index, groups: Sequence[List[dict]], old: Sequence[dict]) -> List[dict]:
    """The entries of the compacted index: a segment alone in its group and without removed
    documents as it is, every other group merged into a new segment (one whose documents were
    all removed is gone). On a failure the new segments written are removed."""
    new_entries: List[dict] = []
    try:
        for group in groups:
            check_interrupt()  # a group at a time (and a chunk at a time below)
            if len(group) == 1 and not group[0].get("dead"):
                new_entries.append(group[0])
            elif sum(live_docs(e) for e in group):
                entry = merge_group(index.storage, group, index.store, index.config.num_perm, index.display,
                                    new_segment_name())
                entry["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                new_entries.append(entry)
    except BaseException:
        index.storage.drop_segments([e["name"] for e in new_entries if e not in old])
        raise
    return new_entries


def _switch(index, old: Sequence[dict], new_entries: List[dict]):
    """The manifest update of a compaction: the merged segments in place of the old ones,
    refused when another process changed those meanwhile."""
    merged = [(e["name"], dead_name(e)) for e in old]

    def update(current):
        if current is None:
            raise StorageError(f"index {index.display} vanished during compaction")
        now = [(e["name"], dead_name(e)) for e in current["segments"]]
        if now[:len(merged)] != merged:
            raise StorageError(f"index {index.display} was compacted, or had documents removed, by another "
                               f"process meanwhile; nothing was changed: compact again")
        return dict(current, generation=current["generation"] + 1,
                    segments=new_entries + current["segments"][len(merged):])

    return update
