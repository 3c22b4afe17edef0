"""Where a Ray run's CPU goes, process by process and step by step: one ``neardup dedup ... --engine
ray --quiet`` under a psutil poller of its process tree (:class:`plan.TreePoller`) and Ray's own
timeline (:data:`ray_timeline.WRAPPER`). Prints and records, per process: its name (``ray::`` and
the last task it ran for a worker, or its program), its CPU-seconds, when it started and how long
it lived; per Ray Data operator: its tasks, their busy seconds and when they ran (seconds from
the command's start); the stages' seconds; the time before the first task and after the last.

    PYTHONPATH=$PWD/src .venv/bin/python bench/ray_profile.py CORPUS [--workers 2] [--output FILE]

The spans are wall time (a task's span on a busy machine includes waiting for a core); the CPU
figures are the processes' own (user + system), the more trustworthy on a shared machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402
from plan import TreePoller  # noqa: E402
from ray_timeline import WRAPPER  # noqa: E402


def operators(events: list, t0: float) -> dict:
    """Per Ray Data operator / remote function (Ray Data's helper actors apart): tasks, busy
    seconds, first start and last end in seconds from ``t0`` (epoch seconds)."""
    ops: dict = {}
    for e in sorted((e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).startswith("task::")),
                    key=lambda e: e["ts"]):
        name = e["cat"][6:]
        o = ops.setdefault(name, {"tasks": 0, "busy_s": 0.0, "start_s": float("inf"), "end_s": 0.0})
        o["tasks"] += 1
        o["busy_s"] = round(o["busy_s"] + e["dur"] / 1e6, 3)
        o["start_s"] = round(min(o["start_s"], e["ts"] / 1e6 - t0), 3)
        o["end_s"] = round(max(o["end_s"], (e["ts"] + e["dur"]) / 1e6 - t0), 3)
    return ops


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", nargs="+", help="inputs of neardup dedup")
    p.add_argument("--workers", type=int, default=None, help="the local Ray instance's CPUs (default: all)")
    p.add_argument("--neardup-args", default="", help="more options for neardup dedup")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "ray_profile.json")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ray-profile-") as tmp:
        timeline = os.path.join(tmp, "timeline.json")
        cmd = [sys.executable, "-c", WRAPPER, timeline, "dedup", *args.corpus, "--output", os.path.join(tmp, "out"),
               "--engine", "ray", "--quiet", *(["--workers", str(args.workers)] if args.workers else []),
               *args.neardup_args.split()]
        t0 = time.time()
        proc = subprocess.Popen(cmd)
        poller = TreePoller(proc.pid, period=0.1)
        poller.start()
        if proc.wait() != 0:
            raise SystemExit(f"neardup exited {proc.returncode}")
        wall = time.time() - t0
        poller.stop.set()
        poller.join()
        stats = json.loads(Path(tmp, "out", "stats.json").read_text())
        events = json.loads(Path(timeline).read_text())
    ops = operators(events, t0)
    procs = sorted(({"pid": pid, "name": poller.names.get(pid, "?"), "cpu_s": round(cpu, 2)}
                    for pid, cpu in poller.cpu.items()), key=lambda r: -r["cpu_s"])
    total = sum(r["cpu_s"] for r in procs)
    print(f"wall {wall:.1f} s, CPU {total:.1f} s; stage seconds {stats['seconds']}")
    for r in procs:
        print(f"  {r['cpu_s']:7.2f}  {r['pid']:>7}  {r['name']}")
    for name, o in ops.items():
        print(f"  {name[:60]:60} {o['tasks']:>4} busy {o['busy_s']:7.2f}  {o['start_s']:7.2f} .. {o['end_s']:7.2f}")
    write_json(args.output, dict(run_header(sys.argv), command=" ".join(cmd[3:]), load_average=os.getloadavg(),
                                 documents=stats["counts"]["input"], wall_s=round(wall, 3), cpu_s=round(total, 2),
                                 seconds=stats["seconds"], processes=procs, operators=ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
