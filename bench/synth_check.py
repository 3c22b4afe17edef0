"""Measure the calibration of neardup.testing.synth: planted Jaccard against exact word-5-gram Jaccard.

    .venv/bin/python bench/synth_check.py [--docs 9000] [--output bench/results/synth_calibration.json]

Three measurements, all with exact 5-gram sets in plain Python:
  1. generate_corpus copies: |exact J - target| and |exact J - design| (mean, max, bias, by tenth
     of the range), and the generation speed.
  2. Why runs, not scattered substitutions: copies made by replacing each word independently with
     probability p, against the usual approximation J ~ q / (2 - q), q = (1 - p)^5.
  3. One run of L replaced words in a document of G 5-grams: exact J against (G - L - 4)/(G + L + 4).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402


def grams(words):
    return set(zip(*[words[i:] for i in range(5)]))


def jac(a, b):
    return len(a & b) / len(a | b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=9000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "synth_calibration.json")
    args = ap.parse_args(argv)
    from neardup.testing.synth import generate_corpus

    result = run_header(sys.argv)
    t0 = time.perf_counter()
    c = generate_corpus(args.docs, seed=args.seed)
    gen_s = time.perf_counter() - t0
    dup = np.flatnonzero(c.is_duplicate)
    exact = np.array([jac(grams(c.texts[i].split()), grams(c.texts[c.cluster_of[i]].split())) for i in dup])
    target, design = c.target_jaccard[dup], c.design_jaccard[dup]
    err_t, err_d = exact - target, exact - design
    edges = np.linspace(0.5, 0.95, 10)
    bins = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (target >= lo) & (target < hi)
        bins.append({"target_from": round(lo, 3), "target_to": round(hi, 3), "copies": int(m.sum()),
                     "mean_exact": float(exact[m].mean()) if m.any() else None,
                     "mean_abs_error": float(np.abs(err_t[m]).mean()) if m.any() else None})
    result["generate_corpus"] = {
        "docs": args.docs, "copies": int(len(dup)), "generate_s": gen_s,
        "docs_per_s": args.docs / gen_s,
        "mean_doc_bytes": float(np.mean([len(t) for t in c.texts])),
        "vs_target": {"mean_abs_error": float(np.abs(err_t).mean()), "max_abs_error": float(np.abs(err_t).max()),
                      "bias": float(err_t.mean())},
        "vs_design": {"mean_abs_error": float(np.abs(err_d).mean()), "max_abs_error": float(np.abs(err_d).max()),
                      "bias": float(err_d.mean()), "share_exactly_equal": float(np.mean(np.abs(err_d) < 1e-12))},
        "exact_range": [float(exact.min()), float(exact.max())],
        "by_target": bins,
    }

    # Scattered single-word substitutions.
    rng = np.random.default_rng(args.seed)
    words = [w for t in c.texts[:200] for w in t.split()]
    vocab = np.array(sorted(set(words)), dtype=object)
    scattered = []
    for p in (0.01, 0.02, 0.03, 0.05, 0.08, 0.12):
        js = []
        for d in range(100):
            a = c.texts[d].split()
            mask = rng.random(len(a)) < p
            b = [vocab[rng.integers(len(vocab))] if m else w for w, m in zip(a, mask)]
            js.append(jac(grams(a), grams(b)))
        q = (1 - p) ** 5
        scattered.append({"p": p, "mean_exact": float(np.mean(js)), "formula_q_over_2_minus_q": q / (2 - q),
                          "sd_exact": float(np.std(js))})
    result["scattered_substitutions"] = scattered

    # One run of L replaced words.
    runs = []
    a = c.texts[0].split()
    G = len(a) - 4
    for L in (1, 4, 8, 16, 32):
        s = 50
        b = a[:s] + [f"zz{k}" for k in range(L)] + a[s + L:]
        runs.append({"L": L, "grams": G, "exact": jac(grams(a), grams(b)),
                     "formula": (G - L - 4) / (G + L + 4)})
    result["single_run"] = runs
    write_json(args.output, result)

    g = result["generate_corpus"]
    print(f"generate_corpus: {args.docs} docs in {gen_s:.2f} s ({g['docs_per_s']:,.0f} docs/s), "
          f"{g['mean_doc_bytes']:.0f} bytes/doc")
    print(f"  {len(dup)} copies: |J - target| mean {g['vs_target']['mean_abs_error']:.4f} "
          f"max {g['vs_target']['max_abs_error']:.4f} bias {g['vs_target']['bias']:+.4f}; "
          f"|J - design| mean {g['vs_design']['mean_abs_error']:.5f}")
    print("  scattered substitutions p: exact vs q/(2-q): " +
          ", ".join(f"{s['p']}: {s['mean_exact']:.3f}/{s['formula_q_over_2_minus_q']:.3f}" for s in scattered))
    print("  one run of L words: exact vs formula: " +
          ", ".join(f"{r['L']}: {r['exact']:.4f}/{r['formula']:.4f}" for r in runs))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
