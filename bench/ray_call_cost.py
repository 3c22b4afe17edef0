"""What one call costs on the Ray engine's one worker process (:mod:`neardup.engines.ray_runner`),
apart from the call's own work, and what its worker pays before the first call: CPU-seconds by
process (driver, the worker, raylet, GCS) of a map of a call that does nothing, over few items
and over many (as many as the read stage's ranges at 1M documents), alternated round by round;
the extra CPU over the extra calls is the cost of a call. Also, once a round, the worker's CPU
from the engine's start to its actor made (a call of no work answered) and over its warm-up
(:func:`neardup.engines.ray_worker.warm_worker`). Alternates the source trees given (``--src a,b``,
their src/) round by round.

    .venv/bin/python bench/ray_call_cost.py --src SRC_A,SRC_B [--rounds 3] [--calls 2,77]

CPU-seconds (user + system, from /proc): what a shared machine measures fairly.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402

PROBE = r"""
import json, sys
from functools import partial
import psutil
import neardup.engines.ray as R
from neardup.engines import ray_runner

def nothing(item, *, task, report=None):
    return {"documents": 1, "empty": 0, "lines": 0, "per_source": {}, "rejected": 0, "runs": 1, "skipped": 0}

def cpu():
    out = {}
    for p in [psutil.Process()] + psutil.Process().children(recursive=True):
        try:
            t, name = p.cpu_times(), p.name()
        except psutil.Error:
            continue
        kind = "worker" if name.startswith("ray::") else "driver" if p.pid == psutil.Process().pid else name
        out[kind] = out.get(kind, 0.0) + t.user + t.system
    return out

def spent(a, b):
    return {k: round(b[k] - a.get(k, 0.0), 3) for k in b if round(b[k] - a.get(k, 0.0), 3)}

def skip(*args):
    return None

name = "warm_worker" if hasattr(R, "warm_worker") else "_warm_worker"  # (named so before ray_worker.py)
warm = getattr(R, name)
setattr(R, name, skip)  # the engine's warm-up: a call of nothing, the real one timed below
task = {"config": list(range(150)), "sources": ["x" * 60] * 4}  # ~1.3 KB pickled, as the read's
calls = [int(c) for c in sys.argv[1].split(",")]
with R.RayEngine(2, quiet=True) as e:
    a = cpu(); e.ray.get(e._warming); b = cpu()
    e.ray.get(ray_runner.warm_up(e._runner, "warm_worker", warm, False, False)); c = cpu()
    maps = []
    for n in calls:
        x = cpu()
        e.collect(e.map(partial(nothing, task=task), [(i, [i], (i, i + 1)) for i in range(n)], concurrent=2))
        maps.append({"calls": n, "cpu_s": spent(x, cpu())})
print(json.dumps({"worker_at_start_s": round(a.get("worker", 0.0), 3), "actor_made": spent(a, b),
                  "warm_up": spent(b, c), "maps": maps}))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", required=True, help="source trees (their src/), comma-separated, alternated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", default="2,77", help="the maps' numbers of calls, in order, each round")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "ray_call_cost.json")
    args = p.parse_args(argv)
    rounds = []
    for r in range(args.rounds):
        for src in args.src.split(","):
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, "-c", PROBE, args.calls], env=dict(os.environ, PYTHONPATH=src),
                                 capture_output=True, text=True, timeout=600)
            if out.returncode:
                raise SystemExit(out.stderr[-3000:])
            rounds.append(dict(json.loads(out.stdout.strip().splitlines()[-1]), src=src, round=r, load1=round(load, 2)))
            print(json.dumps(rounds[-1]), flush=True)
    few, many = (int(c) for c in args.calls.split(",")[:2])
    per_call = []
    for r in rounds:
        a, b = r["maps"][0]["cpu_s"], r["maps"][1]["cpu_s"]
        per_call.append({"src": r["src"], **{k: round((b.get(k, 0.0) - a.get(k, 0.0)) / (many - few) * 1000, 2)
                                             for k in sorted(set(a) | set(b))}})
    write_json(args.output, {**run_header(sys.argv), "rounds": rounds, "per_call_ms_cpu": per_call})
    return 0


if __name__ == "__main__":
    sys.exit(main())
