"""The ``neardup`` program's main thread from its start to the read stage, and to its exit, source
trees alternating (issue 32): what lies on a run's path before its first block is read.

    .venv/bin/python bench/main_thread.py --trees /work/main/src src --docs 100000 10 --repeat 8

For each corpus (``--docs``: bench/data/synth_N_s0.jsonl, its first N lines when no such file;
``--corpus``: any JSONL file, one without ids say),
each repeat and each tree (the order alternating by repeat), a fresh ``python -m neardup dedup
CORPUS -o OUT --overwrite --quiet`` run by a probe that marks, from inside, the read stage's start
and the program's exit (``neardup.cli._exit_now``): the main thread's CPU (``time.thread_time``)
and the wall since the probe's start at each mark, and that wall less the main thread's time
runnable but not running (``/proc/thread-self/schedstat``: what a quiet machine would show of it
up to the read stage, ``read_start_main_unqueued_s``); beside them the process's CPU-seconds (user +
sys of it and its children) and its wall from outside. ``bench/startup.py --phases`` splits the
process's CPU into phases: work moved from the main thread into a thread beside it (the shared
libraries' loading, say) stays in its phase there, and shows here. Min and median per tree;
JSON to ``--output`` (default bench/results/main_thread.json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, run_header, write_json  # noqa: E402

PROBE = r"""
import json, os, sys, time
def queued():  # the main thread's time runnable but not running (Linux schedstat), else 0
    try:
        return int(open("/proc/thread-self/schedstat").read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0
T0, Q0 = time.perf_counter(), queued()
sys.argv = ["neardup"] + sys.argv[1:]
import neardup.cli as cli
marks = {}
start = cli._program_start
def program_start(args):
    start(args)
    import neardup.stages as stages
    for stage in stages.PIPELINE:
        if stage.name == "read":
            run = stage.run
            def read(*a, **k):
                marks["read_start"] = (time.perf_counter() - T0, time.thread_time(), queued() - Q0)
                return run(*a, **k)
            stage.run = read
cli._program_start = program_start
exit_now = cli._exit_now
def exit_marked(code):
    marks["exit"] = (time.perf_counter() - T0, time.thread_time(), queued() - Q0)
    os.write(2, ("PROBE " + json.dumps(marks) + "\n").encode())
    exit_now(code)
cli._exit_now = exit_marked
cli.main()
"""


def corpus_of(docs: int, scratch: Path) -> Path:
    path = DATA_DIR / f"synth_{docs}_s0.jsonl"
    if path.exists():
        return path
    out = scratch / f"first_{docs}.jsonl"
    with open(DATA_DIR / "synth_100000_s0.jsonl", "rb") as f, open(out, "wb") as g:
        for _ in range(docs):
            g.write(f.readline())
    return out


def one_run(tree: str, corpus: Path, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PROBE, "dedup", str(corpus), "-o", str(out), "--overwrite", "--quiet"],
                       env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in p.stderr.splitlines() if line.startswith("PROBE ")]
    if p.returncode or not lines:
        raise SystemExit(f"{tree}: the run failed\n{p.stderr[-3000:]}")
    marks = json.loads(lines[0][len("PROBE "):])
    return {"wall_s": round(wall, 4),
            "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 4),
            "read_start_wall_s": round(marks["read_start"][0], 4),
            "read_start_main_cpu_s": round(marks["read_start"][1], 4),
            "read_start_main_unqueued_s": round(marks["read_start"][0] - marks["read_start"][2], 4),
            "exit_wall_s": round(marks["exit"][0], 4), "exit_main_cpu_s": round(marks["exit"][1], 4),
            "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+", default=["/work/main/src", "src"])
    ap.add_argument("--docs", type=int, nargs="*", default=[100_000, 10])
    ap.add_argument("--corpus", nargs="*", default=[], help="more corpora (JSONL paths), after --docs'")
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--output", default=str(RESULTS_DIR / "main_thread.json"))
    args = ap.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees]
    result = {**run_header(sys.argv), "load_before": os.getloadavg(), "trees": trees, "corpora": {}}
    with tempfile.TemporaryDirectory(prefix="main_thread_") as scratch:
        scratch = Path(scratch)
        for docs, corpus in [(d, corpus_of(d, scratch)) for d in args.docs] + [(Path(c).name, Path(c)) for c in args.corpus]:
            for tree in trees:  # untimed: page cache, kernels
                one_run(tree, corpus, scratch / "out")
            runs = {tree: [] for tree in trees}
            for r in range(args.repeat):
                for tree in (trees if r % 2 == 0 else trees[::-1]):
                    runs[tree].append(one_run(tree, corpus, scratch / "out"))
                    print(docs, tree, runs[tree][-1], flush=True)
            summary = {}
            for tree in trees:
                keys = [k for k in runs[tree][0] if k != "load"]
                summary[tree] = {k: {"min": min(x[k] for x in runs[tree]),
                                     "median": round(statistics.median(x[k] for x in runs[tree]), 4)} for k in keys}
                print(docs, tree, {k: (v["min"], v["median"]) for k, v in summary[tree].items()}, flush=True)
            result["corpora"][str(docs)] = {"corpus": str(corpus), "runs": runs, "summary": summary}
    result["load_after"] = os.getloadavg()
    write_json(Path(args.output), result)


if __name__ == "__main__":
    main()
