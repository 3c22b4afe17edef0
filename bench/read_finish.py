"""The read stage's end (issue 32): ``ReadStage.finish``, where the run's size checks and the
duplicate-id check run once every block is read (each block's ids read and hashed,
:func:`neardup.stages.read.id_rows`; the keys sorted to find a repeated one,
:func:`~neardup.stages.read.duplicate_ids_of`), timed inside whole ``neardup dedup`` runs, trees
alternating, each run a fresh process with ``PYTHONPATH=TREE``.

    .venv/bin/python bench/read_finish.py --trees /work/wt-base/src src --pairs 3 \\
        --input bench/data/synth_1000000_s0.jsonl --out read_finish.json

Per run: the wall of ``finish`` and of each of those calls (summed over calls, ms), their thread
CPU, the read stage's seconds and the run's wall. Results in bench/results/ (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

from common import RESULTS_DIR, probe_run, run_header, tree_runs, write_json

PROBE = r"""
import json, sys, time, runpy, atexit
from neardup.stages import read as R
acc = {}
def wrap(owner, name):
    f = getattr(owner, name)
    def w(*a, **k):
        t, c = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            x = acc.setdefault(name, [0, 0.0, 0.0])
            x[0] += 1; x[1] += time.perf_counter() - t; x[2] += time.thread_time() - c
    setattr(owner, name, w)
for n in ("id_rows", "duplicate_ids_of"):
    wrap(R, n)
wrap(R.ReadStage, "finish")
atexit.register(lambda: print("PROBE " + json.dumps({k: {"calls": v[0], "wall_ms": round(v[1] * 1000, 1),
                                                        "cpu_ms": round(v[2] * 1000, 1)} for k, v in acc.items()}),
                              file=sys.stderr, flush=True))
sys.argv = ["neardup"] + sys.argv[1:]
runpy.run_module("neardup", run_name="__main__")
"""


def one_run(tree: str, corpus: str, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    probe, stats, wall = probe_run(tree, PROBE, ["dedup", corpus, "--output", out, "--threshold", "0.8", "--quiet"],
                                   out, timeout=900)
    shutil.rmtree(out, ignore_errors=True)
    return {"calls": probe, "read_s": stats["seconds"]["read"], "wall_s": round(wall, 3),
            "load": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", nargs="+", required=True, help="src folders, alternated")
    ap.add_argument("--input", default="bench/data/synth_1000000_s0.jsonl")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", default="read_finish.json", help="file name under bench/results/")
    a = ap.parse_args()
    header = run_header(sys.argv)
    runs = tree_runs(a.trees, a.pairs, lambda t, out: one_run(t, a.input, out), "neardup-read-finish-",
                     show=lambda r: f"finish {r['calls']['finish']['wall_ms']} ms, read {r['read_s']} s, "
                                    f"wall {r['wall_s']} s")
    summary = {t: {name: statistics.median(r["calls"][name]["wall_ms"] for r in rs)
                   for name in ("finish", "id_rows", "duplicate_ids_of")} for t, rs in runs.items()}
    write_json(RESULTS_DIR / a.out, {**header, "input": a.input, "pairs": a.pairs, "summary_wall_ms_median": summary,
                                     "runs": runs})
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
