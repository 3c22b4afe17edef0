"""The start of numba's runtime (NRT) in a fresh process, A/B between source trees, alternated:
the CPU-seconds of ``neardup.kernels.compile.start_runtime`` (numba's ``rtsys.initialize``
where a tree has no ``start_runtime``), numba and its target context already set up.

    .venv/bin/python bench/runtime_start.py --trees /work/main/src src --rounds 10

numba compiles the runtime's functions with LLVM in every process; a tree that keeps their
object code in the kernels' cache rebuilds them instead. The first process of a tree may compile
them (an untimed one runs first). Writes JSON (``--output``, default
bench/results/runtime_start.json): each tree's CPU-seconds, min and median, and the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402

CODE = r"""
import time
from numba.core.registry import cpu_target
ctx = cpu_target.target_context
import neardup.kernels.compile as kc
t = time.process_time()
if hasattr(kc, "start_runtime"):
    kc.start_runtime(ctx)
else:
    from numba.core.runtime import rtsys
    rtsys.initialize(ctx)
print(time.process_time() - t)
"""


def once(tree: str) -> float:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", nargs="+", default=["/work/main/src", "src"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--output", default=str(RESULTS_DIR / "runtime_start.json"))
    a = ap.parse_args()
    for tree in a.trees:  # untimed: the runtime compiled and kept where a tree keeps it
        once(tree)
    load = [os.getloadavg()]
    cpu = {tree: [] for tree in a.trees}
    for i in range(a.rounds):
        for tree in (a.trees if i % 2 == 0 else a.trees[::-1]):
            cpu[tree].append(once(tree))
    load.append(os.getloadavg())
    result = {**run_header(sys.argv), "load": load, "trees": {}}
    for tree, xs in cpu.items():
        s = sorted(xs)
        result["trees"][tree] = {"cpu_s_min": round(s[0], 4), "cpu_s_median": round(s[len(s) // 2], 4),
                                 "all": [round(x, 4) for x in xs]}
        print(f"{tree}: start of numba's runtime, CPU min {s[0] * 1000:.1f} ms, median {s[len(s) // 2] * 1000:.1f} ms")
    print("load", load[0], "->", load[-1])
    write_json(Path(a.output), result)


if __name__ == "__main__":
    main()
