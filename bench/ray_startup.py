"""The start and stop of the Ray engine's own local instance: how long ``RayEngine.__enter__``
takes, then the first task (one per CPU, each a trivial call), then ``__exit__``; which processes
the instance started and their CPU-seconds (the driver's own included). Each round runs the engine
three times in fresh processes, alternating: Ray's own start (``NEARDUP_RAY_LEAN=0``: ``ray.init(address=
"local")``), neardup's lean one with the raylet's own agents (``NEARDUP_RAY_AGENTS=ray``) and the lean
one as a run starts it, with stand-ins for the agents (:func:`neardup.engines.ray_cluster.start_local`).

    PYTHONPATH=$PWD/src .venv/bin/python bench/ray_startup.py [--rounds 3] [--workers 2] [--output FILE]

Medians per way; the load average is recorded with each run (the spans are wall time: on a busy
machine they include waiting for a core; the CPU figures are the processes' own).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402

ONE = r"""
import json, os, sys, threading, time
import psutil
from neardup.engines.ray import RayEngine
workers = int(sys.argv[1])
me, cpu, names = psutil.Process(), {}, {}
stop = threading.Event()

def poll():  # the instance's processes, their last CPU reading (a process gone keeps its last one)
    while not stop.is_set():
        for p in me.children(recursive=True):
            try:
                t = p.cpu_times()
                cpu[p.pid] = t.user + t.system
                if not names.get(p.pid, "").startswith("ray::"):
                    args = p.cmdline()
                    names[p.pid] = next((os.path.basename(a) for a in args if a.endswith(".py")), " ".join(args[:1]))
                    if p.name().startswith("ray::"):
                        names[p.pid] = p.name().split()[0]
                    elif args[:2] and args[1] == "-c":
                        names[p.pid] = "neardup watchdog"
                    else:
                        names[p.pid] = os.path.basename(names[p.pid].split()[0]) if names[p.pid] else "?"
            except psutil.Error:
                pass
        stop.wait(0.05)

threading.Thread(target=poll, daemon=True).start()
t0 = time.time()
engine = RayEngine(workers, quiet=True)
engine.__enter__()
t1 = time.time()
engine.collect(engine.map(abs, range(-workers, 0)))
t2 = time.time()
engine.__exit__(None, None, None)
t3 = time.time()
stop.set()
time.sleep(0.1)
t = me.cpu_times()
by_kind = {"driver": round(t.user + t.system, 2)}
for pid, c in cpu.items():
    by_kind[names.get(pid, "?")] = round(by_kind.get(names.get(pid, "?"), 0) + c, 2)
print(json.dumps({"enter_s": t1 - t0, "first_tasks_s": t2 - t1, "exit_s": t3 - t2, "total_s": t3 - t0,
                  "cpu_s": round(sum(by_kind.values()), 2), "processes": len(cpu), "cpu_by_kind": by_kind,
                  "load": os.getloadavg()[0]}))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "ray_startup.json", help="file (under bench/results/)")
    args = p.parse_args()
    ways = {"ray.init": {"NEARDUP_RAY_LEAN": "0"}, "lean, Ray's agents": {"NEARDUP_RAY_AGENTS": "ray"},
            "lean": {}}
    runs = {way: [] for way in ways}
    for r in range(args.rounds):
        for way, settings in ways.items():
            env = {k: v for k, v in os.environ.items() if k not in ("NEARDUP_RAY_LEAN", "NEARDUP_RAY_AGENTS")}
            env.update(settings)
            out = subprocess.run([sys.executable, "-c", ONE, str(args.workers)], env=env, capture_output=True,
                                 text=True, check=True)
            run = json.loads(out.stdout.strip().splitlines()[-1])
            runs[way].append(run)
            print(f"round {r + 1} {way:18s} enter {run['enter_s']:.2f} s, first tasks {run['first_tasks_s']:.2f} s, "
                  f"exit {run['exit_s']:.2f} s, total {run['total_s']:.2f} s, {run['cpu_s']:.2f} CPU-s "
                  f"({run['processes']} processes) load {run['load']:.1f}  {run['cpu_by_kind']}", flush=True)
    summary = {way: {k: round(statistics.median(r[k] for r in rs), 3)
                     for k in ("enter_s", "first_tasks_s", "exit_s", "total_s", "cpu_s")} for way, rs in runs.items()}
    for way, s in summary.items():
        print(f"median {way:18s} {s}")
    path = args.output if args.output.is_absolute() else RESULTS_DIR / args.output
    write_json(path, {**run_header(sys.argv), "workers": args.workers, "runs": runs, "medians": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
