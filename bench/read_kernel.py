"""The read stage's fused kernel alone, on one thread (issue 32): ``neardup.kernels.minhash.process``
over the first ``--docs`` texts of a JSONL corpus held in memory (one Arrow array), each source
tree in a fresh process (``PYTHONPATH=TREE``, ``NUMBA_NUM_THREADS=1``), trees alternating.

    .venv/bin/python bench/read_kernel.py --trees /work/wt-base/src src --rounds 3 \\
        --input bench/data/synth_100000_s0.jsonl --out read_kernel.json

Each process times (best of ``--repeat`` calls, after one untimed call that loads or compiles the
kernels) what the kernel does with each part switched on in turn:

    words          tokens and shingle hashes only (no set, no signature)
    signatures     + the MinHash signatures
    read           what the read stage asks (``MinHasher.signatures_and_codes``): signatures and
                   each document's fingerprints as its Elias-Fano code
    encode         the Elias-Fano encoder's share of ``read`` (``eliasfano.encode_parts``, timed
                   around its calls)

and the rate over the texts' bytes. Results in bench/results/ (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from common import RESULTS_DIR, alternating, run_header, write_json

CHILD = r"""
import json, sys, time
import numba
import pyarrow.json as pj
from neardup.config import Shingling
from neardup.kernels import eliasfano as E
from neardup.kernels import minhash as M
path, docs, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
texts = pj.read_json(path).column("text").combine_chunks().slice(0, docs)
a, b = M.permutations(128, 42)
scratch = M.Scratch()
shingling = Shingling()
encoded = [0.0]
encode_parts = E.encode_parts
def timed_encode(*args):
    t = time.perf_counter()
    try:
        return encode_parts(*args)
    finally:
        encoded[0] += time.perf_counter() - t
M.eliasfano.encode_parts = timed_encode
MODES = {"words": dict(want_sets=False, want_sigs=False),
         "signatures": dict(want_sets=False, want_sigs=True),
         "read": dict(want_sets=True, want_sigs=True, fingerprints=True, codes=True, sort_sets=False)}
out = {"threads": numba.get_num_threads(), "bytes": texts.nbytes, "docs": len(texts)}
for name, kw in MODES.items():
    M.process(texts, shingling, seed=42, a=a, b=b, scratch=scratch, **kw)
    best, enc = None, None
    for _ in range(repeat):
        encoded[0] = 0.0
        t = time.perf_counter()
        M.process(texts, shingling, seed=42, a=a, b=b, scratch=scratch, **kw)
        s = time.perf_counter() - t
        if best is None or s < best:
            best, enc = s, encoded[0]
    out[name + "_ms"] = round(1000 * best, 2)
    if name == "read":
        out["encode_ms"] = round(1000 * enc, 2)
print("RESULT " + json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees (PYTHONPATH), alternating")
    ap.add_argument("--input", default="bench/data/synth_100000_s0.jsonl")
    ap.add_argument("--docs", type=int, default=40_000, help="the first DOCS texts of the input")
    ap.add_argument("--rounds", type=int, default=3, help="processes a tree, alternating")
    ap.add_argument("--repeat", type=int, default=5, help="timed calls a mode in each process (the best kept)")
    ap.add_argument("--out", default="read_kernel.json", help="file name in bench/results/")
    args = ap.parse_args()
    result = {**run_header(sys.argv), "input": args.input, "docs": args.docs, "runs": []}
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    for r, tree in alternating(args.trees, args.rounds, swap=False):
        env["PYTHONPATH"] = os.path.abspath(tree)
        done = subprocess.run([sys.executable, "-c", CHILD, args.input, str(args.docs), str(args.repeat)],
                              env=env, capture_output=True, text=True, check=True)
        line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
        run = {"tree": tree, "round": r, **json.loads(line[len("RESULT "):]),
               "load": os.getloadavg()[0]}
        result["runs"].append(run)
        mb = run["bytes"] / 1e6
        print(f"{tree:28s} words {run['words_ms']:7.1f}  signatures {run['signatures_ms']:7.1f}  "
              f"read {run['read_ms']:7.1f} ms ({mb / run['read_ms'] * 1000:5.0f} MB/s, encode "
              f"{run['encode_ms']:5.1f})  load {run['load']:.2f}", flush=True)
    summary = {}
    for tree in args.trees:
        mine = [x for x in result["runs"] if x["tree"] == tree]
        summary[tree] = {k: {"best": min(x[k] for x in mine), "median": statistics.median(x[k] for x in mine)}
                         for k in ("words_ms", "signatures_ms", "read_ms", "encode_ms")}
    result["summary"] = summary
    write_json(RESULTS_DIR / args.out, result)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
