"""The Elias-Fano coding of the read stage's fingerprints (``neardup.kernels.eliasfano``), two
source trees alternating, each in a fresh process: CPU seconds (``time.process_time``) of
``encode`` over the fingerprints of the first ``--docs`` documents of a corpus (min and median of
``--repeat`` passes, the compiled coder only and the whole call with its output array), and a
hash of the codes (each tree's the same in every run) and of the values they hold, sorted by
document (the same for every tree: the codes' order within a bucket changed with ef18).

    python bench/encode_ab.py --input bench/data/synth_100000_s0.jsonl --docs 30000 \\
        --trees /work/main/src src --out bench/results/encode_ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_MAKE = r"""
import json, sys, numpy as np, pyarrow as pa
from neardup.config import Config
from neardup.kernels.minhash import MinHasher
texts = [json.loads(l)["text"] for _, l in zip(range(int(sys.argv[2])), open(sys.argv[1]))]
_, off, fp = MinHasher.from_config(Config()).signatures_and_fingerprints(pa.array(texts, pa.large_string()))
np.save(sys.argv[3] + "/off.npy", off); np.save(sys.argv[3] + "/fp.npy", fp)
"""

_TIME = r"""
import hashlib, json, sys, time, numpy as np
from neardup.kernels import eliasfano as E
off = np.load(sys.argv[1] + "/off.npy"); fp = np.load(sys.argv[1] + "/fp.npy")
sizes = E.code_bytes(np.diff(off)); starts = np.zeros(len(sizes) + 1, np.int64); np.cumsum(sizes, out=starts[1:])
out = np.empty(starts[-1], np.uint8)
serial = getattr(E, "_encode_kernel", None)  # a tree before encode became encode_parts over the CSR
counts, target = np.diff(off), np.arange(len(off) - 1, dtype=np.int64)
def coder():
    serial(off, fp, starts, out) if serial is not None else E.encode_parts(fp, off[:-1], counts, target, starts, out)
coder()
k, w = [], []
for _ in range(int(sys.argv[2])):
    s = time.process_time(); coder(); k.append(time.process_time() - s)
    s = time.process_time(); codes = E.encode(off, fp); w.append(time.process_time() - s)
o, v = E.decode(starts[:-1], codes, counts)  # the values each code holds, in whatever order it keeps them
v = v[np.lexsort((v, np.repeat(np.arange(len(counts)), counts)))]
print(json.dumps({"kernel_s": [round(x, 4) for x in k], "encode_s": [round(x, 4) for x in w],
                  "bytes": int(len(codes)), "sha256": hashlib.sha256(codes.tobytes()).hexdigest(),
                  "values_sha256": hashlib.sha256(v.tobytes()).hexdigest()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--docs", type=int, default=30000)
    ap.add_argument("--trees", nargs="+", default=["src"])
    ap.add_argument("--repeat", type=int, default=5, help="passes a process")
    ap.add_argument("--rounds", type=int, default=3, help="processes a tree, the trees alternating")
    ap.add_argument("--out", default="bench/results/encode_ab.json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="encode-ab-")
    env0 = dict(os.environ)
    subprocess.run([sys.executable, "-c", _MAKE, a.input, str(a.docs), tmp], check=True,
                   env=dict(env0, PYTHONPATH=os.path.abspath(a.trees[0])))
    runs = []
    for r in range(a.rounds):
        for tree in a.trees:
            load = open("/proc/loadavg").read().split()[:3]
            p = subprocess.run([sys.executable, "-c", _TIME, tmp, str(a.repeat)], check=True, capture_output=True,
                               text=True, env=dict(env0, PYTHONPATH=os.path.abspath(tree)))
            rec = json.loads(p.stdout.strip().splitlines()[-1])
            rec.update(tree=tree, round=r, load_before=load)
            runs.append(rec)
            print(f"{tree:24s} kernel min {min(rec['kernel_s']):.4f} encode min {min(rec['encode_s']):.4f} "
                  f"sha {rec['sha256'][:12]} load {' '.join(load)}", flush=True)
    # a tree's codes are the same in each of its runs; two trees' codes may differ in their order
    # within a bucket (ascending since ef18, text order before), never in the values they hold
    assert all(len({r["sha256"] for r in runs if r["tree"] == t}) == 1 for t in a.trees), "a tree's codes differ between runs"
    assert len({r["values_sha256"] for r in runs}) == 1, "the trees' codes hold different values"
    with open(a.out, "w") as f:
        json.dump({"input": a.input, "docs": a.docs, "command": " ".join(sys.argv), "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
