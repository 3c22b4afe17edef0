"""What one immutable segment of an index holds, and how a batch of documents becomes one.

A segment is a handful of flat little-endian arrays (one file each in a folder index, one
string each in Redis), indexed by the document's position ``d`` in the segment:

=============  ========  =================================================================
file           dtype     content
=============  ========  =================================================================
``keys.u64``   uint64    the band keys of every non-empty document, sorted (b per document)
``kdoc.u32``   uint32    ``kdoc[i]``: the document whose band has key ``keys[i]``
``fpoff.i64``  int64     n + 1 offsets into ``fp.u32`` (store ``exact``)
``fp.u32``     uint32    shingle fingerprints: the high 32 bits of each 64-bit shingle hash,
                         sorted and unique per document (store ``exact``)
``sig.u32``    uint32    n x k MinHash signatures (store ``estimate``)
``idoff.i64``  int64     n + 1 offsets into ``id.bin``
``id.bin``     bytes     the documents' ids, UTF-8, concatenated
``src.u32``    uint32    index of each document's source name in the segment's ``sources``
``fp.crc``     uint32    the CRC-32 of each 4 KiB block of ``fp.u32`` (store ``exact``)
``sig.crc``    uint32    the CRC-32 of each 4 KiB block of ``sig.u32`` (store ``estimate``)
=============  ========  =================================================================

Every file has its CRC-32 in the manifest, checked in full when a process first uses the file.
The fingerprints (or signatures) are nine tenths of an index and a query reads a few documents'
worth of them, so those are checked block by block instead: a query checks the 4 KiB blocks it
reads, once per process, against the sibling ``.crc`` file (itself checked in full, 0.3% of the
data). Without it, the first ``dedup --against`` of a 10M-document index read all 13 GB of its
fingerprints to check them (70 s, 3.2 GB resident).

Band keys carry their band index (see :mod:`neardup.kernels.bands`), so one sorted array serves every
band: a lookup is one ``searchsorted`` over it. Why 32-bit fingerprints: the Jaccard of the
32-bit fingerprint sets differs from the Jaccard of the 64-bit shingle sets only when two
distinct shingles of a pair share their low 32 bits (probability about |A|·|B| / 2^32, 2.5e-5
for two 330-shingle documents), at half the bytes; ``bench/index.py`` measures the difference.
The high half is taken because a sorted set of 64-bit hashes has its high halves in order
already, so fingerprints are made without a second sort.
"""

from __future__ import annotations

import uuid
import time
import zlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import pyarrow as pa

from ..kernels.lookup import fingerprints
from ..io.storage.fs import redact
from ..kernels.minhash import EMPTY_VALUE

FILE_DTYPES = {
    "keys.u64": np.uint64,
    "kdoc.u32": np.uint32,
    "fpoff.i64": np.int64,
    "fp.u32": np.uint32,
    "sig.u32": np.uint32,
    "idoff.i64": np.int64,
    "id.bin": np.uint8,
    "src.u32": np.uint32,
    "dead.u32": np.uint32,  # a tombstone's: the positions of a segment's removed documents (see .removal)
    "bloom.u64": np.uint64,  # store ``bloom``: b Bloom filters (:mod:`.bloom`)
    "fp.crc": np.uint32,
    "sig.crc": np.uint32,
}
BLOCK_BYTES = 4096
BLOCK_SUMS = {"fp.u32": "fp.crc", "sig.u32": "sig.crc"}  # a file checked by blocks: its blocks' CRC-32s
STORES = ("exact", "estimate", "bloom")
COMMON_FILES = ("keys.u64", "kdoc.u32", "idoff.i64", "id.bin", "src.u32")
STORE_FILES = {"exact": COMMON_FILES + ("fpoff.i64", "fp.u32", "fp.crc"), "estimate": COMMON_FILES + ("sig.u32", "sig.crc"),
               "bloom": ("bloom.u64",)}

# A segment is closed when it reaches either bound (a Redis string holds at most 512 MiB).
MAX_SEGMENT_DOCS = 1_000_000
MAX_SEGMENT_BYTES = 256 << 20


def new_segment_name() -> str:
    """Unique across writers and machines; sorts by creation time."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"


def is_empty_signature(signatures: np.ndarray) -> np.ndarray:
    """True for documents without shingles (the all-ones signature of :mod:`neardup.kernels.minhash`)."""
    return np.all(np.asarray(signatures) == EMPTY_VALUE, axis=1)


def hashed_documents(n: int, signatures, shingles, what: str):
    """What an index needs of n hashed documents: ``(fingerprint offsets, fingerprints, nonempty)``
    from their shingle hashes (CSR ``(offsets int64[n+1], uint64 hashes)`` or uint32
    fingerprints, any order, repeats allowed), or ``(None, None, nonempty)`` from their signatures alone. ``what`` names the caller
    in the message when neither is given."""
    from ..errors import ConfigError
    if shingles is not None:
        off, hashes = shingles
        off = np.asarray(off, dtype=np.int64)
        if len(off) != n + 1:
            raise ConfigError(f"shingle offsets must have {n + 1} entries, got {len(off)}")
        fp_off, fp = fingerprints(off - off[0], np.asarray(hashes)[off[0]:off[-1]])
        return fp_off, fp, np.diff(fp_off) > 0
    if signatures is not None:
        return None, None, ~is_empty_signature(signatures)
    raise ConfigError(f"{what} needs the shingle hashes (an exact index) or the signatures (an estimate index)")


def checksum(data) -> int:
    return zlib.crc32(memoryview(np.ascontiguousarray(data)).cast("B")) & 0xFFFFFFFF


def _block_crcs(view: memoryview) -> np.ndarray:
    n = -(-len(view) // BLOCK_BYTES)
    return np.fromiter((zlib.crc32(view[i * BLOCK_BYTES:(i + 1) * BLOCK_BYTES]) for i in range(n)),
                       dtype=np.uint32, count=n)


def block_sums(data) -> np.ndarray:
    """The CRC-32 of each ``BLOCK_BYTES`` block of an array's bytes (the last one may be shorter)."""
    return _block_crcs(memoryview(np.ascontiguousarray(data)).cast("B"))


def with_block_sums(pairs):
    """(file, chunk) pairs of a segment being written, with the block sums of the files checked by
    blocks added at the end (computed here from the data as it passes, never taken from a caller)."""
    carry: Dict[str, bytes] = {}
    sums: Dict[str, List[np.ndarray]] = {}
    owned = set(BLOCK_SUMS.values())
    for file, data in pairs:
        if file in owned:
            raise RuntimeError(f"internal error: {file} is written from its data file, not given")
        if file in BLOCK_SUMS:
            view = memoryview(np.ascontiguousarray(data)).cast("B")
            head = carry.get(file, b"")
            cut = min(len(view), (BLOCK_BYTES - len(head)) % BLOCK_BYTES) if head else 0
            done = sums.setdefault(file, [])
            if head:
                head += bytes(view[:cut])
                if len(head) == BLOCK_BYTES:
                    done.append(_block_crcs(memoryview(head)))
                    head = b""
            rest = view[cut:]
            whole = len(rest) - len(rest) % BLOCK_BYTES
            if whole:
                done.append(_block_crcs(rest[:whole]))
            carry[file] = head + bytes(rest[whole:])
        yield file, data
    for file, done in sums.items():
        if carry.get(file):
            done.append(_block_crcs(memoryview(carry[file])))
        yield BLOCK_SUMS[file], np.concatenate(done) if done else np.zeros(0, np.uint32)


def structure_problems(entry: dict, arrays: Dict[str, np.ndarray], store: str, bands: int,
                       num_perm: int) -> List[str]:
    """What contradicts the layout in one segment whose files match their checksums (what a bug,
    not the disk, would write): one line per problem, naming the file; empty when consistent."""
    out: List[str] = []
    n = entry.get("docs")
    sources = entry.get("sources") or []

    def bad(file: str, what: str) -> None:
        out.append(f"segment {entry.get('name')} file {file}: {what}")

    missing = [f for f in STORE_FILES[store] if f not in arrays]
    for f in missing:
        bad(f, f"the manifest lists no such file (a {store} index keeps it)")
    if missing or not isinstance(n, int):
        return out
    keys, kdoc, src = arrays["keys.u64"], arrays["kdoc.u32"], arrays["src.u32"]
    ids = arrays["id.bin"]
    if len(src) != n:
        bad("src.u32", f"{len(src)} documents, the manifest says {n}")
    elif len(src) and int(src.max()) >= len(sources):
        bad("src.u32", f"source number {int(src.max())}, the segment has {len(sources)} sources")
    elif np.bincount(src.astype(np.int64), minlength=len(sources)).tolist() != list(entry.get("source_docs", [])):
        bad("src.u32", "its documents per source differ from the manifest's")
    if len(keys) != len(kdoc) or len(keys) % max(bands, 1):
        bad("keys.u64", f"{len(keys)} keys and {len(kdoc)} documents for {bands} bands")
    else:
        if len(keys) > 1 and bool(np.any(keys[1:] < keys[:-1])):
            bad("keys.u64", "the keys are not sorted")
        if len(kdoc) and int(kdoc.max()) >= n:
            bad("kdoc.u32", f"document {int(kdoc.max())} of {n}")

    def offsets(file: str, values: str, total: int) -> None:
        off = arrays[file]
        if len(off) != n + 1 or (len(off) and (off[0] != 0 or off[-1] != total)) or bool(np.any(np.diff(off) < 0)):
            bad(file, f"not {n + 1} ascending offsets from 0 to the {total} values of {values}")

    offsets("idoff.i64", "id.bin", len(ids))
    for data, sums in BLOCK_SUMS.items():
        if data in arrays and sums in arrays and not np.array_equal(block_sums(arrays[data]), arrays[sums]):
            bad(sums, f"its block checksums differ from {data}'s blocks")
    if store == "exact":
        offsets("fpoff.i64", "fp.u32", len(arrays["fp.u32"]))
    elif len(arrays["sig.u32"]) != n * num_perm:
        bad("sig.u32", f"{len(arrays['sig.u32'])} values for {n} documents of {num_perm}")
    return out


@dataclass
class SegmentBuilder:
    """Collects batches of documents (already hashed) and lays them out as one segment."""

    store: str
    bands: int
    num_perm: int
    keys: List[np.ndarray] = field(default_factory=list)
    nonempty: List[np.ndarray] = field(default_factory=list)
    fp_counts: List[np.ndarray] = field(default_factory=list)
    fp_values: List[np.ndarray] = field(default_factory=list)
    sigs: List[np.ndarray] = field(default_factory=list)
    ids: List[pa.Array] = field(default_factory=list)
    src: List[np.ndarray] = field(default_factory=list)
    sources: List[str] = field(default_factory=list)
    docs: int = 0
    nbytes: int = 0
    _source_of: Dict[str, int] = field(default_factory=dict)

    def source_index(self, name: str) -> int:
        """The number of a source name in this segment; a name is stored with the credentials
        of any URL in it hidden (``redact``)."""
        i = self._source_of.get(name)
        if i is None:
            shown = redact(name)
            if shown not in self.sources:
                self.sources.append(shown)
            i = self._source_of[name] = self.sources.index(shown)
        return i

    def append(self, keys: np.ndarray, nonempty: np.ndarray, ids: pa.Array, source: np.ndarray,
               fp_offsets: Optional[np.ndarray] = None, fp_values: Optional[np.ndarray] = None,
               signatures: Optional[np.ndarray] = None) -> None:
        m = len(nonempty)
        self.keys.append(np.asarray(keys, dtype=np.uint64)[nonempty])
        self.nonempty.append(np.asarray(nonempty, dtype=bool))
        self.ids.append(ids)
        self.src.append(np.asarray(source, dtype=np.uint32))
        if self.store == "exact":
            self.fp_counts.append(np.diff(fp_offsets))
            self.fp_values.append(fp_values)
            self.nbytes += fp_values.nbytes
        else:
            self.sigs.append(np.ascontiguousarray(signatures, dtype=np.uint32))
            self.nbytes += 4 * self.num_perm * m
        self.nbytes += m * (12 * self.bands + 20) + ids.nbytes
        self.docs += m

    def full(self) -> bool:
        return self.docs >= MAX_SEGMENT_DOCS or self.nbytes >= MAX_SEGMENT_BYTES

    def build(self) -> Dict[str, np.ndarray]:
        """The segment's arrays, by file name."""
        nonempty = np.concatenate(self.nonempty) if self.nonempty else np.zeros(0, bool)
        doc = np.flatnonzero(nonempty).astype(np.uint32)
        keys = (np.concatenate(self.keys) if self.keys else np.zeros((0, self.bands), np.uint64)).ravel()
        kdoc = np.repeat(doc, self.bands)
        order = np.argsort(keys, kind="stable")
        ids = pa.concat_arrays([a.cast(pa.large_string()) for a in self.ids]) if self.ids else \
            pa.nulls(0, pa.large_string())
        n = len(ids)
        idoff, id_bin = string_buffers(ids)
        out = {
            "keys.u64": keys[order],
            "kdoc.u32": kdoc[order],
            "idoff.i64": idoff,
            "id.bin": id_bin,
            "src.u32": np.concatenate(self.src) if self.src else np.zeros(0, np.uint32),
        }
        if self.store == "exact":
            counts = np.concatenate(self.fp_counts) if self.fp_counts else np.zeros(0, np.int64)
            off = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(counts, out=off[1:])
            out["fpoff.i64"] = off
            out["fp.u32"] = np.concatenate(self.fp_values) if self.fp_values else np.zeros(0, np.uint32)
        else:
            out["sig.u32"] = (np.concatenate(self.sigs) if self.sigs
                              else np.zeros((0, self.num_perm), np.uint32)).ravel()
        return out


def string_buffers(arr: pa.Array):
    """(offsets int64[n+1] from 0, UTF-8 bytes) of a string array without nulls."""
    arr = arr.cast(pa.large_string())
    if arr.null_count:
        raise ValueError("ids must not be null")
    _, offsets, data = arr.buffers()
    off = np.frombuffer(offsets, dtype=np.int64, count=arr.offset + len(arr) + 1)[arr.offset:]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return off - off[0], raw[off[0]:off[-1]]
