"""Raw text -> MinHash signatures (k = 128, word 5-grams): neardup against datasketch and rensa.

    .venv/bin/python bench/signatures.py                   # 100k synthetic ~2 KB documents
    .venv/bin/python bench/signatures.py --docs 20000 --peer-docs 5000

Every tool gets the same synthetic documents (neardup.testing.synth, seed 0). Peers run on the first
``--peer-docs`` of them (all by default); neardup runs on that same prefix, which the ratios use,
and on all ``--docs``. Each tool is warmed up on a few documents first (numba compiles on its
first call). Timed: from a Python list of str (and for neardup also from a pyarrow large_string
array, whose construction is timed apart) to an (n, 128) signature matrix; for the peers this
includes the Python shingling they need (see bench/peers.py), reported apart as ``shingle_s``.

Also measured: estimator agreement, the mean |share of equal signature values - exact Jaccard|
over planted near-duplicate pairs, for every tool (expected ~0.03 for k = 128: the standard
deviation of the estimate is sqrt(J(1 - J)/k)).

Fresh-process costs (``first_call`` in the JSON; ``--first-call-only`` runs just this part and
writes bench/results/signatures.first-call.json): each case runs ``--first-call-runs`` times in a
new Python process, the cases in turn, and the medians are reported. A process times
``import neardup``, loading ``--first-call-docs`` texts from a JSONL file, the first
``MinHasher.signatures`` call on them and a second call on the same list. Cases:

  after-load  import neardup, then load the texts (pyarrow.json), then the calls: a user who
              reads data after importing (the background warm-up started after the import
              overlaps with the reading)
  immediate   the texts are loaded first, then import neardup and call at once (nothing to
              overlap with: the first call waits for the warm-up)
  after-wait  import neardup, wait for its warm-up to end (neardup.warmup_wait, timed apart), then
              load and call: what the first call costs when the warm-up was fully hidden

each with the warm-up on (``neardup.warmup()`` called right after the import) and off. ``--src``
runs the processes against another checkout's ``src`` (an A/B against an older commit: one without
``neardup.warmup`` runs without it).

Writes bench/results/signatures.json (``--output``) and prints a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
from common import RESULTS_DIR, fmt_rate, gram_set, jaccard_sets, run_header, write_json  # noqa: E402

DEFAULT_TOOLS = ["datasketch", "datasketch-update", "rensa", "rensa-update", "rensa-cminhash",
                 "rensa-rho", "neardup"]


def _neardup_hasher(workers: Optional[int] = None):
    try:
        from neardup.kernels.minhash import MinHasher
    except ImportError as exc:
        return None, f"neardup.kernels.minhash.MinHasher is not importable yet ({exc}); neardup skipped"
    try:
        return MinHasher(num_perm=peers.NUM_PERM, ngram=5, seed=peers.SEED, workers=workers), None
    except TypeError:
        if workers is not None:
            return None, "MinHasher has no workers option; single-thread run skipped"
        return MinHasher(num_perm=peers.NUM_PERM, ngram=5, seed=peers.SEED), None


def _time(fn, repeat: int):
    best = None
    out = None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return out, best


# One fresh process: prints one JSON line of timings. argv: mode, jsonl path, warm-up (on/off).
_FIRST_CALL_CHILD = r"""
import json, sys, time
mode, path, warmup = sys.argv[1], sys.argv[2], sys.argv[3] == "on"
def load():
    import pyarrow.json as pj
    return pj.read_json(path).column("text").to_pylist()
out = {}
if mode == "immediate":
    texts = load()
t0 = time.perf_counter()
import neardup
from neardup.kernels.minhash import MinHasher
if warmup and hasattr(neardup, "warmup"):
    neardup.warmup()
t1 = time.perf_counter()
out["import_s"] = t1 - t0
if mode == "after-wait" and hasattr(neardup, "warmup_wait"):
    neardup.warmup_wait()
out["wait_s"] = time.perf_counter() - t1 if mode == "after-wait" else None
t1 = time.perf_counter()
if mode in ("after-load", "after-wait"):
    texts = load()
out["load_s"] = time.perf_counter() - t1 if mode != "immediate" else None
h = MinHasher(num_perm=128, ngram=5, seed=1)
t2 = time.perf_counter()
h.signatures(texts)
t3 = time.perf_counter()
h.signatures(texts)
t4 = time.perf_counter()
out.update(first_s=t3 - t2, second_s=t4 - t3, ratio=(t3 - t2) / (t4 - t3),
           warmup_log=[list(x) for x in getattr(neardup, "_warmup_log", [])],
           modules={m: m in sys.modules for m in ("pandas", "scipy.linalg")})
print(json.dumps(out))
"""


def _import_only_child(src: str, warmup: bool, runs: int) -> dict:
    code = ("import time; t = time.perf_counter(); import neardup; "
            + ("getattr(neardup, 'warmup', lambda: None)(); " if warmup else "") + "print(time.perf_counter() - t)")
    env = dict(os.environ, PYTHONPATH=src)
    ts = [float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                               check=True).stdout) for _ in range(runs)]
    return {"median_s": statistics.median(ts), "runs_s": ts}


def first_call_study(texts: List[str], runs: int, src: str) -> dict:
    """Fresh-process timings (see the module's docstring), medians over ``runs`` processes."""
    cases = [(mode, warmup) for mode in ("after-load", "immediate") for warmup in (True, False)]
    cases.append(("after-wait", True))
    raw: Dict[str, List[dict]] = {f"{m}/warmup={'on' if w else 'off'}": [] for m, w in cases}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "texts.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")
        env0 = dict(os.environ, PYTHONPATH=src)
        # one untimed process first: numba's disk cache for this source may be empty
        subprocess.run([sys.executable, "-c", _FIRST_CALL_CHILD, "after-load", path, "off"], env=env0,
                       check=True, capture_output=True)
        for r in range(runs):
            for mode, warmup in cases:
                key = f"{mode}/warmup={'on' if warmup else 'off'}"
                proc = subprocess.run([sys.executable, "-c", _FIRST_CALL_CHILD, mode, path, "on" if warmup else "off"],
                                      env=env0, capture_output=True, text=True, check=True)
                row = json.loads(proc.stdout)
                raw[key].append(row)
                print(f"  run {r + 1}/{runs} {key}: first {row['first_s']:.3f} s, second {row['second_s']:.3f} s",
                      flush=True)

    def med(rows, key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    summary = {}
    for name, rows in raw.items():
        summary[name] = {"import_s": med(rows, "import_s"), "wait_s": med(rows, "wait_s"),
                         "load_s": med(rows, "load_s"),
                         "first_s": med(rows, "first_s"), "second_s": med(rows, "second_s"),
                         "first_over_second": med(rows, "ratio"),
                         "first_minus_second_s": statistics.median(r["first_s"] - r["second_s"] for r in rows),
                         "runs": rows}
    return {"docs": len(texts), "runs_per_case": runs, "src": src,
            "note": "medians over fresh processes; first_over_second is the median of each process's "
                    "ratio; the second call is on the same list of str",
            "import_neardup": {"warmup_on": _import_only_child(src, True, runs),
                               "warmup_off": _import_only_child(src, False, runs)},
            "cases": summary}


def print_first_call(fc: dict) -> None:
    print(f"\nfresh process, {fc['docs']} documents, median of {fc['runs_per_case']} processes each:")
    print(f"{'case':<28} {'import':>7} {'load':>7} {'first':>7} {'second':>7} {'ratio':>6}")
    for name, c in fc["cases"].items():
        load = "" if c["load_s"] is None else f"{c['load_s']:.3f}"
        print(f"{name:<28} {c['import_s']:>7.3f} {load:>7} {c['first_s']:>7.3f} {c['second_s']:>7.3f} "
              f"{c['first_over_second']:>6.2f}")
    for k, v in fc["import_neardup"].items():
        print(f"  import neardup alone, {k}: {v['median_s']:.3f} s")


def agreement(sig: np.ndarray, pairs: np.ndarray, exact: np.ndarray) -> dict:
    est = (sig[pairs[:, 0]] == sig[pairs[:, 1]]).mean(axis=1)
    err = est - exact
    expected_sd = np.sqrt(exact * (1 - exact) / sig.shape[1])
    return {"pairs": int(len(pairs)), "mean_abs_error": float(np.abs(err).mean()),
            "bias": float(err.mean()), "rmse": float(np.sqrt((err ** 2).mean())),
            "rmse_expected_for_k": float(np.sqrt((expected_sd ** 2).mean()))}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=100_000, help="documents for neardup (default 100000)")
    ap.add_argument("--peer-docs", type=int, default=None,
                    help="documents for the peers, a prefix of --docs (default: all)")
    ap.add_argument("--tools", default=",".join(DEFAULT_TOOLS),
                    help=f"comma-separated subset of {','.join(DEFAULT_TOOLS)}")
    ap.add_argument("--seed", type=int, default=0, help="corpus seed")
    ap.add_argument("--pairs", type=int, default=2000, help="near-duplicate pairs for the agreement check")
    ap.add_argument("--repeat", type=int, default=3, help="neardup timings: best of N (peers run once)")
    ap.add_argument("--output", type=Path, default=None,
                    help="default bench/results/signatures.json (signatures.first-call.json with "
                         "--first-call-only)")
    ap.add_argument("--first-call-docs", type=int, default=20_000,
                    help="documents for the fresh-process study (default 20000; 0 skips it)")
    ap.add_argument("--first-call-runs", type=int, default=5, help="fresh processes per case (default 5)")
    ap.add_argument("--first-call-only", action="store_true", help="only the fresh-process study")
    ap.add_argument("--src", default=str(Path(__file__).resolve().parent.parent / "src"),
                    help="the neardup source folder the fresh processes import (default: this checkout's)")
    args = ap.parse_args(argv)
    if args.output is None:
        args.output = RESULTS_DIR / ("signatures.first-call.json" if args.first_call_only else "signatures.json")
    if args.first_call_only:
        result = run_header(sys.argv)
        from neardup.testing.synth import generate_corpus
        print(f"generating {args.first_call_docs} documents ...", flush=True)
        corpus = generate_corpus(args.first_call_docs, seed=args.seed)
        result["corpus"] = {"generator": "neardup.testing.synth.generate_corpus", "n_docs": args.first_call_docs,
                            "seed": args.seed}
        result["first_call"] = first_call_study(corpus.texts, args.first_call_runs, args.src)
        write_json(args.output, result)
        print_first_call(result["first_call"])
        print(f"wrote {args.output}")
        return 0
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = set(tools) - set(DEFAULT_TOOLS)
    if unknown:
        ap.error(f"unknown tools: {sorted(unknown)}")
    peer_docs = min(args.docs, args.peer_docs or args.docs)

    result: Dict = run_header(sys.argv)
    from neardup.testing.synth import generate_corpus
    print(f"generating {args.docs} documents ...", flush=True)
    t0 = time.perf_counter()
    corpus = generate_corpus(args.docs, seed=args.seed)
    texts = corpus.texts
    prefix = texts[:peer_docs]
    nbytes_all = sum(len(t.encode("utf-8")) for t in texts)
    nbytes_prefix = sum(len(t.encode("utf-8")) for t in prefix)
    result["corpus"] = {"generator": "neardup.testing.synth.generate_corpus", "n_docs": args.docs,
                        "peer_docs": peer_docs, "seed": args.seed, "params": corpus.params,
                        "text_bytes": nbytes_all, "text_bytes_peer_prefix": nbytes_prefix,
                        "mean_doc_bytes": nbytes_all / max(1, args.docs),
                        "generate_s": time.perf_counter() - t0}

    # Planted (copy, original) pairs inside the prefix, with their exact Jaccard.
    dup = np.flatnonzero(corpus.is_duplicate[:peer_docs])
    dup = dup[corpus.cluster_of[dup] < peer_docs][: args.pairs]
    pairs = np.stack([dup, corpus.cluster_of[dup]], axis=1) if len(dup) else np.zeros((0, 2), np.int64)
    exact = np.array([jaccard_sets(gram_set(texts[a]), gram_set(texts[b])) for a, b in pairs])

    runs: Dict[str, dict] = {}
    skipped: Dict[str, str] = {}
    for tool in tools:
        if tool == "neardup":
            continue
        print(f"{tool}: {peer_docs} documents ...", flush=True)
        peers.signatures(tool, texts[:50])                       # warm-up
        gc.collect()
        sig, t = peers.signatures(tool, prefix)
        runs[tool] = {"description": peers.SIGNATURES[tool][1], "docs": peer_docs,
                      "seconds": t["total_s"], "docs_per_s": peer_docs / t["total_s"],
                      "mb_per_s": nbytes_prefix / 1e6 / t["total_s"],
                      "shingle_s": t["shingle_s"], "sketch_s": t["sketch_s"],
                      "sketch_only_docs_per_s": peer_docs / t["sketch_s"],
                      "full_set_minhash": tool in peers.FULL_SET}
        if len(pairs):
            runs[tool]["agreement"] = agreement(sig, pairs, exact)
        del sig

    if "neardup" in tools:
        hasher, why = _neardup_hasher()
        if hasher is None:
            skipped["neardup"] = why
            print(f"SKIPPED: {why}", flush=True)
        else:
            import pyarrow as pa
            print("neardup: warm-up (compiles on first call) ...", flush=True)
            t0 = time.perf_counter()
            hasher.signatures(texts[:500])
            hasher.signatures(pa.array(texts[:500], pa.large_string()))
            warm_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            arrow_prefix = pa.array(prefix, pa.large_string())
            arrow_prefix_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            arrow_all = pa.array(texts, pa.large_string()) if peer_docs < args.docs else arrow_prefix
            arrow_all_s = time.perf_counter() - t0 if peer_docs < args.docs else arrow_prefix_s
            cases = [("neardup", prefix, peer_docs, nbytes_prefix, None, "list of str, peer prefix"),
                     ("neardup-arrow", arrow_prefix, peer_docs, nbytes_prefix, arrow_prefix_s,
                      "pyarrow large_string array, peer prefix")]
            if peer_docs < args.docs:
                cases += [("neardup-all", texts, args.docs, nbytes_all, None, "list of str, all documents"),
                          ("neardup-arrow-all", arrow_all, args.docs, nbytes_all, arrow_all_s,
                           "pyarrow large_string array, all documents")]
            for name, data, n, nb, conv_s, desc in cases:
                print(f"{name}: {n} documents ...", flush=True)
                sig, dt = _time(lambda: hasher.signatures(data), args.repeat)
                runs[name] = {"description": f"neardup MinHasher.signatures, {desc}", "docs": n,
                              "seconds": dt, "docs_per_s": n / dt, "mb_per_s": nb / 1e6 / dt,
                              "repeat": args.repeat, "warmup_s": warm_s, "full_set_minhash": True}
                if conv_s is not None:
                    runs[name]["arrow_conversion_s"] = conv_s
                if name in ("neardup", "neardup-arrow") and len(pairs):
                    runs[name]["agreement"] = agreement(sig, pairs, exact)
                del sig
            single, why1 = _neardup_hasher(workers=1)
            if single is not None:
                print("neardup-1thread ...", flush=True)
                single.signatures(texts[:200])
                sig, dt = _time(lambda: single.signatures(prefix), args.repeat)
                runs["neardup-1thread"] = {"description": "neardup MinHasher(workers=1), list of str, "
                                                          "peer prefix", "docs": peer_docs, "seconds": dt,
                                           "docs_per_s": peer_docs / dt, "mb_per_s": nbytes_prefix / 1e6 / dt,
                                           "repeat": args.repeat, "full_set_minhash": True}

    result["runs"] = runs
    result["skipped"] = skipped
    if "neardup" in tools and args.first_call_docs and "neardup" not in skipped:
        print("neardup: fresh processes (first call against second) ...", flush=True)
        result["first_call"] = first_call_study(texts[:args.first_call_docs], args.first_call_runs, args.src)

    # Headline ratios on the same prefix: neardup against the fastest full-set variant of each peer.
    def fastest(prefix_name):
        cands = [k for k, v in runs.items() if (k == prefix_name or k.startswith(prefix_name + "-"))
                 and v.get("full_set_minhash")]
        return max(cands, key=lambda k: runs[k]["docs_per_s"]) if cands else None

    ratios = {}
    best_ds, best_rensa = fastest("datasketch"), fastest("rensa")
    for nd in ("neardup", "neardup-arrow", "neardup-1thread"):
        if nd not in runs:
            continue
        for peer_name, best in (("datasketch", best_ds), ("rensa", best_rensa), ("rensa-rho", "rensa-rho")):
            if best in runs:
                ratios[f"{nd}/{peer_name}"] = runs[nd]["docs_per_s"] / runs[best]["docs_per_s"]
    result["headline"] = {"datasketch_variant": best_ds, "rensa_variant": best_rensa,
                          "note": "ratios = docs/s of neardup over docs/s of the fastest full-set "
                                  "MinHash variant of each peer, same documents; rensa-rho is rensa's "
                                  "position-sampling sketch, listed separately",
                          "ratios": ratios}
    write_json(args.output, result)

    print()
    print(f"{'tool':<20} {'docs':>8} {'seconds':>9} {'docs/s':>10} {'MB/s':>8} {'|est-J|':>8}")
    for name, r in runs.items():
        agr = r.get("agreement", {}).get("mean_abs_error")
        print(f"{name:<20} {r['docs']:>8} {r['seconds']:>9.2f} {fmt_rate(r['docs_per_s']):>10} "
              f"{r['mb_per_s']:>8.1f} {'' if agr is None else f'{agr:.4f}':>8}")
    for k, v in ratios.items():
        print(f"  {k}: {v:.1f}x")
    for k, v in skipped.items():
        print(f"  skipped {k}: {v}")
    if "first_call" in result:
        print_first_call(result["first_call"])
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
