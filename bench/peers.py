"""The peers neardup is measured against: datasketch 2.0 and rensa 0.5, used as their users would.

Shingling is the same for every tool: lower-case, words = ``re.findall(r"\\w+", text)``, word
5-grams joined by one space (UTF-8 bytes for datasketch, which hashes bytes; str for rensa,
which hashes str itself). A text of fewer than 5 words is one shingle. Neither library shingles
text itself, so this Python step is part of what a user of either pays, and is timed apart
(``shingle_s``) from the library's own work (``sketch_s``).

Signature variants (``SIGNATURES``), all k = 128, seed 1:
    datasketch          MinHash.bulk (reuses one initialised MinHash, copies it per document;
                        the fastest CPU path of 2.0, default scheme affine32 over sha1_hash32)
    datasketch-update   a new MinHash per document + update_batch
    rensa               RMinHash.digest_matrix_from_token_sets: the batch API, Rust end to end
                        (same digests as per-document RMinHash.update, checked in tests)
    rensa-update        a new RMinHash per document + update(list of str)
    rensa-cminhash      CMinHash.digests_from_token_sets (C-MinHash, also a full-set MinHash)
    rensa-rho           RMinHash.digest_matrix_from_token_sets_rho: rensa's fastest path, but it
                        *samples token positions* (not a full-set MinHash: order and length
                        change the sketch); reported for completeness, not as the rensa figure

Dedup pipelines (``PIPELINES``): signatures, LSH index of every document, one query per document,
union-find over the candidate pairs, keep the first document (input order) of each component.
No verification of candidates by default, as a plain MinHashLSH user does (``verify="estimate"``
keeps only candidates whose estimated Jaccard reaches the threshold).
    datasketch          MinHashLSH(threshold, num_perm=128): its own weighted FP/FN optimiser
                        picks the banding (9 bands x 13 rows at 0.8)
    rensa               RMinHashLSH(threshold, 128, num_bands): num_bands must divide 128, so the
                        default is 8 bands x 16 rows (rensa's own benchmark setting, and the
                        divisor of 128 closest to datasketch's choice); insert_many + query_all
    rensa-dedup         RMinHashDeduplicator(threshold, 128, use_lsh=True).add_pairs: rensa's
                        streaming dedup API (keeps a document unless an already kept one is
                        an LSH candidate with estimated Jaccard >= threshold); the representative
                        of a removed document is its best estimated match among kept candidates

Command line (used by pipeline.py to run a peer in its own process, so its memory is its own):
    python bench/peers.py dedup --tool rensa corpus.jsonl --output result.json [--threshold 0.8]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import NGRAM, WORD_RE, read_jsonl_texts, union_find_removed, write_json  # noqa: E402

NUM_PERM = 128
SEED = 1
BATCH = 2000           # documents shingled and sketched per step (bounds the shingle lists' memory)
RENSA_DEFAULT_BANDS = 8


# --------------------------------------------------------------------------- shingling

def shingles(text: str, n: int = NGRAM) -> List[str]:
    words = WORD_RE.findall(text.lower())
    if len(words) < n:
        return [" ".join(words)] if words else []
    return [" ".join(g) for g in zip(*[words[i:] for i in range(n)])]


def shingles_bytes(text: str, n: int = NGRAM) -> List[bytes]:
    return [s.encode("utf-8") for s in shingles(text, n)]


class Timer:
    def __init__(self):
        self.t: Dict[str, float] = {}

    def add(self, key: str, seconds: float) -> None:
        self.t[key] = self.t.get(key, 0.0) + seconds


def _batches(n: int, size: int = BATCH):
    for a in range(0, n, size):
        yield a, min(n, a + size)


# --------------------------------------------------------------------------- signatures

def _ds_sigs(texts, timer, per_doc: bool):
    from datasketch import MinHash
    out = np.empty((len(texts), NUM_PERM), np.uint32)
    for a, b in _batches(len(texts)):
        t0 = time.perf_counter()
        sh = [shingles_bytes(t) for t in texts[a:b]]
        t1 = time.perf_counter()
        if per_doc:
            for k, s in enumerate(sh):
                m = MinHash(num_perm=NUM_PERM, seed=SEED)
                m.update_batch(s)
                out[a + k] = m.hashvalues
        else:
            for k, m in enumerate(MinHash.generator(sh, num_perm=NUM_PERM, seed=SEED)):
                out[a + k] = m.hashvalues
        timer.add("shingle_s", t1 - t0)
        timer.add("sketch_s", time.perf_counter() - t1)
    return out


def sig_datasketch(texts, timer):
    return _ds_sigs(texts, timer, per_doc=False)


def sig_datasketch_update(texts, timer):
    return _ds_sigs(texts, timer, per_doc=True)


def _rensa_sigs(texts, timer, how: str):
    import rensa
    out = np.empty((len(texts), NUM_PERM), np.uint32)
    for a, b in _batches(len(texts)):
        t0 = time.perf_counter()
        sh = [shingles(t) for t in texts[a:b]]
        t1 = time.perf_counter()
        if how == "matrix":
            out[a:b] = rensa.RMinHash.digest_matrix_from_token_sets(sh, NUM_PERM, SEED).to_rows()
        elif how == "update":
            for k, s in enumerate(sh):
                m = rensa.RMinHash(NUM_PERM, SEED)
                m.update(s)
                out[a + k] = m.digest()
        elif how == "cminhash":
            out[a:b] = rensa.CMinHash.digests_from_token_sets(sh, NUM_PERM, SEED)
        elif how == "rho":
            out[a:b] = rensa.RMinHash.digest_matrix_from_token_sets_rho(sh, NUM_PERM, SEED).to_rows()
        else:  # pragma: no cover
            raise ValueError(how)
        timer.add("shingle_s", t1 - t0)
        timer.add("sketch_s", time.perf_counter() - t1)
    return out


SIGNATURES: Dict[str, Tuple[Callable, str]] = {
    "datasketch": (sig_datasketch, "datasketch MinHash.bulk/generator (affine32, sha1_hash32)"),
    "datasketch-update": (sig_datasketch_update, "datasketch MinHash() + update_batch per document"),
    "rensa": (lambda t, tm: _rensa_sigs(t, tm, "matrix"),
              "rensa RMinHash.digest_matrix_from_token_sets (batch, full-set R-MinHash)"),
    "rensa-update": (lambda t, tm: _rensa_sigs(t, tm, "update"),
                     "rensa RMinHash() + update(list of str) per document"),
    "rensa-cminhash": (lambda t, tm: _rensa_sigs(t, tm, "cminhash"),
                       "rensa CMinHash.digests_from_token_sets (full-set C-MinHash)"),
    "rensa-rho": (lambda t, tm: _rensa_sigs(t, tm, "rho"),
                  "rensa RMinHash.digest_matrix_from_token_sets_rho (samples token positions: "
                  "not a full-set MinHash)"),
}
FULL_SET = {"datasketch", "datasketch-update", "rensa", "rensa-update", "rensa-cminhash"}


def signatures(tool: str, texts: Sequence[str]) -> Tuple[np.ndarray, Dict[str, float]]:
    """(n x 128 uint32 signatures, {"shingle_s", "sketch_s", "total_s"}) for a signature variant."""
    fn = SIGNATURES[tool][0]
    timer = Timer()
    t0 = time.perf_counter()
    sig = fn(list(texts), timer)
    timer.t["total_s"] = time.perf_counter() - t0
    return sig, timer.t


# --------------------------------------------------------------------------- dedup pipelines

def datasketch_params(threshold: float, bands: Optional[int] = None) -> Tuple[int, int]:
    from datasketch import MinHashLSH
    if bands:
        return bands, NUM_PERM // bands
    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    return lsh.b, lsh.r


def dedup_datasketch(texts: Sequence[str], threshold: float = 0.8, bands: Optional[int] = None,
                     verify: str = "none") -> dict:
    from datasketch import MinHash, MinHashLSH
    timer = Timer()
    n = len(texts)
    kwargs = {"params": (bands, NUM_PERM // bands)} if bands else {}
    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM, **kwargs)
    mhs: List = []
    for a, b in _batches(n):
        t0 = time.perf_counter()
        sh = [shingles_bytes(t) for t in texts[a:b]]
        t1 = time.perf_counter()
        mhs.extend(MinHash.generator(sh, num_perm=NUM_PERM, seed=SEED))
        timer.add("shingle_s", t1 - t0)
        timer.add("sketch_s", time.perf_counter() - t1)
    t0 = time.perf_counter()
    with lsh.insertion_session() as session:
        for i, m in enumerate(mhs):
            session.insert(i, m, check_duplication=False)
    t1 = time.perf_counter()
    pairs = []
    for i, m in enumerate(mhs):
        for j in lsh.query(m):
            if j > i and (verify == "none" or m.jaccard(mhs[j]) >= threshold):
                pairs.append((i, j))
    t2 = time.perf_counter()
    removed, rep = union_find_removed(n, pairs)
    t3 = time.perf_counter()
    timer.t.update(insert_s=t1 - t0, query_s=t2 - t1, union_find_s=t3 - t2)
    return {"removed": removed, "representative": rep, "timings": timer.t,
            "candidate_pairs": len(pairs),
            "params": {"bands": lsh.b, "rows": lsh.r, "verify": verify, "threshold": threshold,
                       "num_perm": NUM_PERM, "seed": SEED}}


def dedup_rensa(texts: Sequence[str], threshold: float = 0.8, bands: Optional[int] = None,
                verify: str = "none") -> dict:
    import rensa
    timer = Timer()
    n = len(texts)
    bands = bands or RENSA_DEFAULT_BANDS
    lsh = rensa.RMinHashLSH(threshold, NUM_PERM, bands)
    mhs: List = []
    for a, b in _batches(n):
        t0 = time.perf_counter()
        sh = [shingles(t) for t in texts[a:b]]
        t1 = time.perf_counter()
        mhs.extend(rensa.RMinHash.from_token_sets(sh, NUM_PERM, SEED))
        timer.add("shingle_s", t1 - t0)
        timer.add("sketch_s", time.perf_counter() - t1)
    t0 = time.perf_counter()
    lsh.insert_many(mhs, 0)
    t1 = time.perf_counter()
    pairs = []
    for i, cands in enumerate(lsh.query_all(mhs)):
        for j in cands:
            if j > i and (verify == "none" or mhs[i].jaccard(mhs[j]) >= threshold):
                pairs.append((i, j))
    t2 = time.perf_counter()
    removed, rep = union_find_removed(n, pairs)
    t3 = time.perf_counter()
    timer.t.update(insert_s=t1 - t0, query_s=t2 - t1, union_find_s=t3 - t2)
    return {"removed": removed, "representative": rep, "timings": timer.t,
            "candidate_pairs": len(pairs),
            "params": {"bands": bands, "rows": NUM_PERM // bands, "verify": verify,
                       "threshold": threshold, "num_perm": NUM_PERM, "seed": SEED}}


def dedup_rensa_dedup(texts: Sequence[str], threshold: float = 0.8, bands: Optional[int] = None,
                      verify: str = "estimate") -> dict:
    import rensa
    timer = Timer()
    n = len(texts)
    kwargs = {"num_bands": bands} if bands else {}
    dd = rensa.RMinHashDeduplicator(threshold, NUM_PERM, True, seed=SEED, **kwargs)
    keep: List[bool] = []
    mhs: List = []
    for a, b in _batches(n):
        t0 = time.perf_counter()
        sh = [shingles(t) for t in texts[a:b]]
        t1 = time.perf_counter()
        batch = rensa.RMinHash.from_token_sets(sh, NUM_PERM, SEED)
        t2 = time.perf_counter()
        keep.extend(dd.add_pairs([(str(a + k), m) for k, m in enumerate(batch)]))
        t3 = time.perf_counter()
        mhs.extend(batch)
        timer.add("shingle_s", t1 - t0)
        timer.add("sketch_s", t2 - t1)
        timer.add("dedup_s", t3 - t2)
    # Not part of rensa's job (it only says keep / drop): name a representative for grading.
    t0 = time.perf_counter()
    removed = np.flatnonzero(~np.asarray(keep, bool))
    rep = np.empty(len(removed), np.int64)
    for k, i in enumerate(removed.tolist()):
        cands = [int(c) for c in dd.get_duplicates(mhs[i])]
        cands = [c for c in cands if c != i and keep[c]] or [c for c in cands if c != i]
        rep[k] = max(cands, key=lambda c: mhs[i].jaccard(mhs[c])) if cands else -1
    timer.t["grading_s"] = time.perf_counter() - t0   # excluded from pipeline_s
    return {"removed": removed, "representative": rep, "timings": timer.t,
            "params": {"bands": bands, "verify": "estimate (rensa built in)",
                       "threshold": threshold, "num_perm": NUM_PERM, "seed": SEED}}


PIPELINES: Dict[str, Tuple[Callable, str]] = {
    "datasketch": (dedup_datasketch, "datasketch MinHash.generator + MinHashLSH insertion_session + "
                                     "query + union-find"),
    "rensa": (dedup_rensa, "rensa RMinHash.from_token_sets + RMinHashLSH insert_many + query_all + "
                           "union-find"),
    "rensa-dedup": (dedup_rensa_dedup, "rensa RMinHashDeduplicator(use_lsh=True).add_pairs"),
}


def run_pipeline(tool: str, texts: Sequence[str], threshold: float = 0.8,
                 bands: Optional[int] = None, verify: Optional[str] = None) -> dict:
    fn = PIPELINES[tool][0]
    kwargs = {} if verify is None else {"verify": verify}
    t0 = time.perf_counter()
    res = fn(texts, threshold=threshold, bands=bands, **kwargs)
    res["timings"]["pipeline_s"] = time.perf_counter() - t0 - res["timings"].get("grading_s", 0.0)
    return res


# --------------------------------------------------------------------------- command line

def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("dedup", help="JSONL -> removed documents, with timings")
    p.add_argument("input", type=Path)
    p.add_argument("--tool", choices=sorted(PIPELINES), required=True)
    p.add_argument("--output", type=Path, required=True, help="result JSON")
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--bands", type=int, default=None, help="LSH bands (rows = 128 // bands)")
    p.add_argument("--verify", choices=["none", "estimate"], default=None)
    p.add_argument("--limit", type=int, default=None, help="first N documents only")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    texts, ids = read_jsonl_texts(args.input, limit=args.limit)
    read_s = time.perf_counter() - t0
    res = run_pipeline(args.tool, texts, args.threshold, args.bands, args.verify)
    res["timings"]["read_s"] = read_s
    res["timings"]["in_process_s"] = (time.perf_counter() - t0
                                      - res["timings"].get("grading_s", 0.0))
    out = {"tool": args.tool, "description": PIPELINES[args.tool][1], "n_docs": len(texts),
           "input": str(args.input), "removed_ids": [ids[i] for i in res["removed"].tolist()],
           "removed": res["removed"].tolist(), "representative": res["representative"].tolist(),
           "timings": res["timings"], "params": res["params"],
           "candidate_pairs": res.get("candidate_pairs")}
    write_json(args.output, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
