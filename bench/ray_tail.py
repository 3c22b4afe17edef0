"""The start and the end of the ``neardup`` program on the Ray engine (its own local instance), as
the program runs them: ``start_s``, from the process's start to the first task submitted (the
imports, the input's discovery, the instance's start); ``tail_s``, from the end of the last stage to
the process's exit (the instance stopped, the report drawn, the result published, the process's
``atexit`` functions); the driver's own CPU-seconds (with what it reaped), and those of every
process of the run (the driver, the instance's GCS server, raylet, agents and workers, the
watchdog): this script is their subreaper (``PR_SET_CHILD_SUBREAPER``), so that each one, however
orphaned, is reaped here and counted in ``RUSAGE_CHILDREN``. The program's modules are hooked as it
imports them (it imports numba and Ray in its own order). Alternating source trees (``--src A,B``:
A B A B ...), ``--rounds`` each.

    .venv/bin/python bench/ray_tail.py --src $PWD/src,/work/main/src --size 100k --rounds 5

Wall spans: on a loaded machine they include waiting for a core (the load average is kept with
each run). Writes bench/results/ray_tail.json (``--output``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, run_header, write_json  # noqa: E402

# the ``neardup`` program with its spans timed: the hooks are set as the modules
# are imported, so that the program imports what it imports in its own order (numba, Ray)
PROGRAM = r"""
import atexit, importlib.abc, importlib.util, json, resource, sys, time
T = {"t0": time.perf_counter()}
def report():  # registered first: runs last, after the engine's own atexit functions
    ru = resource.getrusage(resource.RUSAGE_SELF)
    now = time.perf_counter()
    sys.stderr.write("RAY_TAIL " + json.dumps({"start_s": T.get("first", now) - T["t0"],
                     "tail_s": now - T.get("stages", now), "driver_cpu_s": ru.ru_utime + ru.ru_stime}) + "\n")
atexit.register(report)
def stages_hook(m):
    run_stages = m.run_stages
    def stages(*a, **k):
        try:
            return run_stages(*a, **k)
        finally:
            T["stages"] = time.perf_counter()
    m.run_stages = stages
def ray_hook(m):
    refs = m.RayEngine._refs
    def first(self, frame):
        T.setdefault("first", time.perf_counter())
        return refs(self, frame)
    m.RayEngine._refs = first
HOOKS = {"neardup.stages": stages_hook, "neardup.engines.ray": ray_hook}
class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in HOOKS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            HOOKS[name](module)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Finder())
from neardup.cli import main
sys.exit(main())
"""

PR_SET_CHILD_SUBREAPER = 36


def reap_all(timeout: float = 30.0) -> None:
    """Waits for every descendant (the orphans this process adopted included) to end and reaps it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


SIZES = {"2k": 2000, "100k": 100000, "1M": 1000000}


def one(src: str, corpus: Path, out: Path, workers: int) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    cmd = [sys.executable, "-c", PROGRAM, "dedup", str(corpus), "-o", str(out), "--overwrite", "--engine", "ray",
           "--workers", str(workers), "--quiet"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    reap_all()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{src}: neardup exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("RAY_TAIL "))
    every = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return dict(json.loads(line[len("RAY_TAIL "):]), all_cpu_s=every, load=load)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", required=True, help="source trees, comma-separated (PYTHONPATH of each run)")
    p.add_argument("--size", default="100k", choices=sorted(SIZES))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--output", default="ray_tail.json", help="file under bench/results/")
    args = p.parse_args()
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed: Linux only")
    corpus = DATA_DIR / f"synth_{SIZES[args.size]}_s0.jsonl"
    trees = [s.strip() for s in args.src.split(",") if s.strip()]
    scratch = Path(tempfile.mkdtemp(prefix="ray_tail_"))
    runs = {t: [] for t in trees}
    try:
        for r in range(args.rounds):
            for t in trees:
                res = one(t, corpus, scratch / "out", args.workers)
                runs[t].append(res)
                print(f"round {r + 1} {t}: start {res['start_s']:.2f} s, tail {res['tail_s']:.2f} s, "
                      f"driver {res['driver_cpu_s']:.2f} CPU-s, all processes {res['all_cpu_s']:.2f} CPU-s "
                      f"(load {res['load']:.1f})", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    medians = {t: {k: round(statistics.median(x[k] for x in rs), 3) for k in ("start_s", "tail_s", "driver_cpu_s", "all_cpu_s")}
               for t, rs in runs.items()}
    for t, m in medians.items():
        print(f"{t}: median start {m['start_s']} s, tail {m['tail_s']} s, driver {m['driver_cpu_s']} CPU-s, all {m['all_cpu_s']} CPU-s")
    write_json(RESULTS_DIR / args.output, dict(run_header(sys.argv), size=args.size, workers=args.workers,
                                               runs=runs, medians=medians))


if __name__ == "__main__":
    main()
