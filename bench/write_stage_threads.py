"""The write stage alone (a finished work dir resumed, as ``bench/write_stage.py``), source trees
alternating in fresh processes, with the CPU of each of its threads: the main thread's until
the kept lines' copy starts (what the copy waits for), the copy's in the main thread (reading,
for :meth:`RangeCopier.piped`; the whole copy for ``copy_file_range``), the piped copy's
writing thread (its ``write`` calls and, once it has gone past the page cache, its ``O_DIRECT``
writes), and the members' thread (removed.parquet and clusters.parquet). On a loaded
machine the stage's wall is noise; ``idle_estimate`` = CPU to the copy + max(longest copy
thread, the copy's and members' CPU / 2) is what two idle cores would give.

    python bench/write_stage_threads.py bench/data/synth_1000000_s0.jsonl --work-dir /tmp/ws/w1m \\
        --trees /work/wt-base50/src src --repeat 3 --out bench/results/write_stage_threads_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, os, sys, threading, time
import neardup.stages.write as W
import neardup.io.kernel_copy as KC
rec = {"members_thread_cpu_s": 0.0, "copy_writer_thread_cpu_s": 0.0}
stage = {}
def timed_members(fn):
    def g(*a, **k):
        c = time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            if threading.current_thread().name == "neardup-members":
                rec["members_thread_cpu_s"] += time.thread_time() - c
    return g
for name in ("member_rows", "write_ranges", "stitch_output"):
    setattr(W, name, timed_members(getattr(W, name)))
real_copy = KC.RangeCopier.copy
def copy(self, s, e):
    w, c = time.perf_counter(), time.thread_time()
    rec.setdefault("main_cpu_to_copy_s", c - stage["cpu"])
    rec.setdefault("wall_to_copy_s", w - stage["wall"])
    try:
        return real_copy(self, s, e)
    finally:
        rec["copy_main_thread_cpu_s"] = rec.get("copy_main_thread_cpu_s", 0.0) + time.thread_time() - c
KC.RangeCopier.copy = copy
if hasattr(KC, "_compiled_write"):
    loaded = KC._compiled_write
    def compiled_write():
        fn = loaded()
        if fn is None:
            return None
        def g(*a):
            c = time.thread_time()
            try:
                return fn(*a)
            finally:
                rec["copy_writer_thread_cpu_s"] += time.thread_time() - c
        return g
    KC._compiled_write = compiled_write
if hasattr(KC, "_write_direct"):  # the writer's writes past the page cache (O_DIRECT), in Python
    real_direct = KC._write_direct
    def write_direct(*a):
        c = time.thread_time()
        try:
            return real_direct(*a)
        finally:
            rec["copy_writer_thread_cpu_s"] += time.thread_time() - c
    KC._write_direct = write_direct
real_run = W.WriteStage.run
def run(self, r, engine):
    stage.update(wall=time.perf_counter(), cpu=time.thread_time(), times=os.times())
    try:
        return real_run(self, r, engine)
    finally:
        t = os.times()
        rec["stage_wall_s"] = time.perf_counter() - stage["wall"]
        rec["stage_process_cpu_s"] = t.user + t.system - stage["times"].user - stage["times"].system
        print("STAGE " + json.dumps({k: round(v, 4) for k, v in rec.items()}), file=sys.stderr, flush=True)
W.WriteStage.run = run
from neardup.cli import main
main(sys.argv[1:])
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--work-dir", required=True, help="a finished run's work dir (--work-dir of that run)")
    ap.add_argument("--trees", nargs="+", default=["src"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    runs = {t: [] for t in a.trees}
    with tempfile.TemporaryDirectory(prefix="neardup-write-threads-") as tmp:
        for k in range(a.repeat):
            for t in (a.trees if k % 2 == 0 else a.trees[::-1]):
                load = float(open("/proc/loadavg").read().split()[0])
                p = subprocess.run([sys.executable, "-c", _CHILD, "dedup", a.corpus, "-o", os.path.join(tmp, "out"),
                                    "--work-dir", a.work_dir, "--resume", "-q", "--overwrite"],
                                   env={**os.environ, "PYTHONPATH": os.path.abspath(t)}, capture_output=True, text=True)
                line = next((x for x in p.stderr.splitlines() if x.startswith("STAGE ")), None)
                if line is None:
                    sys.exit(f"{t}: no STAGE line\n{p.stderr[-2000:]}")
                r = json.loads(line[len("STAGE "):])
                copy = [r.get("copy_main_thread_cpu_s", 0.0), r["copy_writer_thread_cpu_s"]]
                r["idle_estimate_s"] = round(r.get("main_cpu_to_copy_s", 0.0) + max(
                    max(copy), (sum(copy) + r["members_thread_cpu_s"]) / 2), 4)
                r["load"] = load
                runs[t].append(r)
                print(t, json.dumps(r), flush=True)
    keys = ("stage_wall_s", "stage_process_cpu_s", "main_cpu_to_copy_s", "copy_main_thread_cpu_s",
            "copy_writer_thread_cpu_s", "members_thread_cpu_s", "idle_estimate_s")
    summary = {t: {k: sorted(r.get(k, 0.0) for r in rs)[len(rs) // 2] for k in keys} for t, rs in runs.items()}
    print(json.dumps({"median": summary}, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"command": " ".join(sys.argv), "corpus": a.corpus, "runs": runs, "median": summary}, f, indent=1)


if __name__ == "__main__":
    main()
