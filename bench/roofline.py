"""Where the time goes: each stage of ``neardup dedup`` against its floor on this machine.

    .venv/bin/python bench/roofline.py                                  # 100k and 1M, 3 runs each
    .venv/bin/python bench/roofline.py --docs 100k --repeat 5
    .venv/bin/python bench/roofline.py --docs 1M --src /work/wt-base/src,src --output roofline_ab.json
    .venv/bin/python bench/roofline.py --docs 10M --repeat 1            # needs bench/scale.py's shards

Measured: ``python -m neardup dedup CORPUS --output OUT --work-dir WORK --quiet`` as a subprocess
(``common.run_measured``: wall, CPU user+sys, peak memory), ``--repeat`` times per source tree after
an untimed warm-up run of the whole corpus (numba's cache filled, the input in the page cache);
the stage seconds come from the output's stats.json (``seconds``), start-up is the wall time
minus the stages. With several ``--src`` trees the runs alternate tree by tree within each
repeat, so that a load that comes and goes is spread over all of them. Best and median are kept.

Floors, measured by this script in the same run, on the same corpus (each the best of
``--floor-repeat`` tries; the kernels are this checkout's, whatever ``--src`` says, so that
trees compared in one run share their floors):

- read: max(kernel, input). kernel = the corpus's text bytes / the rate of neardup's fused
  tokenise + shingle-hash + MinHash kernel (``MinHasher.signatures_and_codes``, the call the
  read stage makes: signatures and the Elias-Fano coded fingerprints the work dir keeps; a tree
  without it, ``signatures_and_fingerprints``; the call timed is recorded), all cores, batches of ``batch_size`` documents) on texts already in memory as a
  pyarrow large_string array: the first ``--kernel-docs`` documents of the corpus (all of them at
  100k; the rate is extrapolated to the rest by text bytes). input = the input's bytes at the
  page-cache read bandwidth (the files read with 64 MiB ``readinto`` calls, after a first read),
  plus, for zstd inputs, their decompression (shard 0 decompressed, scaled by bytes, divided by the
  cores). Parsing JSON, band keys and writing the work dir are not in the floor.
- pairs: sort + verify. sort = ``bands`` × documents uniformly random uint64 keys (band keys are
  hashes) sorted band by band, the bands spread over the cores (numba LSD radix sort, 11-bit digits,
  the counts of all digits from one pass over the keys, or ``np.sort`` per band when that was
  faster: the faster one is used and named); verify =
  ``exact_jaccard_raw`` (Jaccard of raw 32-bit fingerprints: a lower bound of the pair stage's ``exact_jaccard_coded``, which also decodes the Elias-Fano codes) over as many random pairs of
  documents as the run had candidate pairs, on the kernel's fingerprints of the first 50k
  documents; plus its input, what the stage cannot do without reading: the band keys of the
  eligible documents (bands x 8 bytes each) and the Elias-Fano codes of the candidate documents
  (every document sharing a band key with another; their code bytes by their fingerprint counts),
  both from the last run's work dir, at the cheaper of the two ways to get page-cache bytes into
  a process, each measured here on the work dir's read/ files (the last run's, just written):
  ``read()`` into a reused 64 MiB buffer (a copy), or a memory map with every page touched once
  (the page faults, no copy). An ideal reader pays the cheaper one and no more (the run's own
  kernels then read the bytes, as the sort and verify floors read theirs from memory); the
  allocation of buffers, a gather of the keys into columns and any second pass are not in it.
  (The floor before, sort + verify alone, is kept beside as ``compute_seconds``.) The pairs floor
  is measured in samples spread over the run, one after each round of timed runs (each the best
  of ``--floor-repeat`` tries of each part), so that it meets the load the stage met: its figure
  is the best of each part over every sample, summed (the most demanding), the samples' totals
  (best, median, worst, spread) beside (``samples``).
- clusters: what the stage must do at the machine's pace: its input, the work dir's pairs/ files,
  read at the page-cache read bandwidth; the member set made (a mark per document, the pairs
  renumbered into it by each member's position written at its index) and ``select_representatives`` run over it (the union-find and the chain
  guard, compiled and warm) on the run's own verified pairs; its output, the work dir's
  clusters/ files (bytes of the run's last repeat), written at the page-cache write bandwidth;
  and the members' ids: every page of the read stage's ``id`` column of each block holding a
  member, at the cheaper of page faults through fresh memory maps and ``pread``, both measured
  here on those bytes (their sources and rows come from the blocks' summaries: not in it; the
  gather's opens and takes are not in it either). Measured in samples as the pairs floor is (one
  after each round of timed runs: the stage's figure is the best of ``--repeat`` runs, the
  floor's the best of each part over ``--repeat`` samples of ``--floor-repeat`` tries, taken
  under the load the runs met), the samples' totals and selections beside (``samples``), so
  that a noisy floor shows its spread. (A bare union-find
  over the pairs, the floor before, is kept beside as ``union_find``: it leaves out the chain
  guard, the input and the output the stage cannot do without.)
- write: the output's bytes once through memory (``np.copyto`` bandwidth, 256 MiB buffers) plus
  once written into the page cache (a buffer of min(output bytes, 256 MiB) written in one call,
  again until the output's bytes are written, into ``--scratch``, no fsync).
- start-up: bare ``python -c pass``; beside it ``python -c "import neardup"`` and a whole
  ``neardup dedup`` of 10 documents (imports plus loading the cached kernels), each the best of 3.

Bytes per stage: read in = the input files (their text bytes beside), out = the work dir's
read/ folder; pairs in = read/, out = pairs/; clusters in = pairs/, out = clusters/; write in =
the input + clusters/, out = the output folder (kept/ beside).

``--docs 10M`` (``N M`` with N > 1) runs on bench/scale.py's zstd shards (``--scale-data``, default
``bench/data/scale_10m``; make them with ``bench/scale.py --generate-only``), shard 0 being the 1M
corpus letter for letter. Writes ``bench/results/roofline.json`` (``--output``, a name is taken
under bench/results/) and prints a markdown table per size and tree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (disk_read_note, git_state, tree_bytes, DATA_DIR, REPO_DIR, RESULTS_DIR, WARMUP_ENV, ensure_corpus, run_header,  # noqa: E402
                    run_measured, write_json)

STAGES = ("read", "pairs", "clusters", "write")
SHARD_DOCS = 1_000_000
VERIFY_DOCS = 50_000
MIB = 1 << 20


def parse_docs(text: str) -> int:
    t = text.strip().lower().replace("_", "")
    mult = 1
    if t.endswith("k"):
        t, mult = t[:-1], 1000
    elif t.endswith("m"):
        t, mult = t[:-1], 1_000_000
    return int(float(t) * mult)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else (f"{n // 1000}k" if n % 1000 == 0 else str(n))


def best_of(fn, repeat: int) -> float:
    return timed(fn, repeat)[0]


def timed(fn, repeat: int):
    """(best wall seconds, mean CPU seconds of this process, all its threads) of ``repeat`` calls."""
    best = float("inf")
    cpu0 = time.process_time()
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best, (time.process_time() - cpu0) / repeat


# --------------------------------------------------------------------------- the corpus

def corpus_of(n: int, scale_data: Path, log) -> dict:
    """Input files and facts of the n-document corpus: bench/data/synth_N_s0.jsonl, or for
    n a multiple of 1M above 1M, the first n/1M of bench/scale.py's zstd shards."""
    if n > SHARD_DOCS and n % SHARD_DOCS == 0:
        from scale import corpus_facts, shard_name
        k = n // SHARD_DOCS
        shards = [scale_data / shard_name(i) for i in range(k)]
        missing = [str(p) for p in shards if not p.exists()]
        if missing:
            raise SystemExit(f"missing shards {', '.join(missing)}: make them with "
                             f"`.venv/bin/python bench/scale.py --generate-only` (or give --scale-data)")
        facts = corpus_facts(scale_data, k)
        source = ensure_corpus(SHARD_DOCS, 0, log=log)  # shard k has the source's text bytes
        return {"files": [str(p) for p in shards], "docs": n, "bytes": facts["bytes"],
                "uncompressed_bytes": facts["uncompressed_bytes"], "text_bytes": source["text_bytes"] * k,
                "zstd": True}
    c = ensure_corpus(n, 0, log=log)
    return {"files": [c["path"]], "docs": n, "bytes": c["bytes"], "uncompressed_bytes": c["bytes"],
            "text_bytes": c["text_bytes"], "zstd": False}


def _lines(path: str):
    if path.endswith(".zst"):
        import io
        import zstandard
        with open(path, "rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
            yield from io.BufferedReader(r, 1 << 20)
    else:
        with open(path, "rb") as f:
            yield from f


def head_texts(files: List[str], limit: int) -> List[str]:
    texts: List[str] = []
    for path in files:
        for line in _lines(path):
            if line.strip():
                texts.append(json.loads(line)["text"])
                if len(texts) >= limit:
                    return texts
    return texts


# --------------------------------------------------------------------------- floors

@nb.njit(cache=True)
def _radix_sort(keys, tmp):
    """LSD radix sort of uint64 keys in place (11-bit digits; ``tmp`` as long as ``keys``): the
    counts of all six digits from one pass over the keys (they do not change from pass to pass),
    then a scatter pass per digit that is not the same in every key."""
    n = keys.shape[0]
    count = np.zeros((6, 2048), np.int64)
    for i in range(n):
        k = keys[i]
        for d in range(6):
            count[d, (k >> np.uint64(11 * d)) & np.uint64(2047)] += 1
    src, dst = keys, tmp
    swapped = False
    for d in range(6):
        c = count[d]
        if c.max() == n:  # every key has this digit: nothing to move
            continue
        total = 0
        for v in range(2048):
            x = c[v]
            c[v] = total
            total += x
        s = np.uint64(11 * d)
        for i in range(n):
            v = (src[i] >> s) & np.uint64(2047)
            dst[c[v]] = src[i]
            c[v] += 1
        src, dst = dst, src
        swapped = not swapped
    if swapped:
        keys[:] = src


@nb.njit(parallel=True, cache=True)
def _radix_bands(keys, tmp):
    for band in nb.prange(keys.shape[0]):
        _radix_sort(keys[band], tmp[band])


@nb.njit(parallel=True, cache=True)
def _npsort_bands(keys):
    for band in nb.prange(keys.shape[0]):
        keys[band] = np.sort(keys[band])


def hasher_of(params: dict):
    from neardup.kernels.minhash import MinHasher
    return MinHasher(int(params["num_perm"]), ngram=int(params["ngram"]), seed=int(params["seed"]),
                     hash_version=int(params["hash_version"]), punctuation=params["punctuation"])


def kernel_floor(texts: List[str], params: dict, batch: int, repeat: int) -> dict:
    """Rate of the read stage's kernel call on texts in memory."""
    import pyarrow as pa
    from neardup.kernels.minhash import Scratch

    hasher = hasher_of(params)
    arr = pa.array(texts, type=pa.large_string())
    nbytes = int(np.diff(np.frombuffer(arr.buffers()[1], np.int64, len(arr) + 1, arr.offset * 8)[[0, -1]])[0])
    chunks = [arr.slice(i, batch) for i in range(0, len(arr), batch)]
    scratch = Scratch()
    call = getattr(hasher, "signatures_and_codes", hasher.signatures_and_fingerprints)
    call(chunks[0][:100], scratch=scratch)  # compile / load the kernel

    def run():
        for c in chunks:
            call(c, scratch=scratch)

    best, cpu = timed(run, repeat)
    # cpu_seconds_mean / threads: the wall time on idle cores (a busy machine's floor is its wall best)
    return {"call": call.__name__, "docs": len(texts), "text_bytes": nbytes, "seconds": best, "cpu_seconds_mean": cpu,
            "bytes_per_s": nbytes / best, "threads": nb.get_num_threads()}


def verify_fingerprints(files: List[str], params: dict):
    """The kernel's fingerprints of the corpus's first VERIFY_DOCS documents, one CSR (offsets,
    uint32): the verification floor's documents."""
    import pyarrow as pa
    _, offsets, fp = hasher_of(params).signatures_and_fingerprints(
        pa.array(head_texts(files, VERIFY_DOCS), type=pa.large_string()))
    return offsets, fp


class PairsFloor:
    """The pair stage's floor (see the module): sort + verify + input, measured in samples spread
    over the run (one after each round of timed runs, so that the floor and the stage meet the
    same load), each sample the best of ``repeat`` tries of each part. :meth:`result`: the best
    of each part over every sample, summed (the most demanding figure: never more than the best
    sample's total), and the spread of the samples' totals."""

    def __init__(self, bands: int, n: int, fp_csr, repeat: int):
        from neardup.kernels.verify import exact_jaccard_raw
        self.verify_kernel = exact_jaccard_raw
        small = np.random.default_rng(0).integers(0, 2**63, size=(2, 1000), dtype=np.uint64)
        _radix_bands(small.copy(), np.empty_like(small))  # compile (or load) before timing
        _npsort_bands(small.copy())
        self.bands, self.n = bands, n
        self.offsets, self.fp = fp_csr
        self.input_bytes = None  # the work dir's, found at the first sample (the runs' work dirs hold the same bytes)
        self.samples: List[dict] = []
        self.repeat = repeat

    def sort(self, repeat: int) -> dict:
        # the keys made for each sample (not held while the stage runs: 4.3 GB at 10M), the same each time
        keys = np.random.default_rng(0).integers(0, 2**64 - 1, size=(self.bands, self.n), dtype=np.uint64,
                                                 endpoint=True)
        tmp, work = np.empty_like(keys), np.empty_like(keys)
        times, cpus = {}, {}
        for name, fn in (("numba LSD radix", lambda: _radix_bands(work, tmp)), ("np.sort", lambda: _npsort_bands(work))):
            best, cpu = float("inf"), 0.0
            for _ in range(repeat):
                work[:] = keys
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                best = min(best, time.perf_counter() - t0)
                cpu += (time.process_time() - c0) / repeat
            assert bool(np.all(work[:, 1:] >= work[:, :-1])), name
            times[name], cpus[name] = best, cpu
        used = min(times, key=times.get)
        return {"keys": self.bands * self.n, "bands": self.bands, "per_band": self.n, "seconds_by_method": times,
                "cpu_seconds_mean_by_method": cpus, "method": used, "seconds": times[used],
                "cpu_seconds_mean": cpus[used]}

    def verify(self, pairs: int, repeat: int) -> dict:
        m = len(self.offsets) - 1
        rng = np.random.default_rng(1)
        left = rng.integers(0, m, pairs)
        right = (left + rng.integers(1, m, pairs)) % m
        self.verify_kernel(self.offsets, self.fp, left[:10], right[:10])
        best, cpu = timed(lambda: self.verify_kernel(self.offsets, self.fp, left, right), repeat)
        return {"pairs": pairs, "docs_sampled": m, "seconds": best, "cpu_seconds_mean": cpu}

    def sample(self, work: Path, candidate_pairs: int) -> dict:
        repeat = self.repeat
        if self.input_bytes is None:
            self.input_bytes = pairs_input_bytes(work, self.bands)
        s = {"sort": self.sort(repeat), "verify": self.verify(candidate_pairs, repeat),
             "input": None if self.input_bytes is None else pairs_input_floor(work, self.input_bytes, repeat),
             "load_average": os.getloadavg()[0]}
        s["seconds"] = sum(s[k]["seconds"] for k in ("sort", "verify", "input") if s[k])
        self.samples.append(s)
        return s

    def result(self) -> dict:
        best = {k: min((s[k] for s in self.samples), key=lambda x: x["seconds"]) if self.samples[0][k] else None
                for k in ("sort", "verify", "input")}
        compute_s = best["sort"]["seconds"] + best["verify"]["seconds"]
        totals = [s["seconds"] for s in self.samples]
        spread = {"samples": len(totals), "tries_each": self.repeat, "totals": totals, "best": min(totals),
                  "median": statistics.median(totals), "worst": max(totals),
                  "spread": (max(totals) - min(totals)) / min(totals),
                  "load_averages": [s["load_average"] for s in self.samples]}
        sort, ver, pin = best["sort"], best["verify"], best["input"]
        basis = (f"sort {sort['keys'] / 1e6:.1f}M keys ({sort['method']}) {sort['seconds']:.2f} s"
                 f" + verify {ver['pairs']:,} pairs {ver['seconds']:.3f} s")
        out = {"sort": sort, "verify": ver, "compute_seconds": compute_s, "samples": spread}
        if pin is None:  # no read/ blocks of this layout (an older tree's): compute alone
            return {**out, "seconds": compute_s, "basis": basis + self.spread_text(spread)}
        return {**out, "input": pin, "seconds": compute_s + pin["seconds"],
                "basis": (f"{basis} + input {fmt_b(pin['bytes'])} (keys of {pin['eligible_documents']:,}"
                          f" documents, codes of {pin['candidate_documents']:,}) by {pin['way']} "
                          f"{pin['seconds']:.3f} s (read() {pin['seconds_at_read']:.3f} s, mmap "
                          f"faults {pin['seconds_at_mmap']:.3f} s; sort + verify alone "
                          f"{compute_s:.3f} s)" + self.spread_text(spread))}

    @staticmethod
    def spread_text(spread: dict) -> str:
        return (f"; the best part of {spread['samples']} samples each; the samples' totals "
                f"{spread['best']:.3f}-{spread['worst']:.3f} s (median {spread['median']:.3f}, "
                f"spread {100 * spread['spread']:.0f}%)")


def pairs_input_bytes(work: Path, bands: int) -> Optional[dict]:
    """What the pair stage must read (see the module): the eligible documents' band keys and the
    candidate documents' codes, from the work dir's read/ Arrow blocks (keys, count). None when
    the blocks have another layout (an older tree's)."""
    import pyarrow as pa
    from neardup.kernels.eliasfano import code_bytes
    blocks = sorted((work / "read").glob("block-*.arrow"))
    if not blocks:
        return None
    keys, counts = [], []
    try:
        for p in blocks:
            with pa.memory_map(str(p)) as f:
                t = pa.ipc.open_file(f).read_all().select(["keys", "count"])
            for chunk in t.column("keys").chunks:
                raw = np.frombuffer(chunk.buffers()[1], np.uint8)[chunk.offset * bands * 8:][:len(chunk) * bands * 8]
                keys.append(raw.view(np.uint64).reshape(-1, bands).copy())
            counts.append(t.column("count").to_numpy().astype(np.int64))
    except (KeyError, ValueError, pa.ArrowInvalid):
        return None
    keys, counts = np.concatenate(keys), np.concatenate(counts)
    eligible = np.flatnonzero(counts > 0)
    candidate = np.zeros(len(counts), bool)  # shares the key of one band with another eligible document
    for j in range(bands):
        k = keys[eligible, j]
        order = np.argsort(k, kind="stable")
        same = k[order][1:] == k[order][:-1]
        candidate[eligible[order[1:][same]]] = True
        candidate[eligible[order[:-1][same]]] = True
    key_bytes = len(eligible) * bands * 8
    codes = int(code_bytes(counts[candidate]).sum())
    return {"eligible_documents": int(len(eligible)), "candidate_documents": int(candidate.sum()),
            "key_bytes": key_bytes, "code_bytes": codes, "bytes": key_bytes + codes}


def pairs_input_floor(work: Path, need: dict, repeat: int) -> dict:
    """The cost of the pair stage's input bytes (``need``, :func:`pairs_input_bytes`) at the
    cheaper of read() and page-faulting a memory map, both measured on the work dir's read/ files."""
    files = sorted((work / "read").glob("block-*.arrow")) + sorted((work / "read").glob("block-*.fp"))
    read = read_bandwidth([str(p) for p in files], repeat)
    file_bytes = read["bytes"]

    def touch():  # every page of every file faulted in through a fresh map, nothing copied
        s = 0
        for p in files:
            if p.stat().st_size:
                m = np.memmap(p, np.uint8, mode="r")
                s += int(m[::4096].sum())
                del m
        return s
    touch()
    mmap_s, _ = timed(touch, repeat)
    mmap_bps = file_bytes / mmap_s
    in_bytes = need["bytes"]
    best_bps = max(read["bytes_per_s"], mmap_bps)
    return {**need, "read_files_bytes": file_bytes,
            "read_bytes_per_s": read["bytes_per_s"], "mmap_fault_bytes_per_s": mmap_bps,
            "way": "read()" if read["bytes_per_s"] >= mmap_bps else "mmap faults",
            "seconds_at_read": in_bytes / read["bytes_per_s"], "seconds_at_mmap": in_bytes / mmap_bps,
            "seconds": in_bytes / best_bps}


def union_find_floor(n: int, pairs_dir: Path, verified: int, repeat: int) -> dict:
    """Union-find over the run's verified pairs (work dir pairs/, left and right columns); over as
    many random pairs when that folder has another layout (an older tree's)."""
    from neardup.kernels.components import connected_components
    try:
        left, right, _ = verified_pairs(pairs_dir)  # TypeError when there are none
        source = str(pairs_dir)
    except Exception:
        rng = np.random.default_rng(2)
        left, right = rng.integers(0, n, verified), rng.integers(0, n, verified)
        source = "random pairs"
    connected_components(10, np.array([0], np.int64), np.array([1], np.int64))
    best, cpu = timed(lambda: connected_components(n, left, right), repeat)
    return {"pairs": len(left), "docs": n, "seconds": best, "cpu_seconds_mean": cpu, "source": source}


def verified_pairs(pairs_dir: Path):
    """(left, right, similarity) of the run's verified pairs (work dir pairs/: Arrow IPC part
    files; Parquet in an older tree's), or None when the folder holds neither."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    tables = [pa.ipc.open_file(pa.memory_map(str(p))).read_all().select(["left", "right", "similarity"])
              for p in sorted(pairs_dir.glob("*.arrow"))]
    tables += [pq.read_table(p, columns=["left", "right", "similarity"]) for p in sorted(pairs_dir.glob("*.parquet"))]
    if not tables:
        return None
    t = pa.concat_tables(tables)
    return tuple(t.column(c).to_numpy().astype(np.int64 if c != "similarity" else np.float64)
                 for c in ("left", "right", "similarity"))


class ClustersFloor:
    """The clusters stage's necessary work (see the module), measured in samples spread over the
    run as the pairs floor is (one after each round of timed runs, so that the floor meets the
    load the stage met): select_representatives over the run's verified pairs renumbered to their
    member set, and the members' ids, each the best of ``repeat`` tries a sample. :meth:`result`:
    the best of each part over every sample (never more than the best sample's total) plus pairs/
    read and clusters/ written at the page-cache bandwidths, and the spread of the samples."""

    def __init__(self, repeat: int):
        self.repeat = repeat
        self.samples: List[dict] = []
        self.bytes = None  # (pairs/, clusters/) of the last sample's work dir

    def sample(self, work: Path) -> Optional[dict]:
        """None when the work dir has no pairs files (an older tree's layout)."""
        from neardup.kernels.components import select_representatives
        pairs = verified_pairs(work / "pairs")
        if pairs is None:
            return None
        left, right, sim = pairs
        n = int(max(left.max(), right.max())) + 1 if len(left) else 0

        def select():  # the member set and the pairs' positions in it by a mark per document, O(n + pairs);
            # each member's position written at its index (the stage's way: no running count over n)
            seen = np.zeros(n, dtype=np.bool_)
            seen[left] = True
            seen[right] = True
            docs = np.flatnonzero(seen)
            at = np.empty(n, dtype=np.int32)
            at[docs] = np.arange(len(docs), dtype=np.int32)
            select_representatives(len(docs), at[left], at[right], sim)  # int32 positions, as the stage gives them
        select()  # loaded
        compute_s, cpu = timed(select, self.repeat)
        ids = member_ids_floor(work, left, right, self.repeat)
        self.bytes = (dir_size(work / "pairs"), dir_size(work / "clusters"))
        s = {"pairs": len(left), "select_seconds": compute_s, "cpu_seconds_mean": cpu, "member_ids": ids,
             "seconds": compute_s + ids["seconds"], "load_average": os.getloadavg()[0]}
        self.samples.append(s)
        return s

    def result(self, read_bps: float, write_bps: float) -> Optional[dict]:
        if not self.samples:
            return None
        select = min(self.samples, key=lambda s: s["select_seconds"])
        ids = min((s["member_ids"] for s in self.samples), key=lambda x: x["seconds"])
        totals = [s["seconds"] for s in self.samples]
        spread = {"samples": len(totals), "tries_each": self.repeat, "totals": totals, "best": min(totals),
                  "median": statistics.median(totals), "worst": max(totals),
                  "spread": (max(totals) - min(totals)) / min(totals) if min(totals) else 0.0,
                  "select_seconds": [s["select_seconds"] for s in self.samples],
                  "load_averages": [s["load_average"] for s in self.samples]}
        in_bytes, out_bytes = self.bytes
        io_s = in_bytes / read_bps + out_bytes / write_bps
        return {"pairs": select["pairs"], "select_seconds": select["select_seconds"],
                "cpu_seconds_mean": select["cpu_seconds_mean"], "pairs_bytes": in_bytes, "clusters_bytes": out_bytes,
                "io_seconds": io_s, "member_ids": ids, "samples": spread,
                "seconds": select["select_seconds"] + io_s + ids["seconds"]}


def member_ids_floor(work: Path, left: np.ndarray, right: np.ndarray, repeat: int) -> dict:
    """The members' columns the clusters stage cannot do without: their ids (user ids, the
    read stage's ``id`` column; their sources and rows come from the blocks' summaries), every
    page of the id buffers of each block holding a member (at 21 % of documents members, every
    page holds some), got at the cheaper of faulting them in through fresh memory maps and
    ``pread`` into a buffer, each measured here on those bytes. Nothing without an id column."""
    import pyarrow as pa
    starts = [0]
    for p in sorted((work / "read").glob("block-*.json")):
        starts.append(starts[-1] + json.loads(p.read_text())["documents"])
    held = set((np.searchsorted(starts, np.concatenate([left, right]), side="right") - 1).tolist())
    ranges = []  # (path, offset, size) of each id buffer of the blocks holding members
    for b, p in enumerate(sorted((work / "read").glob("block-*.arrow"))):
        if b not in held or not p.stat().st_size:
            continue
        with pa.memory_map(str(p)) as f:
            whole = f.read_buffer(f.size())
            f.seek(0)
            table = pa.ipc.open_file(f).read_all()
            if "id" not in table.column_names:
                return {"bytes": 0, "seconds": 0.0, "way": "no id column"}
            ranges += [(str(p), buf.address - whole.address, buf.size)
                       for chunk in table.column("id").chunks for buf in chunk.buffers() if buf is not None]
    size = sum(r[2] for r in ranges)
    room = bytearray(max((r[2] for r in ranges), default=0))

    def faults():  # every page of each buffer faulted in through a fresh map of its file
        s = 0
        for path in sorted({r[0] for r in ranges}):
            m = np.memmap(path, np.uint8, mode="r")
            s += sum(int(m[off:off + n:4096].sum()) for q, off, n in ranges if q == path)
            del m
        return s

    def reads():
        for path in sorted({r[0] for r in ranges}):
            fd = os.open(path, os.O_RDONLY)
            try:
                for q, off, n in ranges:
                    if q == path:
                        os.preadv(fd, [memoryview(room)[:n]], off)
            finally:
                os.close(fd)
    faults()
    mmap_s, _ = timed(faults, repeat)
    read_s, _ = timed(reads, repeat)
    return {"bytes": size, "blocks": len(held), "mmap_fault_seconds": mmap_s, "read_seconds": read_s,
            "way": "mmap faults" if mmap_s <= read_s else "read()", "seconds": min(mmap_s, read_s)}


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def read_bandwidth(files: List[str], repeat: int) -> dict:
    buf = bytearray(64 * MIB)
    view = memoryview(buf)

    def read_all():
        for p in files:
            with open(p, "rb", buffering=0) as f:
                while f.readinto(view):
                    pass
    read_all()  # into the page cache
    nbytes = sum(os.path.getsize(p) for p in files)
    best = best_of(read_all, repeat)
    return {"bytes": nbytes, "seconds": best, "bytes_per_s": nbytes / best}


def zstd_floor(files: List[str], cores: int) -> Optional[dict]:
    import zstandard
    first = files[0]
    t0 = time.perf_counter()
    out = 0
    with open(first, "rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
        while True:
            chunk = r.read(16 * MIB)
            if not chunk:
                break
            out += len(chunk)
    s = time.perf_counter() - t0
    total = sum(os.path.getsize(p) for p in files)
    return {"shard_seconds": s, "shard_bytes": os.path.getsize(first), "shard_uncompressed_bytes": out,
            "seconds_all_cores": s * total / os.path.getsize(first) / cores}


def write_floor(nbytes: int, scratch: Path, repeat: int) -> dict:
    size = max(1, min(nbytes, 256 * MIB))
    a = np.ones(size, np.uint8)
    b = np.empty_like(a)
    np.copyto(b, a)
    copy_s = best_of(lambda: np.copyto(b, a), repeat)
    copy_bw = size / copy_s
    path = scratch / "write-floor.bin"

    def write():
        left = nbytes
        with open(path, "wb", buffering=0) as f:
            while left > 0:
                left -= f.write(memoryview(a)[:min(left, size)])
    write()
    os.unlink(path)
    bests = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        write()
        bests.append(time.perf_counter() - t0)
        os.unlink(path)
    write_bw = nbytes / min(bests)
    return {"bytes": nbytes, "memcpy_bytes_per_s": copy_bw, "page_cache_write_bytes_per_s": write_bw,
            "buffer_bytes": size, "seconds": nbytes / copy_bw + nbytes / write_bw}


def startup_floor(srcs: List[Path], tiny: Path, scratch: Path, repeat: int = 3) -> dict:
    def wall(cmd, env=None):
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = subprocess.run(cmd, env=env, capture_output=True)
            best = min(best, time.perf_counter() - t0)
            if r.returncode != 0:
                raise SystemExit(f"{cmd} failed: {r.stderr.decode()[-2000:]}")
        return best
    out = {"python_pass_s": wall([sys.executable, "-c", "pass"]), "trees": {}}
    for src in srcs:
        env = dict(os.environ, PYTHONPATH=str(src))
        o = scratch / "tiny-out"
        shutil.rmtree(o, ignore_errors=True)
        out["trees"][str(src)] = {
            "import_neardup_s": wall([sys.executable, "-c", "import neardup"], env),
            "run_10_docs_s": wall(["sh", "-c", f'rm -rf "{o}" && exec "{sys.executable}" -m neardup dedup '
                                               f'"{tiny}" --output "{o}" --quiet'], env),
        }
    return out


# --------------------------------------------------------------------------- measured runs

def dedup(src: Path, files: List[str], out: Path, work: Path, extra_env: Optional[dict] = None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(src), **(extra_env or {}))
    cmd = [sys.executable, "-m", "neardup", "dedup", *files, "--output", str(out), "--work-dir", str(work),
           "--quiet"]
    r = run_measured(cmd, env=env, cwd=REPO_DIR)
    if r["returncode"] != 0:
        raise SystemExit(f"{r['command']} failed ({r['returncode']}): {r['stderr_tail']}")
    stats = json.loads((out / "stats.json").read_text())
    r["stats_seconds"] = stats["seconds"]
    r["counts"] = stats["counts"]
    r["params"] = stats["params"]
    r["startup_s"] = r["wall_s"] - sum(stats["seconds"].values())
    return r


def folder_bytes(out: Path, work: Path) -> dict:
    d = {f"work_{s}": tree_bytes(work / s) for s in STAGES}
    d["output"] = tree_bytes(out)
    d["output_kept"] = tree_bytes(out / "kept")
    return d


def summarise(runs: List[dict]) -> dict:
    s = {}
    for stage in STAGES:
        xs = [r["stats_seconds"].get(stage, 0.0) for r in runs]
        s[stage] = {"best": min(xs), "median": statistics.median(xs), "all": xs}
    for key, f in (("startup", lambda r: r["startup_s"]), ("wall", lambda r: r["wall_s"]),
                   ("cpu", lambda r: (r["cpu_user_s"] or 0) + (r["cpu_sys_s"] or 0))):
        xs = [f(r) for r in runs]
        s[key] = {"best": min(xs), "median": statistics.median(xs), "all": xs}
    s["peak_memory_bytes_max"] = max(r["peak_memory_bytes"] for r in runs)
    return s


def fmt_b(x: Optional[int]) -> str:
    if x is None:
        return "-"
    if x >= 10 * 2**30:
        return f"{x / 2**30:.1f} GiB"
    return f"{x / MIB:,.1f} MiB"


def table(size: str, tree: dict, floors: dict, corpus: dict) -> str:
    kcpu = floors.get("kernels_cpu_s", {})
    s, b = tree["summary"], tree["bytes"]
    ex = floors["stage_floor_s"]
    rows = [
        ("read", f"{fmt_b(corpus['bytes'])} ({fmt_b(corpus['text_bytes'])} text)", fmt_b(b["work_read"]),
         floors["read"]["basis"]),
        ("pairs", fmt_b(b["work_read"]), fmt_b(b["work_pairs"]), floors["pairs"]["basis"]),
        ("clusters", fmt_b(b["work_pairs"]), fmt_b(b["work_clusters"]), floors["clusters"]["basis"]),
        ("write", f"{fmt_b(corpus['bytes'])} + {fmt_b(b['work_clusters'])}",
         f"{fmt_b(b['output'])} ({fmt_b(b['output_kept'])} kept)", floors["write"]["basis"]),
        ("startup", "-", "-", floors["startup"]["basis"]),
    ]
    lines = [f"### {size} documents, {tree['src']} ({(tree['git'].get('commit') or '?')[:10]}"
             f"{', dirty' if tree['git'].get('dirty') else ''})", "",
             "| stage | best s | median s | in | out | floor s | floor | best / floor |",
             "|---|---|---|---|---|---|---|---|"]
    for stage, i, o, basis in rows:
        m = s[stage]
        f = ex[stage]
        lines.append(f"| {stage} | {m['best']:.2f} | {m['median']:.2f} | {i} | {o} | {f:.3f} | {basis} | "
                     f"{m['best'] / f:.1f}× |")
    total_floor = sum(ex.values())
    lines.append(f"| **whole run** | {s['wall']['best']:.2f} | {s['wall']['median']:.2f} | | | {total_floor:.2f} | "
                 f"sum of the floors | {s['wall']['best'] / total_floor:.1f}× |")
    lines.append("")
    lines.append(f"CPU user+sys of the run: best {s['cpu']['best']:.1f} s, median {s['cpu']['median']:.1f} s; "
                 f"peak memory {fmt_b(s['peak_memory_bytes_max'])}; runs: "
                 + ", ".join(f"{w:.2f}" for w in s["wall"]["all"]) + " s wall")
    if kcpu:
        lines.append("")
        lines.append(f"CPU-seconds of the compiled floors: {sum(kcpu.values()):.1f} ("
                     + ", ".join(f"{k} {v:.2f}" for k, v in kcpu.items()) + f"); the run's best CPU / theirs "
                     f"{s['cpu']['best'] / sum(kcpu.values()):.1f}×")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", default="100k,1M", help="corpus sizes, comma-separated (100k, 1M, 10M, or numbers)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per size and tree (after one untimed)")
    ap.add_argument("--floor-repeat", type=int, default=3, help="tries of each floor measurement (best kept)")
    ap.add_argument("--src", default=str(REPO_DIR / "src"),
                    help="the src/ folder(s) to run, comma-separated (default: this checkout's)")
    ap.add_argument("--kernel-docs", type=int, default=250_000,
                    help="documents the read kernel's floor is measured on (rate extrapolated by bytes)")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/roofline"),
                    help="output, work dir and write-floor file go here (deleted after)")
    ap.add_argument("--scale-data", type=Path, default=DATA_DIR / "scale_10m", help="bench/scale.py's shards")
    ap.add_argument("--keep", action="store_true", help="keep the last run's output and work dir")
    ap.add_argument("--output", default="roofline.json", help="result file name under bench/results/")
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    srcs = [Path(p).resolve() for p in args.src.split(",") if p]
    for p in srcs:
        if not (p / "neardup").is_dir():
            ap.error(f"{p} has no neardup package")
    sizes = [parse_docs(x) for x in args.docs.split(",") if x]
    output = RESULTS_DIR / Path(args.output).name
    scratch = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    cores = len(os.sched_getaffinity(0))

    result = run_header(sys.argv)
    result.update(trees={str(p): git_state(p) for p in srcs}, repeat=args.repeat, floor_repeat=args.floor_repeat,
                  floor_kernels_from=str(REPO_DIR / "src"), sizes={})

    # warm-up: a 2,000-document run of each tree compiles everything, the JSONL scanner too; its
    # documents (and the start-up floor's 10) are the head of the first corpus, kept in --scratch
    corpora = {n: corpus_of(n, args.scale_data.resolve(), log) for n in sizes}
    head = []
    for line in _lines(corpora[sizes[0]]["files"][0]):
        head.append(line)
        if len(head) >= 2000:
            break
    warm, tiny = scratch / "warm.jsonl", scratch / "tiny.jsonl"
    warm.write_bytes(b"".join(head))
    tiny.write_bytes(b"".join(head[:10]))
    for src in srcs:
        log(f"warm-up, 2,000 documents: {src}")
        dedup(src, [str(warm)], scratch / "out", scratch / "work", WARMUP_ENV)
    log("start-up floor")
    startup = startup_floor(srcs, tiny, scratch)
    result["startup"] = startup

    for n in sizes:
        size = label(n)
        corpus = corpora[n]
        entry = {"corpus": corpus, "trees": {}}
        result["sizes"][size] = entry
        out, work = scratch / "out", scratch / "work"
        runs: Dict[str, List[dict]] = {str(s): [] for s in srcs}
        for src in srcs:
            log(f"{size}: untimed run, {src}")
            params = dedup(src, corpus["files"], out, work)["params"]
        pairs_floor = PairsFloor(int(params["bands"]), n, verify_fingerprints(corpus["files"], params),
                                 args.floor_repeat)
        clusters_floor = ClustersFloor(args.floor_repeat)
        for i in range(args.repeat):
            for src in (srcs if i % 2 == 0 else srcs[::-1]):
                log(f"{size}: run {i + 1}/{args.repeat}, {src}")
                r = dedup(src, corpus["files"], out, work)
                r["bytes"] = folder_bytes(out, work)
                runs[str(src)].append(r)
                last = r  # the run whose work dir is still there
            log(f"{size}: pairs floor, sample {i + 1}/{args.repeat}")
            pairs_floor.sample(work, int(last["counts"].get("candidate_pairs", 0)))
            log(f"{size}: clusters floor, sample {i + 1}/{args.repeat}")
            clusters_floor.sample(work)
        params, counts = last["params"], last["counts"]

        log(f"{size}: floors")
        floors: dict = {}
        read_bw = read_bandwidth(corpus["files"], args.floor_repeat)
        texts = head_texts(corpus["files"], min(n, args.kernel_docs))
        from neardup.config import Execution
        batch = Execution.batch_size  # the read stage's default batch
        kern = kernel_floor(texts, params, batch, args.floor_repeat)
        del texts
        kernel_s = corpus["text_bytes"] / kern["bytes_per_s"]
        zstd = zstd_floor(corpus["files"], cores) if corpus["zstd"] else None
        input_s = read_bw["seconds"] + (zstd["seconds_all_cores"] if zstd else 0.0)
        kernel_cpu_s = kern["cpu_seconds_mean"] * corpus["text_bytes"] / kern["text_bytes"]
        floors["read"] = {"kernel": kern, "kernel_seconds_corpus": kernel_s, "kernel_cpu_seconds_corpus": kernel_cpu_s,
                          "page_cache_read": read_bw,
                          "zstd": zstd, "input_seconds": input_s, "seconds": max(kernel_s, input_s),
                          "basis": (f"max(kernel {kernel_s:.2f} s at {kern['bytes_per_s'] / 1e6:.0f} MB/s on "
                                    f"{kern['threads']} threads ({kernel_cpu_s:.1f} CPU-s), input {input_s:.2f} s)")}
        floors["pairs"] = pairs_floor.result()
        sort, ver = floors["pairs"]["sort"], floors["pairs"]["verify"]
        del pairs_floor
        uf = union_find_floor(n, work / "pairs", int(counts.get("verified_pairs", 0)), args.floor_repeat)
        wr = write_floor(last["bytes"]["output"], scratch, args.floor_repeat)
        cl = clusters_floor.result(read_bw["bytes_per_s"], wr["page_cache_write_bytes_per_s"])
        if cl is None:  # no pairs files (an older tree's layout): the bare union-find
            floors["clusters"] = {"union_find": uf, "seconds": uf["seconds"],
                                  "basis": f"union-find over {uf['pairs']:,} verified pairs"}
        else:
            floors["clusters"] = {"union_find": uf, "necessary": cl, "seconds": cl["seconds"],
                                  "basis": (f"union-find + chain guard over {cl['pairs']:,} verified pairs, members "
                                            f"renumbered, {cl['select_seconds']:.3f} s + pairs/ read and clusters/ "
                                            f"written at page-cache bandwidth {cl['io_seconds']:.3f} s + the members' "
                                            f"ids, {cl['member_ids']['bytes'] / 1e6:.1f} MB of read/ pages by "
                                            f"{cl['member_ids']['way']} {cl['member_ids']['seconds']:.3f} s (bare "
                                            f"union-find {uf['seconds']:.4f} s)" + PairsFloor.spread_text(cl["samples"]))}
        floors["write"] = {**wr, "basis": (f"memcpy {wr['memcpy_bytes_per_s'] / 1e9:.1f} GB/s + page-cache write "
                                           f"{wr['page_cache_write_bytes_per_s'] / 1e9:.1f} GB/s")}
        floors["startup"] = {"seconds": startup["python_pass_s"], "basis": "`python -c pass`"}
        floors["stage_floor_s"] = {k: floors[k]["seconds"] for k in (*STAGES, "startup")}
        # CPU-seconds of the compiled floors (the kernel over the whole corpus, sort, verify,
        # union-find): against the run's CPU-seconds, a comparison that load does not skew
        floors["kernels_cpu_s"] = {"read kernel": kernel_cpu_s, "sort": sort["cpu_seconds_mean"],
                                   "verify": ver["cpu_seconds_mean"], "union-find": uf["cpu_seconds_mean"]}
        entry["floors"] = floors

        for src in srcs:
            rs = runs[str(src)]
            entry["trees"][str(src)] = {
                "src": str(src), "git": result["trees"][str(src)], "summary": summarise(rs),
                "bytes": rs[-1]["bytes"], "counts": rs[-1]["counts"], "params": rs[-1]["params"],
                "runs": [{k: r.get(k) for k in ("wall_s", "cpu_user_s", "cpu_sys_s", "peak_memory_bytes",
                                                "stats_seconds", "startup_s", "disk_read_bytes",
                                                "major_faults")} for r in rs],
                "disk_read_warning": disk_read_note(rs, entry["corpus"]["bytes"]),
                "ratio_best_over_floor": {k: summarise(rs)[k]["best"] / floors["stage_floor_s"][k]
                                          for k in (*STAGES, "startup")},
            }
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
        result["load_average_at_end"] = list(os.getloadavg())
        write_json(output, result)

    result["load_average_at_end"] = list(os.getloadavg())
    write_json(output, result)
    print(f"# roofline ({result['date']}, load average {result['machine']['load_average_at_start']} at start, "
          f"{result['load_average_at_end']} at end)\n")
    for size, entry in result["sizes"].items():
        for tree in entry["trees"].values():
            print(table(size, tree, entry["floors"], entry["corpus"]))
            if tree.get("disk_read_warning"):
                print(f"{tree['src']}: {tree['disk_read_warning']}")
            print()
    st = result["startup"]
    print(f"start-up: `python -c pass` {st['python_pass_s']:.3f} s; " + "; ".join(
        f"{src}: import neardup {t['import_neardup_s']:.3f} s, a 10-document run {t['run_10_docs_s']:.3f} s"
        for src, t in st["trees"].items()))
    print(f"written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
