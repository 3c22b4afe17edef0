"""Read speed of a folder of many small text files alone (``neardup.io.read_sources`` as the read
stage calls it: plain files gathered into batches, no hashing), for one or more source trees,
alternating, a fresh process each time (wall and CPU seconds of all its threads, the load average
beside each; three passes a process, the first with the files' discovery's page cache warm).

    python bench/files_read.py --dir /tmp/small5/corpus/files --trees src /work/main/src --repeat 3

Results: bench/results/files_read.json (with the command, the machine and the load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import RESULTS_DIR, run_header, write_json

_CHILD = r"""
import resource, sys, time
from neardup.io import discover
from neardup.io.reader import read_sources
srcs = discover([sys.argv[1]])
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
for _ in range(3):
    t, c = time.perf_counter(), cpu()
    n = sum(len(b) for b in read_sources(srcs, range(len(srcs)), group_files=True, batch_size=8192))
    print(n, round(time.perf_counter() - t, 3), round(cpu() - c, 3))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="a folder of text files (bench/small_files.py makes one)")
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees to compare (PYTHONPATH)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    runs = {tree: [] for tree in a.trees}
    for _ in range(a.repeat):
        for tree in a.trees:
            load = round(os.getloadavg()[0], 2)
            out = subprocess.run([sys.executable, "-c", _CHILD, a.dir], env=dict(os.environ, PYTHONPATH=tree),
                                 capture_output=True, text=True, check=True).stdout.split("\n")
            passes = [[float(x) for x in line.split()[1:]] for line in out if line]
            runs[tree].append({"load": load, "wall_s": [p[0] for p in passes], "cpu_s": [p[1] for p in passes]})
    best = {tree: {"wall_s": min(min(r["wall_s"]) for r in v), "cpu_s": min(min(r["cpu_s"]) for r in v)}
            for tree, v in runs.items()}
    write_json(RESULTS_DIR / "files_read.json", {**run_header(sys.argv), "dir": a.dir, "runs": runs, "best": best})
    print(json.dumps(best))


if __name__ == "__main__":
    main()
