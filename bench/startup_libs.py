"""The program's start-up up to its work (issue 32), A/B between source trees, alternated: from
the process's spawn to the end of ``neardup.cli._program_start`` (numba, the parser, the library
and numba's runtime loaded; the run itself is not made), the main thread's CPU-seconds, the
process's (every thread's) and the wall, in fresh processes.

    .venv/bin/python bench/startup_libs.py --trees /work/wt-base51/src src --repeat 15 \\
        --output bench/results/startup_libs.json

Made for the shared libraries loaded ahead by a thread (``neardup.cli._load_libraries_ahead``):
their loading leaves the main thread (its CPU falls) while the process's CPU stays; the wall
falls by as much only where the second core is free (a quiet machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402

CHILD = r"""
import os, sys, time
import neardup.cli as cli
start = cli._program_start
def at_work(args):
    start(args)
    print(repr((time.time(), time.thread_time(), time.process_time())), flush=True)
    os._exit(0)
cli._program_start = at_work
sys.argv = ["neardup"] + sys.argv[1:]
cli.main()
"""


def once(tree: str, argv: list) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    t0 = time.time()
    r = subprocess.run([sys.executable, "-c", CHILD, *argv], env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{tree}: exit {r.returncode}\n{r.stderr}")
    at, main_cpu, cpu = eval(r.stdout.strip().splitlines()[-1])
    return {"wall_s": round(at - t0, 4), "main_thread_cpu_s": round(main_cpu, 4), "process_cpu_s": round(cpu, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", nargs="+", default=["/work/main/src", "src"])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--scratch", default="/tmp/startup_libs")
    ap.add_argument("--output", default=str(RESULTS_DIR / "startup_libs.json"))
    a = ap.parse_args()
    scratch = Path(a.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "one.jsonl").write_text('{"text": "one document"}\n')
    argv = ["dedup", str(scratch / "one.jsonl"), "-o", str(scratch / "out"), "--quiet"]
    for t in a.trees:  # untimed: bytecode and page cache
        once(t, argv)
    runs = {t: [] for t in a.trees}
    loads = [os.getloadavg()[0]]
    for _ in range(a.repeat):
        for t in a.trees:
            runs[t].append(once(t, argv))
        loads.append(os.getloadavg()[0])
    result = {**run_header(sys.argv), "load_1min": loads, "trees": {}}
    for t, rs in runs.items():
        s = {}
        for k in ("wall_s", "main_thread_cpu_s", "process_cpu_s"):
            xs = sorted(r[k] for r in rs)
            s[k] = {"best": xs[0], "median": xs[len(xs) // 2]}
        result["trees"][t] = {**s, "runs": rs}
        print(f"{t}: " + ", ".join(f"{k} best {v['best'] * 1000:.1f} ms median {v['median'] * 1000:.1f} ms"
                                     for k, v in s.items()))
    print("load", loads[0], "->", loads[-1])
    write_json(Path(a.output), result)


if __name__ == "__main__":
    main()
