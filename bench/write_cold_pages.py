"""The kept lines' copy of one large JSONL file by ``RangeCopier.copy`` alone (the write stage's
copy at 1M documents: the ranges of the lines a finished run kept, from its removed.parquet),
source trees alternating in fresh processes, in two states of the machine's free memory:
``none`` (as it is) and ``cold`` (3 GiB of anonymous memory filled and freed, then 8 s asleep,
so that on a virtual machine with free page reporting the host has taken the freed memory back
and backs each page again at its first write). Wall seconds, process CPU, the copying thread's
CPU (the reader, for the piped copy) and the rest (~ the writing thread). The first output is
compared with the run's kept file.

    python bench/write_cold_pages.py bench/data/synth_1000000_s0.jsonl --run /tmp/w/o \\
        --trees /work/wt-base51/src src --repeat 5 --out bench/results/write_cold_pages_1m.json
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

_CHILD = r"""
import json, os, sys, time
import numpy as np
import neardup.io.kernel_copy as KC
path, ranges, out, pre = sys.argv[1:5]
s, e = np.load(ranges + ".starts.npy"), np.load(ranges + ".ends.npy")
fin = os.open(path, os.O_RDONLY)
fout = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
KC._compiled_fill(), KC._compiled_write(), KC._compiled_loop()
if pre == "cold":
    junk = np.empty(3 << 30, np.uint8)
    junk.fill(1)
    del junk
    time.sleep(8)
w0, p0, c0 = time.perf_counter(), os.times(), time.thread_time()
KC.RangeCopier(fin, fout, "x").copy(s, e)
reader, wall, p1 = time.thread_time() - c0, time.perf_counter() - w0, os.times()
os.close(fout)
os.close(fin)
cpu = p1.user + p1.system - p0.user - p0.system
print("COPY " + json.dumps({"wall_s": round(wall, 3), "process_cpu_s": round(cpu, 3), "reader_cpu_s": round(reader, 3),
                            "rest_cpu_s": round(cpu - reader, 3), "bytes": os.path.getsize(out)}))
"""


def kept_ranges(path: str, run: str):
    import mmap

    import pyarrow.parquet as pq
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        nl = np.flatnonzero(np.frombuffer(m, np.uint8) == 10)
    starts, ends = np.concatenate([[0], nl[:-1] + 1]), nl + 1
    removed = pq.read_table(os.path.join(run, "removed.parquet"), columns=["row"]).column("row").to_numpy()
    keep = np.ones(len(starts), bool)
    keep[removed] = False
    s, e = starts[keep], ends[keep]
    first = np.concatenate([[True], s[1:] != e[:-1]])  # a line that starts where the one before ends: one range
    return s[first], np.append(e[np.flatnonzero(first)[1:] - 1], e[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--run", required=True, help="the output folder of a finished run of the corpus")
    ap.add_argument("--trees", nargs="+", default=["src"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--states", default="none,cold")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    kept = os.path.join(a.run, "kept", os.path.basename(a.corpus))
    runs = {f"{t} {p}": [] for t in a.trees for p in a.states.split(",")}
    with tempfile.TemporaryDirectory(prefix="neardup-cold-pages-") as tmp:
        s, e = kept_ranges(a.corpus, a.run)
        np.save(os.path.join(tmp, "r.starts.npy"), s)
        np.save(os.path.join(tmp, "r.ends.npy"), e)
        out = os.path.join(tmp, "out")
        for k in range(a.repeat):
            for pre in a.states.split(","):
                for t in (a.trees if k % 2 == 0 else a.trees[::-1]):
                    load = float(open("/proc/loadavg").read().split()[0])
                    p = subprocess.run([sys.executable, "-c", _CHILD, a.corpus, os.path.join(tmp, "r"), out, pre],
                                       env={**os.environ, "PYTHONPATH": os.path.abspath(t)}, capture_output=True, text=True)
                    line = next((x for x in p.stdout.splitlines() if x.startswith("COPY ")), None)
                    if line is None:
                        sys.exit(f"{t}: no COPY line\n{p.stderr[-2000:]}")
                    r = {**json.loads(line[5:]), "load": load}
                    if k == 0 and os.path.exists(kept):
                        r["same_bytes"] = filecmp.cmp(out, kept, shallow=False)
                    os.unlink(out)
                    runs[f"{t} {pre}"].append(r)
                    print(t, pre, json.dumps(r), flush=True)
    keys = ("wall_s", "process_cpu_s", "reader_cpu_s", "rest_cpu_s")
    median = {n: {k: sorted(r[k] for r in rs)[len(rs) // 2] for k in keys} for n, rs in runs.items()}
    print(json.dumps({"median": median}, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"command": " ".join(sys.argv), "corpus": a.corpus, "runs": runs, "median": median}, f, indent=1)


if __name__ == "__main__":
    main()
