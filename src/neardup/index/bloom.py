"""The Bloom tier of an index (``--kind bloom``): one Bloom filter per band per segment, yes/no.

An exact index keeps, per document, its band keys, id, source and shingle fingerprints, and
verifies every candidate (about 1.5 KB a document). A Bloom index keeps only, per segment and
band, a Bloom filter of the segment's band keys (as LSHBloom, arXiv 2411.04257, and datasketch's
``MinHashLSHBloom``): a query document is a match ("yes") when, in some segment, one of its b
band keys tests present in that band's filter. No ids are kept: a match names no representative.

What a yes means: the document shares a band key with an indexed document (an LSH candidate,
P = 1 - (1 - s^r)^b at Jaccard s, not verified), or a filter answered yes for a key it was never
given (the *extra* false-positive rate below). So a Bloom index removes what an unverified LSH
would remove, plus that extra.

Sizing. A segment's filter of band j holds the keys of its n non-empty documents; for a rate p
it has m = ceil(n ln(1/p) / (ln 2)^2) bits (rounded up to whole 64-bit words, and grown by
up to a few tenths of a percent where rounding k lost some of the rate) and k = round(m/n ln 2)
hash functions, so that a key never added tests present with probability (1 - e^{-kn/m})^k <= p.
The index-wide extra false-positive rate of a query document (its b keys against the b filters
of each of S segments) is

    F = 1 - prod_{segments s} prod_{bands j} (1 - f_sj^k_s)   <=  b S p   (approximately)

with f_sj the share of bits set in filter (s, j), recorded at each add, so ``index stats``
gives F as built (:func:`index_rate`). The default p = 1e-4 / (b * 100) keeps F below 1e-4
up to 100 segments (100 adds, or 100M documents in adds of 1M): at b = 13, p = 7.7e-8,
m/n = 34.2 bits a band, 13 x 34.2 bits = 55.5 bytes a document.

Bits. Band keys are 64-bit hashes already (:mod:`neardup.kernels.bands`); the k positions of a key are
fmix64(h1 + i*h2) mod m (double hashing, Kirsch and Mitzenmacher, each probe mixed again: the bare
h1 + i*h2 mod m is an arithmetic progression, and a small filter's rate was far above the formula's;
a Bloom index of format 3 had those probes and is refused) with h1, h2 two mixes of the key. The
kernels run over all keys at once: setting bits in parallel over bands (each band its own
filter: no two threads write one word), testing in parallel over documents.

Segment layout: one file, ``bloom.u64``: b filters of m bits, band j in words [j W, (j+1) W),
W = m / 64. The manifest entry records ``bloom``: ``{"bits": m, "hashes": k, "keys": n,
"set": [bits set per band]}``; the manifest records ``bloom``: ``{"false_positive_rate": p}``.
A Bloom index is not compacted: merging two filters needs the keys they were built from.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from ..errors import ConfigError, StorageError
from ..kernels.lookup import bits_set, build_filters, test_filters
from .segments import MAX_SEGMENT_DOCS, SegmentBuilder, new_segment_name

KINDS = ("exact", "bloom")
INDEX_RATE = 1e-4        # the index-wide extra false-positive rate the default keeps below ...
DESIGN_SEGMENTS = 100    # ... up to this many segments
MAX_HASHES = 64
# Bounds (issue 29). A Bloom index whose F is above REFUSE_RATE answers yes for more than one in
# twenty documents with no near-duplicate in it: ``dedup --against`` refuses to remove documents
# by it, an add (``index add``, ``--update-index``) that would take it there commits nothing, and
# a new index is refused a per-filter rate whose one segment is there already. Above INDEX_RATE
# every use and every growth warns. A per-filter rate whose filters take more than
# MAX_FILTER_BYTES a document (a third of what an exact index keeps to verify; the default takes
# 56) is refused: 1e-300 took 9.5 GB for 2,000 documents.
REFUSE_RATE = 0.05
MAX_FILTER_BYTES = 512


def kind_of(store: str) -> str:
    """``bloom`` for a Bloom index, ``exact`` for a verifying one (store exact or estimate)."""
    return "bloom" if store == "bloom" else "exact"


def default_rate(bands: int) -> float:
    """The per-filter rate p of a new Bloom index: F <= b S p stays below INDEX_RATE up to
    DESIGN_SEGMENTS segments."""
    return INDEX_RATE / (bands * DESIGN_SEGMENTS)


def check_rate(rate) -> float:
    try:
        p = float(rate)
    except (TypeError, ValueError):
        raise ConfigError(f"false_positive_rate must be a number between 0 and 1, got {rate!r}") from None
    if not 0.0 < p < 1.0 or math.isnan(p):
        raise ConfigError(f"false_positive_rate must be between 0 and 1 (exclusive), got {rate!r}")
    return p


def bits_per_key(rate: float) -> float:
    """Bits a key of a filter at ``rate`` takes: ln(1/p) / (ln 2)^2 at the best k; past
    MAX_HASHES hash functions, the m/n at which k = MAX_HASHES meets the rate."""
    if math.log2(1.0 / rate) <= MAX_HASHES:
        return math.log(1.0 / rate) / math.log(2.0) ** 2
    return -MAX_HASHES / math.log1p(-rate ** (1.0 / MAX_HASHES))


def filter_bytes(rate: float, bands: int) -> float:
    """Bytes of filters a document takes at ``rate`` (b filters of bits_per_key each)."""
    return bands * bits_per_key(rate) / 8


def rate_bounds(bands: int):
    """(lowest, highest) per-filter rate a new index of ``bands`` bands accepts: the filters of
    a document within MAX_FILTER_BYTES, one segment's F within REFUSE_RATE."""
    lo, hi = -330.0, 0.0  # log10 of the rate: filter_bytes falls as it grows
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if filter_bytes(10.0 ** mid, bands) <= MAX_FILTER_BYTES else (mid, hi)
    return 10.0 ** hi, -math.expm1(math.log1p(-REFUSE_RATE) / bands)


def check_new_rate(rate: float, bands: int) -> float:
    """A new Bloom index's per-filter rate, refused in one line outside :func:`rate_bounds`."""
    low, high = rate_bounds(bands)
    if rate < low:
        size = filter_bytes(rate, bands)
        raise ConfigError(f"false_positive_rate {rate!r} would take {size:,.0f} bytes of filters a document "
                          f"({bands} bands; {size * 1e6 / 2 ** 30:,.1f} GiB for 1M documents), above "
                          f"{MAX_FILTER_BYTES} (an exact index, which verifies, keeps about 1,500): give at least "
                          f"{low:.1e}")
    if rate > high:
        one = -math.expm1(bands * math.log1p(-rate))
        raise ConfigError(f"false_positive_rate {rate!r} gives even one segment of {bands} filters an extra "
                          f"false-positive rate of {one:.3f}, above {REFUSE_RATE:g} (that share of documents with "
                          f"no near-duplicate would be answered yes): give at most {high:.1e}")
    return rate


def rate_note(display: str, manifest: dict) -> Optional[str]:
    """One line when a Bloom index's F (as its manifest records it) is above INDEX_RATE."""
    if manifest.get("store") != "bloom":
        return None
    f = index_rate(manifest)
    if f <= INDEX_RATE:
        return None
    return (f"bloom index {display} has an extra false-positive rate of {f:.2e} (above {INDEX_RATE:g}; "
            f"{len(manifest['segments'])} segment(s) of filters at {manifest['bloom']['false_positive_rate']:.2e}): "
            f"a document with no near-duplicate there is answered yes at that rate")


def refuse_rate(display: str, manifest: dict, doing: str, segments=None) -> None:
    """Refuses ``doing`` when a Bloom index's F (of its manifest, or of ``segments``) is above
    REFUSE_RATE."""
    if manifest.get("store") != "bloom":
        return
    f = index_rate({"segments": manifest["segments"] if segments is None else segments})
    if f > REFUSE_RATE:
        raise ConfigError(f"bloom index {display}: {doing} with an extra false-positive rate of {f:.3f}, above "
                          f"{REFUSE_RATE:g} (that share of documents with no near-duplicate there is answered yes); "
                          f"refused: build a new index with a lower --false-positive-rate")


def geometry(n: int, rate: float):
    """(bits m, hash functions k) of a filter for n keys at false-positive rate ``rate``."""
    n = max(int(n), 1)
    m = math.ceil(n * math.log(1.0 / rate) / math.log(2.0) ** 2)
    m = max(64, -(-m // 64) * 64)
    while True:  # k is a whole number: a few more bits where rounding it lost some of the rate
        k = int(min(MAX_HASHES, max(1, round(m / n * math.log(2.0)))))
        if filter_rate(m, k, n) <= rate:
            return m, k
        m += max(64, m // 4096 // 64 * 64)


def filter_rate(bits: int, hashes: int, n: int) -> float:
    """The expected false-positive rate of a filter of ``bits`` bits, ``hashes`` hash functions
    and n keys: (1 - e^{-kn/m})^k."""
    return (1.0 - math.exp(-hashes * n / bits)) ** hashes


def index_rate(manifest: dict) -> float:
    """F: the probability that a query document with no near-duplicate in the index is answered
    yes, from the bits set in every filter (1 - prod (1 - f^k))."""
    log_keep = 0.0
    for entry in manifest["segments"]:
        b = entry["bloom"]
        for s in b["set"]:
            p = (s / b["bits"]) ** b["hashes"]
            if p >= 1.0:
                return 1.0
            log_keep += math.log1p(-p)
    return -math.expm1(log_keep)


def settings(location: str, manifest: Optional[dict], store: str, rate, bands: int) -> Optional[dict]:
    """The ``bloom`` settings of the index (None for an exact one), after checking ``rate``
    (the false_positive_rate given, or None) against it."""
    if store != "bloom":
        if rate is not None:
            raise ConfigError(f"false_positive_rate is for a Bloom index (--kind bloom); index {location} is "
                              f"{'an exact' if manifest is not None else 'to be an exact'} index")
        return None
    if manifest is None:
        return {"false_positive_rate": default_rate(bands) if rate is None else check_new_rate(check_rate(rate), bands)}
    have = manifest["bloom"]
    if rate is not None and check_rate(rate) != have["false_positive_rate"]:
        raise ConfigError(f"index {location} was built with false_positive_rate {have['false_positive_rate']!r} "
                          f"(this run: {float(rate)!r}); leave it out, or use another index")
    return have


def segment_words(entry: dict, reader, bands: int, where: str) -> np.ndarray:
    """The (b, W) filters of a committed segment, as stored (memory-mapped on a folder)."""
    words = np.asarray(reader.array("bloom.u64"))
    w = entry["bloom"]["bits"] // 64
    if len(words) != bands * w:
        raise StorageError(f"corrupt index {where}: segment {entry['name']} file bloom.u64 has {len(words)} words, "
                           f"{bands} filters of {entry['bloom']['bits']} bits need {bands * w}")
    return words.reshape(bands, w)


def lookup(index, keys: np.ndarray, nonempty: np.ndarray) -> np.ndarray:
    """bool[n]: documents some segment's filters answer yes for (empty documents: never)."""
    found = np.zeros(len(keys), dtype=np.bool_)
    bands = index.config.bands
    for entry, reader in index.committed_segments():
        b = entry["bloom"]
        test_filters(keys, nonempty, segment_words(entry, reader, bands, index.display), b["bits"], b["hashes"],
                     found)
    return found


def source_name(display: str) -> str:
    """What a Bloom match gives as its source (it keeps none): the index it came from."""
    return f"bloom:{display}"


# --------------------------------------------------------------------------- writing

@dataclass
class BloomBuilder(SegmentBuilder):
    """Collects the band keys of a batch of documents and lays them out as one Bloom segment
    (source names and counts as an exact segment's; ids and verification data are not kept)."""

    rate: float = 0.0

    def append(self, keys, nonempty, ids, source, fp_offsets=None, fp_values=None, signatures=None) -> None:
        nonempty = np.asarray(nonempty, dtype=bool)
        self.keys.append(np.asarray(keys, dtype=np.uint64)[nonempty])
        self.src.append(np.asarray(source, dtype=np.uint32))
        self.docs += len(nonempty)
        self.nbytes += int(nonempty.sum()) * 8 * self.bands

    def full(self) -> bool:
        return self.docs >= MAX_SEGMENT_DOCS

    def write(self, storage) -> dict:
        """Builds the filters, stores the segment and returns its manifest entry."""
        keys = np.concatenate(self.keys) if self.keys else np.zeros((0, self.bands), np.uint64)
        bits, hashes = geometry(len(keys), self.rate)
        words = build_filters(keys, bits, hashes)
        src = np.concatenate(self.src) if self.src else np.zeros(0, np.uint32)
        counts = np.bincount(src.astype(np.int64), minlength=len(self.sources))
        name = new_segment_name()
        files = storage.write_segment(name, {"bloom.u64": words.ravel()})
        return {"name": name, "docs": int(self.docs), "sources": list(self.sources),
                "source_docs": [int(c) for c in counts], "files": files,
                "bloom": {"bits": bits, "hashes": hashes, "keys": int(len(keys)),
                          "set": [int(c) for c in bits_set(words)]},
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def structure_problems(entry: dict, arrays: Dict[str, np.ndarray], bands: int) -> List[str]:
    """What contradicts the layout in a Bloom segment whose file matches its checksum."""
    name = entry.get("name")
    b = entry.get("bloom")
    if not isinstance(b, dict) or not all(isinstance(b.get(f), int) for f in ("bits", "hashes", "keys")) \
            or not isinstance(b.get("set"), list) or b["bits"] % 64 or b["bits"] <= 0:
        return [f"segment {name}: its manifest entry lacks the filters' geometry"]
    if "bloom.u64" not in arrays:
        return [f"segment {name} file bloom.u64: the manifest lists no such file (a bloom index keeps it)"]
    words = arrays["bloom.u64"]
    if len(words) != bands * (b["bits"] // 64):
        return [f"segment {name} file bloom.u64: {len(words)} words, {bands} filters of {b['bits']} bits "
                f"need {bands * (b['bits'] // 64)}"]
    got = bits_set(np.asarray(words).reshape(bands, -1)).tolist()
    if got != b["set"]:
        return [f"segment {name} file bloom.u64: bits set per band {got}, the manifest says {b['set']}"]
    return []
