"""A run's tail: the seconds from the end of its stages to its return (report.html, the publish,
the work dir's removal; and of it the seconds the run waited on the work dir's removal), for one or more source trees, interleaved, a fresh process and a fresh
output (default work dir, removed by the run) each time (``--overwrite``: each run publishes over the
last one's result, which stays). Per run: the tail, the main thread's CPU in it, the whole run's
wall and CPU seconds (user + sys of the process), whether the work dir outlived the run, the
load average.

    python bench/run_tail.py bench/data/synth_1000000_s0.jsonl --trees /work/main/src src \\
        --repeat 1 --scratch /tmp/tail --out bench/results/run_tail_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import summarise_runs  # noqa: E402

CHILD = r"""
import json, os, resource, sys, time
import neardup, neardup.stages as st
corpus, out = sys.argv[1], sys.argv[2]
mark = {}
real = st.run_stages
def timed(*a, **k):
    r = real(*a, **k)
    mark["end"], mark["end_cpu"] = time.perf_counter(), time.thread_time()
    return r
st.run_stages = timed  # run.py imports it at each call: this one is used
import neardup.stages.workdir as wd
blocked = []
def waited(fn):
    def inner(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            blocked.append(time.perf_counter() - t)
    return inner
wd.WorkDir.remove = waited(wd.WorkDir.remove)  # the run waits on these (the removal, its thread)
if hasattr(wd, "Removal"):
    wd.Removal.join = waited(wd.Removal.join)
t0 = time.perf_counter()
neardup.dedup(corpus, output=out, overwrite=sys.argv[3:] == ["overwrite"])
t1, c1 = time.perf_counter(), time.thread_time()
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"tail_s": round(t1 - mark["end"], 3), "tail_main_cpu_s": round(c1 - mark["end_cpu"], 4), "removal_wait_s": round(sum(blocked), 3), "run_s": round(t1 - t0, 3),
                  "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
                  "work_left": os.path.exists(os.path.join(out, ".neardup-work")),
                  "stages_s": json.load(open(os.path.join(out, "stats.json")))["seconds"],
                  "load": round(os.getloadavg()[0], 2)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--trees", nargs="+", default=["src"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scratch", default="/tmp/neardup-tail")
    ap.add_argument("--out", default=None)
    ap.add_argument("--overwrite", action="store_true",
                    help="each run publishes over the last one's result (kept between runs), as --overwrite does")
    a = ap.parse_args()
    runs = {t: [] for t in a.trees}
    for _ in range(a.repeat):
        for i, t in enumerate(a.trees):
            out = os.path.join(a.scratch, f"out{i}")
            if not a.overwrite:
                shutil.rmtree(out, ignore_errors=True)
            p = subprocess.run([sys.executable, "-c", CHILD, a.corpus, out] + (["overwrite"] if a.overwrite else []), check=True, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": os.path.abspath(t)})
            r = json.loads(p.stdout.strip().splitlines()[-1])
            runs[t].append(r)
            print(t, r, flush=True)
            if not a.overwrite:
                shutil.rmtree(out, ignore_errors=True)
    if a.overwrite:
        for i in range(len(a.trees)):
            shutil.rmtree(os.path.join(a.scratch, f"out{i}"), ignore_errors=True)
    summarise_runs(a.corpus, runs, ("tail_s", "tail_main_cpu_s", "removal_wait_s", "run_s", "cpu_s"), a.out)


if __name__ == "__main__":
    main()
