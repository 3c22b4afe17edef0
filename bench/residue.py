"""Residual near-duplicates and false removals of ``neardup dedup`` with its defaults, on corpora
made of families of near-identical documents (bench/corpora.py), graded by exact word-5-gram
Jaccard over all pairs (the usual ``\\w+`` words, bench/common.py).

    .venv/bin/python bench/residue.py                                  # both corpora, 20,000 docs each
    .venv/bin/python bench/residue.py --corpora reference --docs 5000 --variant "rounds 8=--max-anchor-rounds 8"

Graded at threshold 0.8:
    residual pairs    pairs with J >= 0.8 whose two documents were both kept, as a share of all pairs
                      with J >= 0.8 (every pair of the corpus, found by an exact similarity join)
    false removals    removed documents whose best match among the kept documents is below 0.8
                      (J with the representative neardup names, else with any kept document), as a
                      share of the removed documents; those below 0.75 are also counted apart
Each variant (``--variant NAME=ARGS``, default: the defaults only, and ``--verify none``) is one
``python -m neardup dedup`` subprocess; a variant whose NAME starts with ``words:`` reads the
corpus written as its ``\\w+`` words (``as_words``): neardup's J of every pair is then the
grading's, and the variant measures the search alone, whatever the word definition; its wall time includes start-up, the load average is
recorded (the wall times are of one run each, on a shared machine: compare them within one run
only). ``--base SRC`` adds a run of the defaults of another checkout (its ``src``). Writes
bench/results/residue.json (``--output``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, gram_set, jaccard_sets, run_header, similar_pairs, write_json  # noqa: E402
from corpora import mail_corpus, reference_corpus  # noqa: E402

THRESHOLD = 0.8
WORDS = re.compile(r"\w+")
FAR_BELOW = 0.75  # false removals this far under the threshold are counted apart (a word definition moves J by less)
GENERATORS = {"reference": reference_corpus, "mail": mail_corpus}


def run_neardup(path: Path, out: Path, extra, pythonpath: str) -> dict:
    import pyarrow.parquet as pq
    cmd = [sys.executable, "-m", "neardup", "dedup", str(path), "--output", str(out), "--id-column", "id",
           "--quiet", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=pythonpath), capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"neardup failed ({proc.returncode}): {proc.stderr[-2000:]}")
    t = pq.read_table(out / "removed.parquet", columns=["id", "representative"])
    removed = np.array([int(x) for x in t.column("id").to_pylist()], np.int64)
    rep = np.array([int(x) if x is not None else -1 for x in t.column("representative").to_pylist()], np.int64)
    stats = json.loads((out / "stats.json").read_text())
    return {"removed": removed, "representative": rep, "seconds": round(seconds, 2),
            "command": " ".join(shlex.quote(c) for c in cmd), "counts": stats.get("counts", stats)}


TRUTH_VERSION = 1  # of the generators and the truth file: bump when either changes


def truth(name: str, texts, n_docs: int, seed: int, log=print):
    """(a, b, J) of every pair with J >= THRESHOLD, from bench/data/ when computed before."""
    path = DATA_DIR / f"residue_{name}_{n_docs}_s{seed}.truth.npz"
    if path.exists():
        with np.load(path) as z:
            if int(z["version"]) == TRUTH_VERSION:
                log(f"  truth from {path}")
                return z["a"], z["b"], z["j"], 0.0
    t0 = time.perf_counter()
    a, b, j, _ = similar_pairs(texts, THRESHOLD)
    seconds = time.perf_counter() - t0
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    np.savez(path, a=a, b=b, j=j, version=TRUTH_VERSION)
    return a, b, j, seconds


def as_words(text: str) -> str:
    """The text as its ``\\w+`` words, ``_`` written ``q`` (no generated word has a q): neardup's
    words of it are then the grading's words, one for one, so the J of every pair is the same
    for both and what is left is the search's doing, not the word definition's."""
    return " ".join(w.replace("_", "q") for w in WORDS.findall(text))


def grade(texts, a, b, j, removed, rep) -> dict:
    n = len(texts)
    kept = np.ones(n, bool)
    kept[removed] = False
    residual = kept[a] & kept[b]
    partners = {}
    for x, y in zip(a.tolist(), b.tolist()):
        partners.setdefault(x, []).append(y)
        partners.setdefault(y, []).append(x)
    false = far = 0
    for d, r in zip(removed.tolist(), rep.tolist()):
        j_rep = jaccard_sets(gram_set(texts[d]), gram_set(texts[r])) if r >= 0 else 0.0
        if j_rep >= THRESHOLD:
            continue
        if not any(kept[p] for p in partners.get(d, ())):
            false += 1
            far += j_rep < FAR_BELOW
    res_j = j[residual]
    return {"true_pairs": int(len(a)), "residual_pairs": int(residual.sum()),
            "residual_share": float(residual.sum() / len(a)) if len(a) else 0.0,
            "residual_max_j": float(res_j.max()) if len(res_j) else None,
            "removed": int(len(removed)), "false_removals": int(false),
            "false_removal_share": float(false / len(removed)) if len(removed) else 0.0,
            f"false_removals_below_{FAR_BELOW}": int(far)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--corpora", default="reference,mail")
    p.add_argument("--variant", action="append", default=None,
                   help="NAME=ARGS: one more neardup run with these options (default: defaults, and --verify none)")
    p.add_argument("--pythonpath", default=str(Path(__file__).resolve().parents[1] / "src"))
    p.add_argument("--base", default=None, metavar="SRC",
                   help="also run the defaults of another checkout's sources (PYTHONPATH), e.g. the one before a change")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "residue.json")
    args = p.parse_args(argv)
    variants = [v.split("=", 1) + [args.pythonpath] for v in (args.variant or ["defaults=", "verify none=--verify none"])]
    if args.base:
        variants += [[f"{prefix}base defaults", "", args.base] for prefix in
                     sorted({"words: " if v[0].startswith("words:") else "" for v in variants})]
    result = {**run_header(sys.argv), "threshold": THRESHOLD, "docs": args.docs, "seed": args.seed, "corpora": {}}
    with tempfile.TemporaryDirectory(prefix="residue-") as tmp:
        tmp = Path(tmp)
        warm = tmp / "warm.jsonl"  # an untimed run per checkout first: numba compiles on a first run
        warm.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(reference_corpus(300, 1))))
        for k, pythonpath in enumerate(sorted({v[2] for v in variants})):
            run_neardup(warm, tmp / f"warm-{k}", [], pythonpath)
        for name in args.corpora.split(","):
            texts = GENERATORS[name](args.docs, args.seed)
            path = tmp / f"{name}.jsonl"
            with open(path, "w", encoding="utf-8") as f:
                for i, t in enumerate(texts):
                    f.write(json.dumps({"id": i, "text": t}) + "\n")
            words_path = tmp / f"{name}.words.jsonl"
            with open(words_path, "w", encoding="utf-8") as f:
                for i, t in enumerate(texts):
                    f.write(json.dumps({"id": i, "text": as_words(t)}) + "\n")
            a, b, j, truth_s = truth(name, texts, args.docs, args.seed)
            entry = {"bytes": path.stat().st_size, "truth_seconds": round(truth_s, 1), "runs": {}}
            print(f"{name}: {len(texts):,} docs, {path.stat().st_size / 1e6:.1f} MB, {len(a):,} pairs >= {THRESHOLD} "
                  f"({truth_s:.0f} s)", flush=True)
            for vname, extra, pythonpath in variants:
                out = tmp / f"out-{name}-{len(entry['runs'])}"
                r = run_neardup(words_path if vname.startswith("words:") else path, out, shlex.split(extra), pythonpath)
                g = grade(texts, a, b, j, r["removed"], r["representative"])
                c = r["counts"]
                entry["runs"][vname] = {"args": extra, "pythonpath": pythonpath, "seconds": r["seconds"],
                                        "command": r["command"], **g,
                                        **{k: c.get(k) for k in ("candidate_pairs", "verified_pairs", "anchor_rounds",
                                                                  "truncated_buckets", "buckets") if k in c}}
                print(f"  {vname:<24} residual {g['residual_pairs']:>6,} ({g['residual_share']:.3%}, max J "
                      f"{g['residual_max_j'] or 0:.3f})  false removals {g['false_removals']:>5,} of "
                      f"{g['removed']:,} ({g['false_removal_share']:.3%})  {r['seconds']:.1f} s", flush=True)
            result["corpora"][name] = entry
    result["load_average_at_end"] = list(os.getloadavg())
    write_json(args.output, result)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
