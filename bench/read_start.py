"""How long a run's read stage takes to make its first MinHash call (issue 32): the kernels a
map thread calls first are loaded from numba's disk cache before they can run, one at a time
under numba's compiler lock, beside the thread that loads the later stages' kernels
(:mod:`neardup.stages.preload`). Trees alternate, each run a fresh ``python -m neardup dedup``
(the program, start-up included) with ``PYTHONPATH=TREE``.

    .venv/bin/python bench/read_start.py --trees /work/wt-base/src src --pairs 5 \\
        --input bench/data/synth_100000_s0.jsonl --out read_start.json

Per run, from a probe in the child (numba's ``Dispatcher.compile``, which loads a cached kernel,
and ``ReadStage.run`` wrapped; the probe's cost is the same in every tree): the read stage's
start (ms from the probe's start), the first MinHash kernel call's start after it
(``to_first_kernel_ms``: the end of ``_process_kernel``'s load, where the kernel itself starts),
the read stage's seconds and the run's wall (ms, the probe's start to its exit), each kernel
loaded with its thread. Results in bench/results/ (``--out``), the load average around each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import shutil
from pathlib import Path

from common import RESULTS_DIR, probe_run, run_header, tree_runs, write_json

PROBE = r"""
import json, sys, threading, time, runpy
T0 = time.perf_counter()
log = []
from numba.core import dispatcher
_compile = dispatcher.Dispatcher.compile
def compile(self, sig):
    t = time.perf_counter()
    try:
        return _compile(self, sig)
    finally:
        log.append([self.py_func.__name__, threading.current_thread().name, round((t - T0) * 1000, 2),
                    round((time.perf_counter() - T0) * 1000, 2)])
dispatcher.Dispatcher.compile = compile
from neardup.stages import read as _read
_run = _read.ReadStage.run
marks = {}
def run(self, r, e):
    marks["read_start_ms"] = round((time.perf_counter() - T0) * 1000, 2)
    try:
        return _run(self, r, e)
    finally:
        marks["read_end_ms"] = round((time.perf_counter() - T0) * 1000, 2)
_read.ReadStage.run = run
import atexit
def dump():
    marks["wall_ms"] = round((time.perf_counter() - T0) * 1000, 2)
    print("PROBE " + json.dumps({"marks": marks, "loads": log}), file=sys.stderr, flush=True)
atexit.register(dump)
sys.argv = ["neardup"] + sys.argv[1:]
runpy.run_module("neardup", run_name="__main__")
"""


def one_run(tree: str, corpus: str, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    load_before = [round(x, 2) for x in os.getloadavg()]
    probe, stats, _wall = probe_run(tree, PROBE, ["dedup", corpus, "--output", out, "--threshold", "0.8", "--quiet"],
                                    out, timeout=600)
    marks, loads = probe["marks"], probe["loads"]
    start = marks["read_start_ms"]
    first = [end for name, _thread, begin, end in loads if name == "_process_kernel" and end >= start]
    return {"wall_ms": marks["wall_ms"], "read_start_ms": start,
            "to_first_kernel_ms": round(min(first) - start, 2) if first else None,
            "read_s": stats["seconds"]["read"], "loads": loads, "load_before": load_before,
            "load_after": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", nargs="+", required=True, help="src folders, alternated")
    ap.add_argument("--input", default="bench/data/synth_100000_s0.jsonl")
    ap.add_argument("--pairs", type=int, default=5, help="rounds of one run per tree")
    ap.add_argument("--out", default="read_start.json", help="file name under bench/results/")
    a = ap.parse_args()
    header = run_header(sys.argv)
    runs = tree_runs(a.trees, a.pairs, lambda t, out: one_run(t, a.input, out), "neardup-read-start-",
                     swap=False, warm=True,
                     show=lambda r: f"first kernel {r['to_first_kernel_ms']} ms after the read's start, "
                                    f"read {r['read_s']} s, wall {r['wall_ms']:.0f} ms")

    def med(t, key):
        values = [r[key] for r in runs[t] if r[key] is not None]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None

    summary = {t: {k: med(t, k) for k in ("to_first_kernel_ms", "read_s", "wall_ms")} for t in a.trees}
    write_json(RESULTS_DIR / a.out, {**header, "input": a.input, "pairs": a.pairs, "summary": summary, "runs": runs})
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
