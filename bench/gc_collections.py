"""The garbage collector's work in a ``neardup dedup`` run (issue 32): the number of its
collections (full ones apart) and the CPU seconds they took (``gc.callbacks``), with the
process's user and sys CPU seconds, for this checkout and the one whose ``src`` folder is
``--before``, alternating, a fresh process each time. Collections are counted, not timed by
the clock alone: they do not depend on the machine's load (the CPU seconds do, a little).

    python bench/gc_collections.py INPUT --before /work/main/src --repeat 2

Results: bench/results/gc_collections.json (with the command, the machine and the load; kept
renamed by input: gc_collections_files100k.json, gc_collections_jsonl100k.json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import RESULTS_DIR, REPO_DIR, run_header, write_json

CHILD = r"""
import gc, json, os, sys, time
counts = {"collections": 0, "full": 0, "gc_cpu_s": 0.0}
start = [0.0]
def hook(phase, info):
    if phase == "start":
        start[0] = time.process_time()
    else:
        counts["gc_cpu_s"] += time.process_time() - start[0]
        counts["collections"] += 1
        counts["full"] += info["generation"] == 2
gc.callbacks.append(hook)
import neardup.cli as cli
exit_now = cli._exit_now
def report(code):
    counts["gc_cpu_s"] = round(counts["gc_cpu_s"], 3)
    print("GC " + json.dumps(counts), flush=True)
    exit_now(code)
cli._exit_now = report
sys.argv = ["neardup", "dedup", *sys.argv[1:]]
cli.main()
"""


def run_once(inp: str, src: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    p = subprocess.run([sys.executable, "-c", CHILD, inp, "-o", str(out), "-q"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(src)), check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next(x for x in p.stdout.splitlines() if x.startswith("GC "))
    return {**json.loads(line[3:]), "user_s": round(after.ru_utime - before.ru_utime, 2),
            "sys_s": round(after.ru_stime - before.ru_stime, 2), "load_1m": round(load, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("--before", type=Path, required=True, help="the src folder of the checkout before")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=None, help="where the outputs go (a temporary folder)")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="gc-bench-"))
    sides = {"before": args.before, "this": REPO_DIR / "src"}
    runs = []
    for r in range(args.repeat):
        for name, src in sides.items():
            row = {"round": r + 1, "side": name, **run_once(args.input, src, work / name)}
            print(row, flush=True)
            runs.append(row)
    write_json(RESULTS_DIR / "gc_collections.json", {**run_header(sys.argv), "input": args.input,
                                                     "before": str(args.before), "runs": runs})
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
