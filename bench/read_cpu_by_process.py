"""Where the read stage's CPU goes, process by process: one ``neardup dedup CORPUS --engine E
--quiet`` under a poller of every process of its tree (driver, Ray's worker, raylet, GCS, Ray's
agents), each process's CPU-seconds read at the read stage's start and end (stamped by the driver
itself, through a wrapper around ``ReadStage.run``); for ``--engine ray`` also the read stage's
tasks from Ray's timeline (the worker's warm-up, each range's call: when each started and ended,
seconds from the stage's start). Alternates the source trees given (``--src a,b``) round by round.

    .venv/bin/python bench/read_cpu_by_process.py CORPUS --src SRC_A,SRC_B [--rounds 2] [--engine ray]

CPU-seconds (user + system from /proc) are what a shared machine measures fairly; the spans are
wall time (a task's includes waiting for a core).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402
from ray_timeline import WRAPPER as TIMELINE_WRAPPER  # noqa: E402

# the driver stamps the read stage's start and end, then runs ray_timeline's wrapper (Ray's
# timeline written as the engine exits; imported, not used, on the local engine)
WRAPPER = r"""
import json, sys, time
stamps = sys.argv.pop(1)
import neardup.stages.read as read
run_ = read.ReadStage.run
def run(self, ctx, engine):
    t0 = time.time()
    try:
        return run_(self, ctx, engine)
    finally:
        with open(stamps, "w") as f:
            json.dump({"read_start": t0, "read_end": time.time()}, f)
read.ReadStage.run = run
""" + TIMELINE_WRAPPER


class Poller(threading.Thread):
    """Every ``period`` s: (time, {pid: CPU-seconds}) of the process tree under ``pid``."""

    def __init__(self, pid: int, period: float = 0.05):
        super().__init__(daemon=True)
        import psutil
        self.root, self.period = psutil.Process(pid), period
        self.samples, self.names = [], {}
        self.stop = threading.Event()

    def run(self):
        import psutil
        while not self.stop.is_set():
            try:
                procs = [self.root] + self.root.children(recursive=True)
            except psutil.Error:
                procs = []
            now, cpu = time.time(), {}
            for p in procs:
                try:
                    t = p.cpu_times()
                    cpu[p.pid] = (t.user, t.system, p.num_ctx_switches().voluntary,
                                  _minflt(p.pid))
                    if not self.names.get(p.pid, "").startswith("ray::"):
                        self.names[p.pid] = " ".join(p.cmdline()[:3])[:100]
                except psutil.Error:
                    pass
            self.samples.append((now, cpu))
            self.stop.wait(self.period)

    def at(self, t: float) -> dict:
        """Each process's CPU-seconds at ``t`` (the last sample before it; 0 for one not started)."""
        best = {}
        for ts, cpu in self.samples:
            if ts > t:
                break
            best = cpu
        return best


def _minflt(pid: int) -> int:
    """The process's minor page faults (/proc/PID/stat), 0 where unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[7])
    except (OSError, ValueError, IndexError):
        return 0


def kind(name: str, pid: int, driver: int) -> str:
    if pid == driver:
        return "driver"
    if name.startswith("ray::"):
        return "worker " + name.split()[0]
    words = name.split()
    prog = next((w for w in words if w.endswith(".py")), words[0] if words else "?")
    return os.path.basename(prog)


def read_tasks(timeline: str, t0: float) -> list:
    try:
        events = json.loads(Path(timeline).read_text())
    except (OSError, ValueError):
        return []
    out = []
    for e in sorted((e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).startswith("task::")),
                    key=lambda e: e["ts"]):
        out.append({"task": e["cat"][6:], "start_s": round(e["ts"] / 1e6 - t0, 3),
                    "end_s": round((e["ts"] + e["dur"]) / 1e6 - t0, 3)})
    return out


def one_run(src: str, corpus: list, engine: str, workers: int, tmp: str) -> dict:
    stamps, timeline, out = (os.path.join(tmp, n) for n in ("stamps.json", "timeline.json", "out"))
    for p in (stamps, timeline):
        if os.path.exists(p):
            os.remove(p)
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=src)
    cmd = [sys.executable, "-c", WRAPPER, stamps, timeline, "dedup", *corpus, "--output", out,
           "--engine", engine, "--workers", str(workers), "--quiet"]
    load = os.getloadavg()[0]
    proc = subprocess.Popen(cmd, env=env)
    poller = Poller(proc.pid)
    poller.start()
    rc = proc.wait()
    poller.stop.set()
    poller.join()
    if rc:
        raise SystemExit(f"{src}: neardup exited {rc}")
    s = json.loads(Path(stamps).read_text())
    a, b = poller.at(s["read_start"]), poller.at(s["read_end"])
    per: dict = {}
    for pid, (user, system, _ctx, faults) in b.items():
        k = kind(poller.names.get(pid, ""), pid, proc.pid)
        u0, s0, _c0, f0 = a.get(pid, (0.0, 0.0, 0, 0))
        old = per.get(k, {"cpu_s": 0.0, "user_s": 0.0, "sys_s": 0.0, "minflt": 0})
        per[k] = {"cpu_s": round(old["cpu_s"] + user - u0 + system - s0, 3), "user_s": round(old["user_s"] + user - u0, 3),
                  "sys_s": round(old["sys_s"] + system - s0, 3), "minflt": old["minflt"] + faults - f0}
    total = sum(v["cpu_s"] for v in per.values())
    tasks = read_tasks(timeline, s["read_start"]) if engine == "ray" else []
    tasks = [t for t in tasks if t["end_s"] > -5 and t["start_s"] < s["read_end"] - s["read_start"] + 0.5]
    warm = next((t["end_s"] for t in tasks if t["task"] in ("warm_worker", "_warm_worker")), None)
    to_warm = None  # the workers' CPU from the stage's start to the end of their warm-up
    if warm is not None:
        w = poller.at(s["read_start"] + warm)
        to_warm = round(sum(sum(w[pid][:2]) - sum(a.get(pid, (0.0, 0.0))[:2]) for pid in w
                            if poller.names.get(pid, "").startswith("ray::")), 3)
    shutil.rmtree(out, ignore_errors=True)
    return {"src": src, "load1": round(load, 2), "read_s": round(s["read_end"] - s["read_start"], 3),
            "read_cpu_s": round(total, 3), "by_process": dict(sorted(per.items(), key=lambda kv: -kv[1]["cpu_s"])),
            "warm_up_end_s": warm, "worker_cpu_to_warm_up_end_s": to_warm, "tasks": tasks}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", nargs="+")
    p.add_argument("--src", required=True, help="source trees (their src/), comma-separated, alternated")
    p.add_argument("--engine", default="ray")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "read_cpu_by_process.json")
    args = p.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="read-cpu-") as tmp:
        for r in range(args.rounds):
            for src in args.src.split(","):
                res = one_run(src, args.corpus, args.engine, args.workers, tmp)
                res["round"] = r
                runs.append(res)
                print(json.dumps({k: v for k, v in res.items() if k != "tasks"}), flush=True)
    write_json(args.output, {**run_header(sys.argv), "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
