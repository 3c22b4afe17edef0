"""The persistent index: add documents once, then find the near-duplicates of new ones in it.

An index is a manifest plus immutable segments (:mod:`.segments`) in a storage (:mod:`.storage`:
a folder, or Redis). The manifest records the parameters that decide band keys and shingles
(the options of :class:`~neardup.config.Sketch` and :class:`~neardup.config.Shingling`) and
what each document carries for verification (``store``): ``exact`` keeps 32-bit shingle
fingerprints and verifies by their Jaccard, ``estimate`` keeps the signatures and verifies by
the share of equal values.

Lookup. A query document's b band keys are looked up in each segment's sorted key array
(``searchsorted``, the array memory-mapped or cached): every indexed document sharing a key
is a candidate, P(candidate | J = s) = 1 - (1 - s^r)^b as in a dedup run. Every candidate is
verified (no anchor: a query compares with each candidate), and a match is a candidate whose
verified similarity is at least the threshold.

Writes. :class:`~.writer.IndexWriter` hashes documents into segments and commits them all
with one manifest switch when it closes without error: an add is all or nothing, whatever kills it.
Removal is in :mod:`.removal`, compaction in :mod:`.compaction`, statistics and verification in
:mod:`.maintenance`; :class:`Index` is the one face of all of them.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..config import Config
from ..errors import ConfigError, StorageError
from ..io.storage import fs
from ..io.storage.folder import Folder
from ..kernels.arrays import unique
from ..kernels.bands import band_keys
from ..kernels.hashing import kernel_threads
from ..kernels.lookup import fingerprints, key_ranges
from ..kernels.minhash import MinHasher
from ..kernels.verify import estimated_jaccard, exact_jaccard
from . import bloom as bloom_tier
from . import compaction, maintenance, removal
from .manifest import check_manifest, params_of, resolve
from .manifest import empty_manifest as new_index_manifest
from .removal import dead_mask, dead_name
from .segments import hashed_documents
from .storage import FolderStorage, SegmentReader, Storage, gather_ranges
from .writer import IndexWriter

# Candidates taken from one bucket (one band key of one segment): bounds the work a query spends
# on boilerplate shared by huge numbers of documents; what is cut is counted and reported
# (``Matches.truncated_buckets``, ``Index.truncation_note``). Chosen by measurement
# (bench/index_bucket.py, bench/results/index_bucket.json): verifying a candidate of 330
# fingerprints costs about 7.3 µs of CPU, so 2,500 candidates stay within 20 ms for one query
# document in one segment, about 100 times a whole ordinary query (0.2 ms); 20,000 cost 145 ms.
MAX_BUCKET = 2_500
VERIFY_CHUNK = 1 << 16  # candidate pairs verified at a time
SMALL_BATCH = 64        # texts hashed on one thread


@dataclass(frozen=True)
class Match:
    """An indexed document like a query document. From a bloom index: id ``""``, source
    ``bloom:INDEX``, similarity None (a yes, not verified)."""

    id: str
    source: str
    similarity: Optional[float]


@dataclass
class Matches:
    """The best verified match of each query document that has one (see :meth:`Index.match`).

    doc: int64, position of the query document in the batch, ascending, each at most once.
    id, source: ``pa.string()`` arrays, the matched indexed document's id and source name.
    similarity: float64, its verified similarity (>= the threshold).
    candidates: candidate pairs verified; truncated_buckets: lookups (a band key of a query
    document in a segment) whose bucket held more than ``MAX_BUCKET`` documents, cut there;
    truncated: the candidates those cuts left unverified.
    """

    doc: np.ndarray
    id: pa.Array
    source: pa.Array
    similarity: np.ndarray
    candidates: int = 0
    truncated: int = 0
    truncated_buckets: int = 0

    def __len__(self) -> int:
        return len(self.doc)

    def to_table(self) -> pa.Table:
        return pa.table({"doc": pa.array(self.doc, pa.int64()), "id": self.id, "source": self.source,
                         "similarity": pa.array(self.similarity, pa.float64())})


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def open_storage(location) -> Storage:
    """The storage of an index location: Redis for redis:// (rediss://, unix://), a folder for
    a local path (or file://); any other URL is refused, never taken for a local path."""
    loc = os.fsdecode(os.fspath(location))
    if loc.lower().startswith(REDIS_SCHEMES):
        try:
            from .redis_storage import RedisStorage
            import redis  # noqa: F401
        except ImportError:
            raise StorageError("an index on Redis needs the redis package: pip install 'neardup[redis]'") from None
        return RedisStorage(loc)
    folder = Folder.of(loc)
    if folder.os_path is None:
        raise StorageError(f"an index cannot live at {folder}: indexes on object storage and other URLs "
                           f"are not supported; use a local folder or redis://HOST:PORT/DB")
    if not loc:
        raise StorageError("no index location given (a folder, or redis://HOST:PORT/DB)")
    return FolderStorage(fs.local_path(loc))



class Index:
    """A persistent near-duplicate index in a folder or on Redis (``redis://HOST:PORT/DB``).

    >>> idx = neardup.Index("kept.ndx")                                        # doctest: +SKIP
    >>> idx.add("out/kept/", name="dump-2024-10")                              # doctest: +SKIP
    >>> idx.query(["some new text ..."])          # [[Match(id, source, similarity), ...]]  # doctest: +SKIP

    ``config`` (a :class:`neardup.Config`) or keyword ``options`` (its field names) give the
    parameters. For a new index they are recorded at the first add (defaults: those of
    ``neardup dedup``). For an existing index, the parameters it was built with are used; a
    parameter given here that differs is a :class:`~neardup.errors.ConfigError` naming each
    difference (a whole ``Config`` is compared on every parameter but bands and rows, options only
    on those given). ``threshold`` is free: it only decides which verified candidates count as
    matches (below the threshold the index's bands and rows were chosen for, fewer similar
    documents become candidates: see :meth:`recall_note`).
    ``verify="estimate"`` (or ``"none"``) at creation stores signatures instead of shingle
    fingerprints; ``kind="bloom"`` at creation keeps one Bloom filter per band per segment
    instead (yes/no answers, about 78 bytes a document at 18 bands, :mod:`.bloom`; ``false_positive_rate``
    sizes its filters), and a ``kind`` that differs from an existing index's is a
    :class:`~neardup.errors.ConfigError`; ``must_exist=True`` makes a missing index an error.
    Queries see what other processes added within ``refresh`` seconds (the manifest is read again at most that often),
    and this object's own adds at once.
    """

    def __init__(self, location, config: Optional[Config] = None, *, must_exist: bool = False,
                 refresh: float = 0.5, kind: Optional[str] = None, false_positive_rate: Optional[float] = None,
                 **options: Any):
        if config is not None and options:
            raise ConfigError("give either a Config or options, not both")
        if isinstance(location, Index):
            location = location.location
        self.location = os.fspath(location) if not isinstance(location, str) else location
        self.storage: Storage = open_storage(self.location)
        self.display = self.storage.location  # the location as printed: credentials hidden
        manifest = self.storage.read_manifest()
        if manifest is None and must_exist:
            raise StorageError(f"no index at {self.display}")
        self.config, self.store = resolve(self.display, manifest, config, options, kind)
        self.bloom = bloom_tier.settings(self.display, manifest, self.store, false_positive_rate, self.config.bands)
        self._manifest = manifest
        self._readers: Dict[str, SegmentReader] = {}
        self._dead: Dict[str, np.ndarray] = {}  # tombstone name -> the removed documents of its segment
        self._hasher: Optional[MinHasher] = None
        self.refresh = float(refresh)
        self._manifest_read = -1e18  # when the manifest was last read (time.monotonic)
        self._pinned: Optional[dict] = None  # the manifest every lookup reads (:meth:`pin`), or None
        # over every query and match of this object: candidates verified, buckets cut at
        # MAX_BUCKET candidates and the candidates that cut left unverified
        self.counts = {"candidates": 0, "truncated_buckets": 0, "truncated_candidates": 0}

    # ------------------------------------------------------------------ state
    @property
    def params(self) -> dict:
        return params_of(self.config)

    def _refresh(self) -> dict:
        """The committed manifest, read again when the last read is older than ``refresh``
        seconds (other processes may have added; this one's own writes invalidate it at once),
        so that a stream of single queries does not pay a read (a round trip on Redis) each."""
        if self._pinned is not None:
            return self._pinned
        now = time.monotonic()
        if self._manifest is not None and now - self._manifest_read < self.refresh:
            return self._manifest
        self._manifest_read = now
        manifest = self.storage.read_manifest()
        if manifest is None:
            manifest = self.empty_manifest()
        else:
            check_manifest(self.display, manifest, self.config, self.store, self.bloom)
        names = {s["name"] for s in manifest["segments"]}
        for gone in set(self._readers) - names:
            del self._readers[gone]
        tombstones = {dead_name(s) for s in manifest["segments"]}
        for gone in set(self._dead) - tombstones:
            del self._dead[gone]
        self._manifest = manifest
        return manifest

    def snapshot(self) -> dict:
        """The committed manifest as stored now, checked: one state of the index, for :meth:`pin`."""
        return maintenance.committed_manifest(self)

    def pin(self, manifest: dict) -> None:
        """From now on, every lookup reads the state ``manifest`` (a :meth:`snapshot`) and no
        newer one: a reader that opens the index again and again (``dedup --against``, block by
        block) sees one state of it, whatever commits meanwhile. Adds keep a state's segments;
        a compaction or a removal deletes some, and a lookup that needs one is a one-line
        StorageError that says the index changed under the reader."""
        check_manifest(self.display, manifest, self.config, self.store, self.bloom)
        self._pinned = self._manifest = manifest
        self.forget_manifest(segments=True)

    def forget_manifest(self, *, segments: bool = False) -> None:
        """Says that the index has changed (this process added, removed or compacted): the next
        lookup reads the manifest again, however recent the last read. ``segments``: also lets go
        of the segments opened and the tombstones read (some may be gone: a compaction)."""
        self._manifest_read = -1e18
        if segments:
            self._readers.clear()
            self._dead.clear()

    def committed_segments(self) -> List[Tuple[dict, SegmentReader]]:
        """(manifest entry, reader) of each committed segment, oldest first, as of the manifest
        last read (read again when older than ``refresh`` seconds); readers are opened once."""
        manifest = self._refresh()
        out = []
        for entry in manifest["segments"]:
            reader = self._readers.get(entry["name"])
            if reader is None:
                reader = self.storage.open_segment(entry)
                self._readers[entry["name"]] = reader
            out.append((entry, reader))
        return out

    def empty_manifest(self) -> dict:
        """The manifest of this index before its first add: its parameters, no segments."""
        return new_index_manifest(self.config, self.store, self.bloom)

    @property
    def hasher(self) -> MinHasher:
        if self._hasher is None:
            self._hasher = MinHasher.from_config(self.config)
        return self._hasher

    # ------------------------------------------------------------------ hashing
    def hash_texts(self, texts) -> dict:
        """keys (n, b), signatures (n, k), nonempty, and for ``exact`` the fingerprint CSR."""
        cfg = self.config
        # a few texts (a query at ingestion time) on one thread: waking the pool costs more than
        # it saves, and a busy machine makes its tail latency long
        workers = 1 if len(texts) <= SMALL_BATCH else cfg.workers
        with kernel_threads(workers):
            if self.store == "exact":
                # unsorted 32-bit fingerprints sorted once: cheaper than sorting the 64-bit sets
                sigs, off, values = self.hasher.signatures_and_fingerprints(texts)
                fp_off, fp = fingerprints(off, values)
                nonempty = np.diff(fp_off) > 0
            else:
                sigs, counts = self.hasher.signatures_and_counts(texts)
                fp_off = fp = None
                nonempty = counts > 0
            keys = band_keys(sigs, cfg.bands, cfg.rows, cfg.seed)
        return {"keys": keys, "signatures": sigs, "nonempty": nonempty, "fp_offsets": fp_off, "fp": fp}

    # ------------------------------------------------------------------ queries
    def query(self, texts, threshold: Optional[float] = None) -> List[List[Match]]:
        """For each text, every indexed document whose verified similarity is at least the
        threshold (default: the config's), most similar first (ties: older segment, then
        position). An empty text (no shingles) matches nothing."""
        if isinstance(texts, str):
            raise ConfigError("query takes a list of texts; for one text use [text]")
        if self.store == "bloom":
            return self._bloom_query(texts, threshold)
        threshold = self._threshold(threshold)
        h = self.hash_texts(texts)
        n = len(h["nonempty"])

        def run():
            with kernel_threads(1 if n <= SMALL_BATCH else self.config.workers):
                qdoc, seg, cdoc, sim, counts = self._verified(h["keys"], h["signatures"], h["nonempty"],
                                                              h["fp_offsets"], h["fp"], threshold)
            order = np.lexsort((cdoc, seg, -sim, qdoc))
            qdoc, seg, cdoc, sim = qdoc[order], seg[order], cdoc[order], sim[order]
            return qdoc, sim, self._describe(seg, cdoc), counts

        qdoc, sim, (ids, sources), counts = self._once_more_if_compacted(run)
        self._count(counts)
        out: List[List[Match]] = [[] for _ in range(n)]
        for q, i, s, v in zip(qdoc.tolist(), ids, sources, sim.tolist()):
            out[q].append(Match(i, s, v))
        return out

    def match(self, keys: np.ndarray, signatures: Optional[np.ndarray] = None,
              shingles: Optional[Tuple[np.ndarray, np.ndarray]] = None,
              threshold: Optional[float] = None) -> Matches:
        """The best verified match in the index of each document of a batch: the seam for a
        pipeline stage that has already hashed its documents.

        keys: (n, bands) uint64, :func:`neardup.kernels.bands.band_keys` of the documents with this
            index's bands, rows and seed (``index.config``).
        signatures: (n, num_perm) uint32 MinHash signatures; needed by an ``estimate`` index, and
            used to recognise empty documents (all values 0xFFFFFFFF) when ``shingles`` is None.
        shingles: (offsets int64[n+1], hashes uint64) the 64-bit shingle hashes of each document
            as CSR, in any order and with repeats (raw hashes will do, as will sorted unique
            sets), or their fingerprints (uint32 values: the high halves, as
            ``MinHasher.signatures_and_fingerprints`` and the read stage give them); needed by an
            ``exact`` index. A document with none is empty.
        threshold: the similarity a match must reach (default: the config's threshold).

        Returns :class:`Matches`: for each document with at least one indexed document at or
        above the threshold, its position, the best one's id, source and similarity (ties: the
        older segment, then the earlier document). An empty document matches nothing.

        In a dedup run, apply the matches before the chain guard: a matched document is removed
        with the indexed document as its representative and is not available as a representative
        of the run's own documents (as if the indexed documents came first in keep order and
        were all kept). Applied after it, a document removed for a representative that the
        index then removes would lose its representative (``bench/index_ab.py`` counts these).
        """
        cfg = self.config
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        if keys.ndim != 2 or keys.shape[1] != cfg.bands:
            raise ConfigError(f"keys must be (documents, {cfg.bands}) uint64 band keys, got shape {keys.shape}")
        n = keys.shape[0]
        if signatures is not None:
            signatures = np.asarray(signatures, dtype=np.uint32)
            if signatures.shape != (n, cfg.num_perm):
                raise ConfigError(f"signatures must be ({n}, {cfg.num_perm}) uint32, got {signatures.shape}")
        fp_off, fp, nonempty = hashed_documents(n, signatures, shingles, "match")
        if self.store == "bloom":
            return self._bloom_match(keys, nonempty)
        if self.store == "exact" and fp is None:
            raise ConfigError(f"index {self.display} verifies by shingle fingerprints: pass shingles "
                              f"(run with verify='exact')")
        if self.store == "estimate" and signatures is None:
            raise ConfigError(f"index {self.display} verifies by signatures: pass signatures")
        threshold = self._threshold(threshold)

        def run():
            with kernel_threads(1 if n <= SMALL_BATCH else cfg.workers):
                qdoc, seg, cdoc, sim, counts = self._verified(keys, signatures, nonempty, fp_off, fp, threshold)
            order = np.lexsort((cdoc, seg, -sim, qdoc))
            first = np.ones(len(order), dtype=bool)
            first[1:] = qdoc[order][1:] != qdoc[order][:-1]
            best = order[first]
            return qdoc, seg, cdoc, sim, counts, best, self._describe(seg[best], cdoc[best])

        qdoc, seg, cdoc, sim, counts, best, (ids, sources) = self._once_more_if_compacted(run)
        self._count(counts)
        return Matches(doc=qdoc[best], id=pa.array(ids, pa.string()), source=pa.array(sources, pa.string()),
                       similarity=sim[best], candidates=counts["candidates"],
                       truncated=counts["truncated_candidates"], truncated_buckets=counts["truncated_buckets"])

    def _count(self, counts: dict) -> None:
        for k, v in counts.items():
            self.counts[k] += v

    def _bloom_query(self, texts, threshold) -> List[List[Match]]:
        """A Bloom index's answer: [Match("", "bloom:INDEX", None)] for a yes, [] for a no."""
        if threshold is not None:
            raise ConfigError(f"index {self.display} is a bloom index: it answers yes/no without verifying, "
                              f"so a threshold has no effect (its bands and rows decide); leave it out")
        h = self.hash_texts(texts)
        with kernel_threads(1 if len(texts) <= SMALL_BATCH else self.config.workers):
            found = self._once_more_if_compacted(lambda: bloom_tier.lookup(self, h["keys"], h["nonempty"]))
        yes = Match("", bloom_tier.source_name(self.display), None)
        return [[yes] if f else [] for f in found.tolist()]

    def _bloom_match(self, keys: np.ndarray, nonempty: np.ndarray) -> Matches:
        """Every document the filters answer yes for, with an empty id, the source
        ``bloom:INDEX`` and no similarity (nan): nothing is verified, the threshold plays no part."""
        with kernel_threads(1 if len(keys) <= SMALL_BATCH else self.config.workers):
            found = self._once_more_if_compacted(lambda: bloom_tier.lookup(self, keys, nonempty))
        doc = np.flatnonzero(found).astype(np.int64)
        n = len(doc)
        return Matches(doc=doc, id=pa.array([""] * n, pa.string()),
                       source=pa.array([bloom_tier.source_name(self.display)] * n, pa.string()),
                       similarity=np.full(n, np.nan))

    def _once_more_if_compacted(self, run):
        """Runs a lookup; if a segment it read was removed meanwhile (a compaction by another
        process), reads the manifest again and runs it once more."""
        try:
            return run()
        except StorageError:
            if self._pinned is not None:
                self._gone_from_under_pin()
                raise
            before = [(e["name"], dead_name(e)) for e in (self._manifest or {}).get("segments", [])]
            self.forget_manifest(segments=True)
            after = [(e["name"], dead_name(e)) for e in self._refresh()["segments"]]
            if after == before:
                raise
            return run()

    def _gone_from_under_pin(self) -> None:
        """A lookup of a pinned state failed: when segments or tombstones of that state are no
        longer committed (a compaction, a removal), says so in one line."""
        named = {n for e in self._pinned["segments"] for n in (e["name"], dead_name(e)) if n is not None}
        now = self.storage.read_manifest()
        have = {n for e in (now or {}).get("segments", []) for n in (e["name"], dead_name(e)) if n is not None}
        if named - have:
            raise StorageError(f"index {self.display} was compacted, or had documents removed, while this run read "
                               f"it: the state it started with (generation {self._pinned['generation']}) is gone; "
                               f"run again with --overwrite (--resume would read that same state)")

    def candidate_probability(self, threshold: Optional[float] = None) -> float:
        """P(candidate) of a pair at ``threshold`` (default: the config's) with this index's bands
        and rows: 1 - (1 - s^r)^b."""
        from ..config.params import candidate_probability
        return float(candidate_probability(self._threshold(threshold), self.config.bands, self.config.rows))

    def recall_note(self, threshold: Optional[float] = None) -> Optional[str]:
        """One line when this index's bands and rows find a pair at ``threshold`` with a
        probability below the config's ``min_recall`` (a threshold under the one they were
        chosen for): recall against the index falls. None otherwise."""
        p = self.candidate_probability(threshold)
        if p >= self.config.min_recall:
            return None
        cfg = self.config
        return (f"index {self.display} has {cfg.bands} bands x {cfg.rows} rows: a pair at similarity "
                f"{self._threshold(threshold):g} becomes a candidate with probability {p:.3f} only (below "
                f"--min-recall {cfg.min_recall:g}), so recall against it falls at this threshold")

    def truncation_note(self) -> Optional[str]:
        """One line when lookups of this object cut buckets at ``MAX_BUCKET`` candidates."""
        c = self.counts
        if not c["truncated_buckets"]:
            return None
        return (f"index {self.display}: {c['truncated_buckets']:,} band buckets held more than {MAX_BUCKET:,} "
                f"documents a segment; {c['truncated_candidates']:,} candidates in them were not verified "
                f"(a match among them can be missed)")

    def _threshold(self, threshold: Optional[float]) -> float:
        if threshold is None:
            return self.config.threshold
        dataclasses.replace(self.config, threshold=threshold)  # validates
        return float(threshold)

    def _verified(self, keys, signatures, nonempty, fp_off, fp, threshold):
        """(query doc, segment number, doc in segment, similarity) of every verified candidate
        at or above the threshold, and the counts (candidates verified, buckets cut at
        ``MAX_BUCKET``, candidates they left unverified)."""
        n, bands = keys.shape
        qdoc_all = np.repeat(np.arange(n, dtype=np.int64), bands)[np.repeat(nonempty, bands)]
        qkeys = keys[nonempty].ravel()
        order = np.argsort(qkeys, kind="stable")  # ascending, once for every segment (key_ranges)
        qkeys, qdoc_all = qkeys[order], qdoc_all[order]
        out = ([], [], [], [])
        candidates = truncated = truncated_buckets = 0
        if len(qkeys) == 0:
            return tuple(np.zeros(0, dt) for dt in (np.int64, np.int64, np.int64, np.float64)) + (
                dict.fromkeys(("candidates", "truncated_buckets", "truncated_candidates"), 0),)
        for si, (entry, reader) in enumerate(self.committed_segments()):
            sorted_keys = reader.array("keys.u64")
            if len(sorted_keys) == 0:
                continue
            lo, hi = key_ranges(sorted_keys, qkeys)
            hit = hi > lo
            if not hit.any():
                continue
            lo, hi, qd = lo[hit], hi[hit], qdoc_all[hit]
            cut = np.minimum(hi, lo + MAX_BUCKET)
            truncated += int((hi - cut).sum())
            truncated_buckets += int((hi > cut).sum())
            cdoc, lengths = gather_ranges(reader.array("kdoc.u32"), lo, cut)
            qrep = np.repeat(qd, lengths)
            dead = self._removed(entry)
            if dead is not None:  # removed documents are no candidates
                live = ~dead[cdoc]
                qrep, cdoc = qrep[live], cdoc[live]
            codes = unique((qrep.astype(np.uint64) << np.uint64(32)) | cdoc.astype(np.uint64))
            candidates += len(codes)
            for start in range(0, len(codes), VERIFY_CHUNK):
                chunk = codes[start:start + VERIFY_CHUNK]
                q = (chunk >> np.uint64(32)).astype(np.int64)
                c = (chunk & np.uint64(0xFFFFFFFF)).astype(np.int64)
                sim = self._similarity(reader, q, c, signatures, fp_off, fp)
                ok = sim >= threshold
                out[0].append(q[ok])
                out[1].append(np.full(int(ok.sum()), si, dtype=np.int64))
                out[2].append(c[ok])
                out[3].append(sim[ok])
        counts = {"candidates": candidates, "truncated_buckets": truncated_buckets, "truncated_candidates": truncated}
        if not out[0]:
            return tuple(np.zeros(0, dt) for dt in (np.int64, np.int64, np.int64, np.float64)) + (counts,)
        return tuple(np.concatenate(p) for p in out) + (counts,)

    def _removed(self, entry: dict) -> Optional[np.ndarray]:
        """True for the removed documents of a segment (its tombstone, read once); None: none."""
        name = dead_name(entry)
        if name is None:
            return None
        mask = self._dead.get(name)
        if mask is None:
            mask = self._dead[name] = dead_mask(self.storage, entry)
        return mask

    def _similarity(self, reader: SegmentReader, q, c, signatures, fp_off, fp) -> np.ndarray:
        """Similarity of each pair (query document q[i], indexed document c[i]): the query side
        and the indexed side of the chunk's distinct documents side by side in one CSR."""
        uq, qinv = np.unique(q, return_inverse=True)
        ucd, cinv = np.unique(c, return_inverse=True)
        if self.store == "exact":
            qvals, qlen = gather_ranges(fp, fp_off[uq], fp_off[uq + 1])
            fpoff = reader.array("fpoff.i64")
            cvals, clen = reader.ranges("fp.u32", fpoff[ucd], fpoff[ucd + 1])
            offsets = np.zeros(len(uq) + len(ucd) + 1, dtype=np.int64)
            np.cumsum(np.concatenate([qlen, clen]), out=offsets[1:])
            return exact_jaccard(offsets, np.concatenate([qvals, cvals]), qinv, len(uq) + cinv)
        k = self.config.num_perm
        cvals, _ = reader.ranges("sig.u32", ucd * k, ucd * k + k)
        sigs = np.concatenate([signatures[uq], cvals.reshape(-1, k)])
        return estimated_jaccard(sigs, qinv, len(uq) + cinv)

    def _describe(self, seg: np.ndarray, cdoc: np.ndarray) -> Tuple[List[str], List[str]]:
        """Ids and source names of documents given as (segment number, position)."""
        ids: List[Optional[str]] = [None] * len(seg)
        sources: List[Optional[str]] = [None] * len(seg)
        if len(seg) == 0:
            return [], []
        segments = [(entry, self._readers[entry["name"]]) for entry in self._manifest["segments"]]
        for si in np.unique(seg).tolist():
            where = np.flatnonzero(seg == si)
            entry, reader = segments[si]
            d = cdoc[where]
            idoff = reader.array("idoff.i64")
            raw, lengths = reader.ranges("id.bin", idoff[d], idoff[d + 1])
            offs = np.zeros(len(d) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offs[1:])
            names = pa.LargeStringArray.from_buffers(len(d), pa.py_buffer(offs), pa.py_buffer(raw)).to_pylist()
            src = np.asarray(reader.array("src.u32"))[d]
            for w, name, s in zip(where.tolist(), names, src.tolist()):
                ids[w] = name
                sources[w] = entry["sources"][s]
        return ids, sources  # type: ignore[return-value]

    # ------------------------------------------------------------------ writes
    def writer(self) -> "IndexWriter":
        """A writer whose additions become visible together when it closes without error."""
        return IndexWriter(self)

    def add(self, data, ids=None, name: Optional[str] = None, *, text_column: str = "text",
            id_column: Optional[str] = None, on_error: str = "fail") -> dict:
        """Adds documents as they are; all of them become visible at once, or none.

        ``data``: a path, folder or glob (str or ``os.PathLike``) or a list of ``os.PathLike``
        (read like ``neardup dedup`` reads its inputs), a list of str or a pyarrow string array
        (texts), or a table (``pyarrow.Table``, pandas, Hugging Face ``datasets``) with a
        ``text_column``. ``ids``: for texts, their ids, strings or integers (default: their
        positions, "0", "1", ...); files and tables take ids from ``id_column`` (or an ``id``
        field every input has, as ``neardup dedup`` does), else positions that name the file as
        given, ``PATH:LINE`` / ``PATH:ROW`` / a text file's path, or with ``name``
        ``NAME/FILE:LINE`` (a table: ``NAME:ROW``). ``name``: the source name recorded with each
        document (default: its file's name, ``<texts>`` or ``<table>``). An id repeated in the
        add, or that a live document of the index has, is refused (nothing added): see
        :mod:`neardup.index.inputs`. Returns counts (and ``notes``, said to the user).
        """
        self._refuse_own_files(data)
        with self.writer() as w:
            w.add(data, ids=ids, name=name, text_column=text_column, id_column=id_column, on_error=on_error)
        return w.result

    def _refuse_own_files(self, data) -> None:
        """Paths to add that are, hold or lie inside this index are refused before anything is read."""
        if isinstance(data, (str, os.PathLike)):
            data = [data]
        elif not (isinstance(data, (list, tuple)) and data and all(isinstance(d, os.PathLike) for d in data)):
            return  # texts, or a table (as :func:`.inputs.documents` tells them apart)
        from .. import io as nio
        paths = [os.fspath(d) for d in data]
        self.storage.refuse_as_input(paths, [s.path for s in nio.discover(paths)])

    def add_arrays(self, keys: np.ndarray, ids, source, *, signatures: Optional[np.ndarray] = None,
                   shingles: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> dict:
        """Adds already-hashed documents in one commit; see :meth:`IndexWriter.add_arrays`."""
        with self.writer() as w:
            w.add_arrays(keys, ids, source, signatures=signatures, shingles=shingles)
        return w.result

    def remove(self, ids=None, source=None) -> dict:
        """Removes documents: those whose id is one of ``ids`` (every document of the id, whatever
        its source) and every document added under ``source`` (a name, or a list of them; a name
        ending in "/" names every source in that folder; a name the index does not have is a
        :class:`~neardup.errors.ConfigError`). A removed document
        never matches again; the others are untouched. All of them disappear at once, for every
        reader, or none (a killed removal leaves the index as it was): tombstones, see
        :mod:`neardup.index.removal`; :meth:`compact` drops the documents for good. Returns
        counts: ``removed`` (documents removed now), ``ids_given``, ``ids_found`` (ids that name
        a document of the index, removed before or now), ``segments`` (tombstones written).

        A bloom index keeps no ids: it removes whole sources only, by dropping the segments
        (one add's filters each) whose documents all come from them; a segment shared with a
        source not named is refused, and nothing is removed."""
        return removal.remove(self, ids=ids, source=source)

    def compact(self) -> dict:
        """Merges the segments into as few as the size bounds allow (one up to 1M documents),
        keeping the documents' order, so that every query answers exactly as before."""
        return compaction.compact(self)

    # ------------------------------------------------------------------ inspection
    def stats(self, full: bool = True) -> dict:
        """Documents, segments, documents per source, bytes (total, per document, per file),
        parameters. ``full=False``: the number of sources and the largest ones instead of every
        one (a bounded answer, whatever the number of sources)."""
        return maintenance.stats(self, full=full)

    def check_files(self, manifest: dict) -> None:
        """Refuses an index one of whose segment files is missing or of another size than its
        manifest says (cheap: sizes only; see :meth:`verify` for the contents)."""
        maintenance.check_files(self, manifest)

    def verify(self) -> dict:
        """Reads every file of every segment and checks it: present, of the size and CRC-32
        the manifest records, and consistent with the others (offsets, sorted keys, counts).
        Returns ``{"segments", "documents", "bytes", "problems"}``: one line per problem, each
        naming the segment and the file; no problems means the index is sound. A damaged
        manifest is a :class:`~neardup.errors.StorageError` (nothing else can be read)."""
        return maintenance.verify(self)

    def close(self) -> None:
        self._readers.clear()
        self.storage.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self) -> str:
        return f"Index({self.display!r})"
