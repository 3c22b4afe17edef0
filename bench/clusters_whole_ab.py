"""The clusters stage in whole runs, trees alternating (issue 32: each stage at 1M within 2x of
its floor, the clusters stage's counted in whole runs): a whole ``neardup dedup`` run per tree
and round, its order swapped every round, each run's output removed at once. Kept per run: every
stage's seconds (stats.json), the run's wall and peak RSS, the load average at its start, and over
the clusters stage the process's CPU, system time and minor page faults (``getrusage`` around
the stage's call), the Arrow pool's bytes allocated and the pool's name at its end. The summary:
each tree's medians and spread, and the paired differences (each round's second tree less its
first, against the first tree named).

    .venv/bin/python bench/clusters_whole_ab.py 6 base=/work/wt-base/src mine=src --out clusters_whole_ab.json

CW_CORPUS: the input (default bench/data/synth_1000000_s0.jsonl); CW_DIR: the output folders'
parent (default /tmp/clusters_whole_ab).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from common import RESULTS_DIR, alternating, run_header, write_json

_CHILD = r"""
import atexit, json, resource, sys, time
out_json = sys.argv[1]
res = {}
import pyarrow as pa
import neardup.stages as st
stage = st.PIPELINE[2]
run_stage = stage.run
def run(run, engine):
    a, w = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    try:
        return run_stage(run, engine)
    finally:
        b = resource.getrusage(resource.RUSAGE_SELF)
        res.update(wall_ms=round((time.perf_counter() - w) * 1e3, 2),
                   cpu_ms=round((b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) * 1e3, 2),
                   sys_ms=round((b.ru_stime - a.ru_stime) * 1e3, 2), minflt=b.ru_minflt - a.ru_minflt,
                   pool_at_end=pa.default_memory_pool().backend_name)
stage.run = run
def dump():
    with open(out_json, "w") as f:
        json.dump(res, f)
atexit.register(dump)
from neardup.cli import main
sys.argv = ["neardup"] + sys.argv[2:]
sys.exit(main())
"""

KEYS = ("clusters", "read", "pairs", "write", "wall", "clusters_cpu_ms", "clusters_sys_ms", "clusters_minflt", "peak_rss_mib")


def one_run(name: str, src: str, corpus: str, root: str) -> dict:
    out, trace = f"{root}/o_{name}", f"{root}/trace_{name}.json"
    load = os.getloadavg()[0]
    w = time.perf_counter()
    try:
        p = subprocess.Popen([sys.executable, "-c", _CHILD, trace, "dedup", corpus, "-o", out, "--threshold", "0.8",
                              "--quiet", "--overwrite"], env=dict(os.environ, PYTHONPATH=os.path.abspath(src)))
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - w
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"{name}: the run failed")
        with open(f"{out}/stats.json") as f:
            seconds = json.load(f)["seconds"]
    finally:
        shutil.rmtree(out, ignore_errors=True)  # ~2.5 GB at 1M
    with open(trace) as f:
        stage = json.load(f)
    os.remove(trace)
    return dict(seconds, wall=round(wall, 3), peak_rss_mib=round(usage.ru_maxrss / 1024, 1),
                clusters_cpu_ms=stage["cpu_ms"], clusters_sys_ms=stage["sys_ms"], clusters_minflt=stage["minflt"],
                clusters_wall_ms=stage["wall_ms"], pool_at_end=stage["pool_at_end"],
                load=[round(load, 2), round(os.getloadavg()[0], 2)])


def main() -> None:
    parser = argparse.ArgumentParser(description="the clusters stage in whole runs, trees alternating")
    parser.add_argument("rounds", type=int)
    parser.add_argument("trees", nargs="+", help="NAME=SRC (a src folder)")
    parser.add_argument("--out", help="a file name under bench/results")
    a = parser.parse_args()
    trees = dict(t.split("=", 1) for t in a.trees)
    root = os.environ.get("CW_DIR", "/tmp/clusters_whole_ab")
    os.makedirs(root, exist_ok=True)
    corpus = os.environ.get("CW_CORPUS", "bench/data/synth_1000000_s0.jsonl")
    runs = {name: [] for name in trees}
    for _, name in alternating(trees, a.rounds):
        line = one_run(name, trees[name], corpus, root)
        runs[name].append(line)
        print(name, line, flush=True)
    first = next(iter(trees))
    summary = {}
    for name, v in runs.items():
        s = {}
        for k in KEYS:
            xs = [x[k] for x in v]
            s[k] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
        s["load_median"] = statistics.median(x["load"][0] for x in v)
        if name != first:
            s["paired_diff_median"] = {k: statistics.median(x[k] - y[k] for x, y in zip(v, runs[first])) for k in KEYS}
            s["lower_than_first"] = {k: sum(x[k] < y[k] for x, y in zip(v, runs[first])) for k in KEYS}
        summary[name] = s
    print(json.dumps(summary, indent=1))
    if a.out:
        write_json(RESULTS_DIR / a.out, {**run_header(sys.argv), "corpus": corpus, "trees": trees, "summary": summary,
                                         "runs": runs})


if __name__ == "__main__":
    main()
