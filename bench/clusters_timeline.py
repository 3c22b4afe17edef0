"""The clusters stage inside whole runs (issue 32): what each run's stage waits on. A whole 1M
``neardup dedup`` run per tree and round (trees alternating; each run's output deleted at once),
its clusters stage timed from the inside: per call of the stage (and of its threads: the
members' gathering, its sources and rows from the blocks' runs, the blocks' opens, the cluster
ids' take, the kernel's load) the wall
[start, end] ms from the stage's start, the thread's CPU ms, its sys ms, voluntary context
switches (a sleep: the GIL, a join, a lock, I/O), involuntary ones (preempted by another
runnable task: the machine's load) and minor faults; for the stage (and the pair stage) the
process's and the main thread's CPU, the threads alive at its start, the CPU ticks of each
thread over it (``/proc/self/task``), and MemFree/Dirty/Writeback with the kernel's direct
reclaim counters (``/proc/vmstat``) at its start and end (writeback throttling or reclaim of a
full page cache would show there); Python's garbage collections within it.

    .venv/bin/python bench/clusters_timeline.py 2 main=/work/main/src mine=src --out clusters_timeline.json

Output folders: $CT_DIR/o_NAME (default /tmp/clusters_timeline), removed after each run.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from common import RESULTS_DIR, alternating, run_header, write_json

_CHILD = r"""
import gc, json, os, resource, sys, threading, time
out_json = sys.argv[1]
timeline, origin, res = [], [None], {}
def usage_row(name, w, e, c, u):
    v = resource.getrusage(resource.RUSAGE_THREAD)
    timeline.append([name, threading.current_thread().name, round((w - origin[0]) * 1e3, 2),
                     round((e - origin[0]) * 1e3, 2), round((time.thread_time() - c) * 1e3, 2),
                     round((v.ru_stime - u.ru_stime) * 1e3, 2), v.ru_nvcsw - u.ru_nvcsw, v.ru_nivcsw - u.ru_nivcsw,
                     v.ru_minflt - u.ru_minflt])
def timed_fn(name, f):
    def call(*a, **k):
        w, c, u = time.perf_counter(), time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD)
        try:
            return f(*a, **k)
        finally:
            if origin[0] is not None:
                usage_row(name, w, time.perf_counter(), c, u)
    return call
def timed(owner, name):
    if hasattr(owner, name):  # (a tree before a step had it: not timed there)
        setattr(owner, name, timed_fn(name, getattr(owner, name)))
import neardup.stages as st
import neardup.stages.background as bg
import neardup.stages.clusters as cl
import neardup.kernels.components as kc
from neardup.stages.corpus import DocStore, MemberColumns, OpenedBlocks
from neardup.io.storage.folder import Folder
from neardup.stages.workdir import WorkDir
for name in ("members_of", "largest_clusters", "document_ids", "taken_where", "_pairs_table", "members_table",
             "select_partition"):
    timed(cl, name)
for name in ("keep_order", "select_representatives"):
    timed(kc, name)
for owner, names in ((MemberColumns, ("take", "result")), (OpenedBlocks, ("_open",)), (DocStore, ("opened_blocks", "source_rows_at")),
                     (Folder, ("write_arrow",)), (WorkDir, ("stage_dir",))):
    for name in names:
        timed(owner, name)
class TimedBackground(bg.Background):  # each thread's whole body (the cluster ids' take is a lambda)
    def __init__(self, fn, name, threads=None):
        super().__init__(timed_fn("thread:" + name, fn), name, threads)
cl.Background = TimedBackground
def tasks():
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            s = open(f"/proc/self/task/{t}/stat").read()
        except OSError:
            continue
        f = s[s.rindex(")") + 2:].split()
        out[t] = int(f[11]) + int(f[12])  # utime + stime ticks
    return out
def memory():
    m = {}
    for line in open("/proc/meminfo"):
        k, v = line.split(":")
        if k in ("MemFree", "Dirty", "Writeback"):
            m[k + "_mb"] = int(v.split()[0]) // 1024
    for line in open("/proc/vmstat"):
        k, v = line.split()
        if k in ("allocstall_movable", "allocstall_normal", "pgscan_direct", "nr_dirtied", "nr_written"):
            m[k] = int(v)
    return m
collecting = {}
def on_gc(phase, info):
    if origin[0] is None:
        return
    if phase == "start":
        collecting["at"] = (time.perf_counter(), time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD))
    elif "at" in collecting:
        w, c, u = collecting.pop("at")
        usage_row("gc%d" % info["generation"], w, time.perf_counter(), c, u)
gc.callbacks.append(on_gc)
def wrap_stage(i):
    stage = st.PIPELINE[i]
    run_stage = stage.run
    def run(run, engine):
        a, ta, w = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
        r = {"threads_at_start": [t.name for t in threading.enumerate()], "ticks_at_start": tasks(), "mem_at_start": memory()}
        if stage.name == "clusters":
            origin[0] = w
        try:
            return run_stage(run, engine)
        finally:
            e = time.perf_counter()
            origin[0] = None
            b, tb = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_THREAD)
            end = tasks()
            r.update(wall_ms=round((e - w) * 1e3, 2), cpu_ms=round((b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) * 1e3, 2),
                     main_cpu_ms=round((tb.ru_utime + tb.ru_stime - ta.ru_utime - ta.ru_stime) * 1e3, 2),
                     main_sys_ms=round((tb.ru_stime - ta.ru_stime) * 1e3, 2), main_vcsw=tb.ru_nvcsw - ta.ru_nvcsw,
                     main_ivcsw=tb.ru_nivcsw - ta.ru_nivcsw, majflt=b.ru_majflt - a.ru_majflt, minflt=b.ru_minflt - a.ru_minflt,
                     mem_at_end=memory(), thread_ticks={t: end[t] - r["ticks_at_start"].get(t, 0) for t in end})
            del r["ticks_at_start"]
            res[stage.name] = r
    stage.run = run
wrap_stage(1)
wrap_stage(2)
def dump():  # at exit: the program ends by os._exit after the atexit functions
    res["timeline"] = timeline
    with open(out_json, "w") as f:
        json.dump(res, f)
import atexit
atexit.register(dump)
from neardup.cli import main
sys.argv = ["neardup"] + sys.argv[2:]
sys.exit(main())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="the clusters stage inside whole runs, trees alternating")
    parser.add_argument("rounds", type=int)
    parser.add_argument("trees", nargs="+", help="NAME=SRC (a src folder)")
    parser.add_argument("--out", help="a file name under bench/results")
    a = parser.parse_args()
    rounds, out_name, trees = a.rounds, a.out, dict(t.split("=", 1) for t in a.trees)
    root = os.environ.get("CT_DIR", "/tmp/clusters_timeline")
    os.makedirs(root, exist_ok=True)
    corpus = os.environ.get("CT_CORPUS", "bench/data/synth_1000000_s0.jsonl")
    runs = {name: [] for name in trees}
    for _, name in alternating(trees, rounds):
        src = trees[name]
        out, trace = f"{root}/o_{name}", f"{root}/trace_{name}.json"
        load = os.getloadavg()[0]
        try:
            subprocess.run([sys.executable, "-c", _CHILD, trace, "dedup", corpus, "-o", out, "--quiet", "--overwrite"],
                           env=dict(os.environ, PYTHONPATH=os.path.abspath(src)), check=True)
            with open(f"{out}/stats.json") as f:
                seconds = json.load(f)["seconds"]
        finally:
            shutil.rmtree(out, ignore_errors=True)  # ~2.5 GB
        with open(trace) as f:
            line = json.load(f)
        os.remove(trace)
        line.update(seconds=seconds, load=[load, os.getloadavg()[0]])
        runs[name].append(line)
        c = line["clusters"]
        print(name, "stats seconds", seconds, "load", line["load"], flush=True)
        print("  clusters:", {k: c[k] for k in ("wall_ms", "cpu_ms", "main_cpu_ms", "main_sys_ms", "main_vcsw",
                                              "main_ivcsw", "threads_at_start")})
        for call, thread, start, end, cpu, sys_ms, vcsw, ivcsw, minflt in line["timeline"]:
            print(f"  {start:8.2f} {end:8.2f} {end - start:7.2f}  cpu {cpu:6.2f} sys {sys_ms:6.2f} vcsw {vcsw:3d} "
                  f"ivcsw {ivcsw:3d} minflt {minflt:4d}  {thread:22s} {call}")
    summary = {name: {k: statistics.median(x["clusters"][k] for x in v)
                      for k in ("wall_ms", "cpu_ms", "main_cpu_ms", "main_sys_ms", "main_vcsw", "main_ivcsw")}
               for name, v in runs.items()}
    print(json.dumps(summary, indent=1))
    if out_name:
        write_json(RESULTS_DIR / out_name, {**run_header(sys.argv), "trees": trees, "summary": summary, "runs": runs})


if __name__ == "__main__":
    main()
