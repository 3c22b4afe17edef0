"""The kept/ copy of one large JSONL file (what the write stage does for 1M documents), source
trees alternating in fresh processes: CPU seconds of the process, of its main thread (reading
the input to find the kept lines) and of each thread that copies ranges (``RangeCopier.copy``),
and wall seconds. On a loaded machine the wall is noise; the threads' CPU seconds give the
stage's floor on idle cores, ``max(longest thread, CPU / cores)``, which is printed beside.
The first round's outputs are compared byte for byte.

    python bench/write_threads.py --input bench/data/synth_1000000_s0.jsonl \\
        --trees /work/main/src src --repeat 3 --out bench/results/write_threads_1m.json
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, os, resource, sys, threading, time
import numpy as np
from neardup import io as nio
from neardup.io import kernel_copy
path, out = sys.argv[1], sys.argv[2]
src = nio.discover([path])[0]
lines = sum(1 for _ in open(path, "rb"))
keep = np.flatnonzero(np.random.default_rng(0).random(lines) > 0.1)
per_thread = {}
real = kernel_copy.RangeCopier.copy
def timed(self, *a, **k):
    t = time.thread_time()
    try:
        return real(self, *a, **k)
    finally:
        name = threading.current_thread().name
        per_thread[name] = per_thread.get(name, 0.0) + time.thread_time() - t
kernel_copy.RangeCopier.copy = timed
r0 = resource.getrusage(resource.RUSAGE_SELF)
m0, w0 = time.thread_time(), time.perf_counter()
n = nio.write_kept(src, keep, out)
wall, main = time.perf_counter() - w0, time.thread_time() - m0
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print("WRITE " + json.dumps({"kept": int(n), "bytes": os.path.getsize(out), "cpu": round(cpu, 3),
                             "wall": round(wall, 3), "main_thread": round(main, 3),
                             "copy_threads": {k: round(v, 3) for k, v in sorted(per_thread.items())}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees to compare (PYTHONPATH)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default="bench/results/write_threads.json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="write-threads-")
    runs, firsts = [], []
    for i in range(a.repeat):
        for t, tree in enumerate(a.trees):
            out = os.path.join(tmp, f"kept-{t}-{i}.jsonl")
            load = open("/proc/loadavg").read().split()[:3]
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
            p = subprocess.run([sys.executable, "-c", _CHILD, a.input, out], env=env, check=True,
                               capture_output=True, text=True)
            rec = json.loads(next(x for x in p.stdout.splitlines() if x.startswith("WRITE "))[len("WRITE "):])
            longest = max([rec["main_thread"], *rec["copy_threads"].values()])
            rec.update(tree=tree, repeat=i, load_before=load,
                       idle_floor=round(max(longest, rec["cpu"] / a.cores), 3))
            runs.append(rec)
            print(f"{tree:28s} cpu {rec['cpu']:6.3f} main {rec['main_thread']:6.3f} copy "
                  f"{rec['copy_threads']} floor {rec['idle_floor']:6.3f} wall {rec['wall']:6.3f} "
                  f"load {' '.join(load)}", flush=True)
            if i == 0:
                firsts.append(out)
            else:
                os.remove(out)
    same = all(filecmp.cmp(firsts[0], f, shallow=False) for f in firsts[1:])
    for f in firsts:
        os.remove(f)
    os.rmdir(tmp)
    print("same bytes:", same)
    with open(a.out, "w") as f:
        json.dump({"input": a.input, "command": " ".join(sys.argv), "cores": a.cores, "same_bytes": same,
                   "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
