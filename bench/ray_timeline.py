"""Where a Ray run spends its time, from Ray's own timeline: per operator of Ray Data (a stage's
function, a shuffle's map and reduce), its tasks, their busy seconds, the window they ran in, the
parallelism (busy / window: 2.0 is both CPUs of a 2-CPU instance), the most at once, and the
seconds spent deserializing their arguments (a worker's first task imports neardup and loads the
kernels).

    .venv/bin/python bench/ray_timeline.py CORPUS [--workers 2] [--keep-json FILE] [--output FILE]

One ``neardup dedup CORPUS --engine ray --quiet`` in a subprocess, through a wrapper that calls
``ray.timeline(filename=...)`` when the engine exits (before the instance stops: its task events
are gone after). Issue 28 found with it that on 2 CPUs the pair stage's operators ran one task at a
time (Ray Data's per-operator CPU reservation, now off in the engine). The spans are wall time of
the tasks, not CPU: on a busy machine a task's span includes the time it waited for a core.
Writes bench/results/ray_timeline.json unless --output says otherwise.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402

WRAPPER = r"""
import sys
timeline, argv = sys.argv[1], sys.argv[2:]
import neardup.engines.ray as engine
exit_ = engine.RayEngine.__exit__
def __exit__(self, *exc):
    if self.ray is not None and self.ray.is_initialized():
        self.ray.timeline(filename=timeline)
    return exit_(self, *exc)
engine.RayEngine.__exit__ = __exit__
from neardup.cli import main
sys.exit(main(argv))
"""


def summarize(events: list) -> dict:
    """Per operator (Ray's task category, ``task::NAME``; Ray Data's helper actors apart): tasks,
    busy seconds, window, parallelism, the most at once, deserialization seconds."""
    tasks = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).startswith("task::")]
    inner = collections.defaultdict(list)  # (pid, tid) -> the deserialize spans in that worker
    for e in events:
        if e.get("cat") == "task:deserialize_arguments":
            inner[(e["pid"], e["tid"])].append(e)
    ops: dict = {}
    for name in sorted({e["cat"][6:] for e in tasks}):
        es = [e for e in tasks if e["cat"][6:] == name]
        start = min(e["ts"] for e in es)
        end = max(e["ts"] + e["dur"] for e in es)
        busy = sum(e["dur"] for e in es)
        edges = sorted([(e["ts"], 1) for e in es] + [(e["ts"] + e["dur"], -1) for e in es])
        now = most = 0
        for _, step in edges:
            now += step
            most = max(most, now)
        deser = sum(d["dur"] for e in es for d in inner[(e["pid"], e["tid"])]
                    if e["ts"] <= d["ts"] <= e["ts"] + e["dur"])
        ops[name] = {"tasks": len(es), "busy_s": round(busy / 1e6, 3), "window_s": round((end - start) / 1e6, 3),
                     "parallelism": round(busy / max(end - start, 1), 2), "most_at_once": most,
                     "deserialize_s": round(deser / 1e6, 3)}
    span = (max(e["ts"] + e["dur"] for e in tasks) - min(e["ts"] for e in tasks)) / 1e6 if tasks else 0.0
    return {"span_s": round(span, 3), "busy_s": round(sum(o["busy_s"] for o in ops.values()), 3),
            "workers": len({e["tid"] for e in tasks if "Actor" not in e["cat"]}), "operators": ops}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", nargs="+", help="inputs of neardup dedup")
    p.add_argument("--workers", type=int, default=None, help="the local Ray instance's CPUs (default: all)")
    p.add_argument("--neardup-args", default="", help="more options for neardup dedup")
    p.add_argument("--keep-json", default=None, help="keep Ray's timeline (chrome://tracing format) here")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "ray_timeline.json")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ray-timeline-") as tmp:
        timeline = args.keep_json or os.path.join(tmp, "timeline.json")
        cmd = [sys.executable, "-c", WRAPPER, timeline, "dedup", *args.corpus, "--output", os.path.join(tmp, "out"),
               "--engine", "ray", "--quiet", *(["--workers", str(args.workers)] if args.workers else []),
               *args.neardup_args.split()]
        subprocess.run(cmd, check=True)
        stats = json.loads(Path(tmp, "out", "stats.json").read_text())
        events = json.loads(Path(timeline).read_text())
    summary = summarize(events)
    print(f"tasks' span {summary['span_s']:.1f} s, busy {summary['busy_s']:.1f} s on {summary['workers']} workers; "
          f"stage seconds {stats['seconds']}")
    print(f"  {'operator':60} {'tasks':>5} {'busy s':>8} {'window s':>8} {'parallel':>8} {'most':>4} {'deser s':>7}")
    for name, o in sorted(summary["operators"].items(), key=lambda kv: -kv[1]["busy_s"]):
        print(f"  {name[:60]:60} {o['tasks']:>5} {o['busy_s']:>8.2f} {o['window_s']:>8.2f} {o['parallelism']:>8.2f} "
              f"{o['most_at_once']:>4} {o['deserialize_s']:>7.2f}")
    write_json(args.output, dict(run_header(sys.argv), load_average=os.getloadavg(), documents=stats["counts"]["input"],
                                 seconds=stats["seconds"], **summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
