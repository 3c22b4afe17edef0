"""The index against datasketch's, in the same run: an older half indexed, a newer half asked.

    PYTHONPATH=<where datasketch and pybloomfiltermmap3 are> .venv/bin/python bench/index_peers.py --docs 40000

The synthetic corpus of N documents (``bench/data/synth_N_s0.jsonl``, planted near-duplicate
clusters) is cut in two by line: the first half is indexed, each document of the second half is
asked "is there a near-duplicate in the index?". Four indexes, each at its own defaults for
threshold 0.8 and 128 permutations, word 5-grams of ``\\w+`` words for the peers as for neardup:

- neardup exact (``Index(path)``: band keys + shingle fingerprints, answers verified at 0.8);
- neardup Bloom (``Index(path, kind="bloom")``, its default false-positive rate);
- datasketch ``MinHashLSH`` (in memory; ``MinHash.generator`` for the signatures, an insertion
  session, ``query``: an unverified LSH candidate is a yes);
- datasketch ``MinHashLSHBloom`` (``save_dir`` on disk, ``n`` = the indexed documents, ``fp`` =
  neardup's default per-filter rate, so that both Bloom tiers are asked for the same rate).

Measured per index: add (documents/s, hashing included, as a user calls it), the batch of asks
(documents/s, hashing included), single-document ask latency p50/p99 (1,000 documents, hashing
included; neardup's kernels compiled and loaded by a warm-up on 200 documents before), bytes a document (files on disk; for the in-memory MinHashLSH, its pickle), and the
answers graded against the truth: of the newer documents with an indexed document at exact
Jaccard >= 0.8 in their planted cluster, the share answered no (missed); of those with none at
0.75 or more, the share answered yes (false yes), split into near misses (0.5 <= J < 0.75) and
documents with nothing alike (J < 0.5).
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (RESULTS_DIR, TruthPairs, ensure_corpus, load_truth, read_jsonl_texts,  # noqa: E402
                    run_header, write_json)
from peers import NUM_PERM, SEED, shingles_bytes  # noqa: E402

from neardup.index import Index  # noqa: E402
from neardup.index.bloom import default_rate  # noqa: E402

THRESHOLD = 0.8
LATENCY_DOCS = 1000


def _folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def _latency(ask, texts) -> dict:
    times = []
    for t in texts:
        t0 = time.perf_counter()
        ask(t)
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3),
            "asks": len(texts)}


def run_neardup(kind: str, old, new, root: str) -> dict:
    path = os.path.join(root, f"neardup-{kind}.ndx")
    t0 = time.perf_counter()
    idx = Index(path, kind=kind)
    idx.add(old, name="old")
    add_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    answers = [bool(m) for m in Index(path).query(new)]
    ask_s = time.perf_counter() - t0
    reader = Index(path)
    latency = _latency(lambda t: reader.query([t]), new[:LATENCY_DOCS])
    stats = Index(path).stats()
    return {"add_docs_per_s": round(len(old) / add_s), "ask_docs_per_s": round(len(new) / ask_s),
            "latency": latency, "bytes_per_document": round(_folder_bytes(path) / len(old), 1),
            "bands": stats["params"]["bands"], "rows": stats["params"]["rows"], "answers": answers}


def run_datasketch(kind: str, old, new, root: str, bands_rows) -> dict:
    from datasketch import MinHash, MinHashLSH, MinHashLSHBloom

    def sketches(texts):
        return list(MinHash.generator([shingles_bytes(t) for t in texts], num_perm=NUM_PERM, seed=SEED))

    t0 = time.perf_counter()
    if kind == "lsh":
        lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
        with lsh.insertion_session() as session:
            for i, m in enumerate(sketches(old)):
                session.insert(i, m, check_duplication=False)
    else:
        save = os.path.join(root, "datasketch-bloom")
        lsh = MinHashLSHBloom(threshold=THRESHOLD, num_perm=NUM_PERM, n=len(old), fp=default_rate(bands_rows[0]),
                              save_dir=save)
        for m in sketches(old):
            lsh.insert(m)
    add_s = time.perf_counter() - t0

    def ask(m):
        return bool(lsh.query(m))

    t0 = time.perf_counter()
    answers = [ask(m) for m in sketches(new)]
    ask_s = time.perf_counter() - t0
    latency = _latency(lambda t: ask(sketches([t])[0]), new[:LATENCY_DOCS])
    size = len(pickle.dumps(lsh)) if kind == "lsh" else _folder_bytes(save)
    return {"add_docs_per_s": round(len(old) / add_s), "ask_docs_per_s": round(len(new) / ask_s),
            "latency": latency, "bytes_per_document": round(size / len(old), 1), "bands": lsh.b, "rows": lsh.r,
            "answers": answers}


def grade(truth: TruthPairs, half: int, answers) -> dict:
    """Of the newer documents: with an older one at J >= 0.8 in their cluster (should be yes),
    with none at 0.75 or more (should be no)."""
    n_new = truth.n - half
    best = np.zeros(n_new)
    cross = (truth.a < half) & (truth.b >= half)
    np.maximum.at(best, truth.b[cross] - half, truth.j[cross])
    said = np.asarray(answers, bool)
    should = best >= THRESHOLD
    should_not = best < 0.75
    return {"near_duplicates": int(should.sum()), "missed": int((should & ~said).sum()),
            "missed_share": round(float((should & ~said).sum() / max(1, should.sum())), 4),
            "unrelated": int(should_not.sum()), "false_yes": int((should_not & said).sum()),
            "false_yes_share": round(float((should_not & said).sum() / max(1, should_not.sum())), 4),
            # of those, the ones whose best older document is a near miss (0.5 <= J < 0.75), and the
            # ones with nothing alike (J < 0.5: no planted relative in the index, or a distant one)
            "false_yes_near_miss": int((should_not & said & (best >= 0.5)).sum()),
            "near_misses": int((should_not & (best >= 0.5)).sum()),
            "false_yes_below_0_5": int((said & (best < 0.5)).sum()),
            "below_0_5": int((best < 0.5).sum())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=40000)
    ap.add_argument("--output", default=str(RESULTS_DIR / "index_peers.json"))
    args = ap.parse_args(argv)
    out = run_header(sys.argv)
    info = ensure_corpus(args.docs)
    texts, _ = read_jsonl_texts(Path(info["path"]))
    truth = TruthPairs(texts, load_truth(Path(info["truth"]))["cluster_of"])
    half = len(texts) // 2
    old, new = texts[:half], texts[half:]
    out.update(docs=len(texts), indexed=half, asked=len(new), threshold=THRESHOLD)
    root = tempfile.mkdtemp(prefix="neardup-index-peers-")
    results = {}
    try:
        for kind in ("exact", "bloom"):  # numba's compiling (once per install) is not what is timed
            warm = os.path.join(root, f"warm-{kind}")
            Index(warm, kind=kind).add(old[:200], name="warm")
            Index(warm).query(new[:200])
            Index(warm).query(new[:1])
        for name, fn in (("neardup_exact", lambda: run_neardup("exact", old, new, root)),
                         ("neardup_bloom", lambda: run_neardup("bloom", old, new, root)),
                         ("datasketch_lsh", lambda: run_datasketch("lsh", old, new, root, None)),
                         ("datasketch_bloom", lambda: run_datasketch("bloom", old, new, root, (13, 7)))):
            r = fn()
            r.update(grade(truth, half, r.pop("answers")))
            results[name] = r
            print(name, {k: v for k, v in r.items()}, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for ours, theirs in (("neardup_exact", "datasketch_lsh"), ("neardup_bloom", "datasketch_bloom")):
        a, b = results[ours], results[theirs]
        results[f"{ours}_vs_{theirs}"] = {
            "add_speed_ratio": round(a["add_docs_per_s"] / b["add_docs_per_s"], 2),
            "ask_speed_ratio": round(a["ask_docs_per_s"] / b["ask_docs_per_s"], 2),
            "p50_latency_ratio": round(b["latency"]["p50_ms"] / a["latency"]["p50_ms"], 2),
            "bytes_ratio": round(b["bytes_per_document"] / a["bytes_per_document"], 2)}
    out["results"] = results
    write_json(Path(args.output), out)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
