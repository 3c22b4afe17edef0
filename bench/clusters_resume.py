"""The clusters stage alone, trees alternating: each tree's finished 1M work dir (made once, kept)
resumed with pairs, clusters and write undone (the pair stage before it, so that the process has
loaded numba and its kernels as in a whole run); the clusters stage's CPU (user+sys of the
process over the stage), page faults and wall, and the CPU of its steps (thread CPU-ms of each
call: the members' gather runs in a thread of its own). The process stops where the write stage
would start (it is not measured here: no 2.3 GB of kept/ written each round); the pair stage's
wall and CPU are recorded too (``pairs_wall``, ``pairs_cpu``). Each tree has a work dir of its own:
the pair stage's cost differed by ~90 CPU-ms between two such dirs of the same code (clusters23:
its sign flipped with the trees' names swapped), so compare the pair stage only over runs with
the names swapped too (the clusters stage was not seen to differ). The last round's
clusters/ is removed before each run, as a whole run has none to remove at the stage's start.

    .venv/bin/python bench/clusters_resume.py 4 main=/work/main/src mine=src --out clusters_resume.json

Work dirs and outputs: $CR_DIR/w_NAME and $CR_DIR/o_NAME (default /tmp/clusters_resume).
CR_AGAIN=K: the stage run K times more in the same process after the first, warm (``again``:
[wall ms, CPU ms] of each; its best is what a loaded machine says of the stage's wall).
CR_TIMELINE=1: the first run's timeline beside (``timeline``: [call, thread, start ms, end ms]
of each timed call, from the stage's start), printed per run.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys

_CHILD = r"""
import json, os, resource, sys, time
import threading
steps, timeline, origin = {}, [], [None]  # origin: the first run's start (perf_counter), while it runs
def timed(owner, name):
    f = getattr(owner, name)
    def call(*a, **k):
        w, c = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            e = time.perf_counter()
            s = steps.setdefault(name, [0.0, 0.0])
            s[0] += (e - w) * 1e3
            s[1] += (time.thread_time() - c) * 1e3
            if origin[0] is not None:
                timeline.append([name, threading.current_thread().name, round((w - origin[0]) * 1e3, 2),
                                 round((e - origin[0]) * 1e3, 2)])
    setattr(owner, name, call)
import neardup.stages as st
import neardup.stages.clusters as cl
from neardup.stages.corpus import DocStore, MemberColumns, OpenedBlocks
from neardup.io.storage.folder import Folder
import neardup.kernels.components as kc
from neardup.stages.workdir import WorkDir
for name in ("members_of", "largest_clusters", "document_ids", "taken_where", "_pairs_table", "members_table",
             "select_partition"):
    timed(cl, name)
for name in ("keep_order", "select_representatives"):  # imported where select_partition calls them
    timed(kc, name)
timed(MemberColumns, "take")  # both threads' blocks: the gathering thread's and the stage's own
timed(MemberColumns, "result")
if os.environ.get("CR_TIMELINE"):  # finer calls (their time is also within the steps above)
    timed(OpenedBlocks, "_open")
    timed(DocStore, "opened")
    timed(DocStore, "table")
timed(Folder, "write_arrow")  # the members file
timed(WorkDir, "stage_dir")  # the stage's folder made (an earlier run's removed first, in the runs again)
stage = st.PIPELINE[2]
run_stage, res = stage.run, {}
again = int(os.environ.get("CR_AGAIN", "0"))
def run(run, engine):
    steps.clear()  # the pair stage's calls (its files written) are not the clusters stage's
    a, w = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    origin[0] = w if os.environ.get("CR_TIMELINE") else None
    try:
        return run_stage(run, engine)
    finally:
        origin[0] = None
        b = resource.getrusage(resource.RUSAGE_SELF)
        res.update(cpu=b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime, minflt=b.ru_minflt - a.ru_minflt,
                   wall=time.perf_counter() - w)
        for _ in range(again):  # the stage again in the same process (warm): its wall and CPU each time
            a, w = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            run_stage(run, engine)
            b = resource.getrusage(resource.RUSAGE_SELF)
            res.setdefault("again", []).append([round((time.perf_counter() - w) * 1e3, 2),
                                                round((b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) * 1e3, 2)])
stage.run = run
pairs_stage = st.PIPELINE[1]
run_pairs = pairs_stage.run
def timed_pairs(run, engine):  # the pair stage's wall and CPU (what a load started from it may cost there)
    a, w = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    try:
        return run_pairs(run, engine)
    finally:
        b = resource.getrusage(resource.RUSAGE_SELF)
        res.update(pairs_cpu=b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime, pairs_wall=time.perf_counter() - w)
pairs_stage.run = timed_pairs
def stop(run, engine):
    raise KeyboardInterrupt  # the write stage not run: the command ends there (exit status 130)
st.PIPELINE[3].run = stop
from neardup.cli import main
main(sys.argv[1:])
print("CLUSTERS " + json.dumps({**res, "steps": {k: [round(x, 2) for x in v] for k, v in steps.items()},
                                **({"timeline": timeline} if timeline else {})}))
"""


def main() -> None:
    rounds = int(sys.argv[1])
    args = sys.argv[2:]
    out_name = None
    if "--out" in args:
        out_name = args[args.index("--out") + 1]
        args = args[:args.index("--out")]
    trees = dict(a.split("=", 1) for a in args)
    root = os.environ.get("CR_DIR", "/tmp/clusters_resume")
    corpus = "bench/data/synth_1000000_s0.jsonl"
    for name, src in trees.items():
        w = f"{root}/w_{name}"
        if not os.path.exists(w + "/state.full.json"):
            subprocess.run([sys.executable, "-m", "neardup", "dedup", corpus, "-o", f"{root}/o_{name}", "--work-dir", w,
                            "-q", "--overwrite"], env=dict(os.environ, PYTHONPATH=os.path.abspath(src)), check=True)
            shutil.copy(w + "/state.json", w + "/state.full.json")
    runs = {name: [] for name in trees}
    for r in range(rounds):
        for name, src in (list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]):
            w = f"{root}/w_{name}"
            with open(w + "/state.full.json") as f:
                state = json.load(f)
            for k in ("pairs", "clusters", "write"):
                state["done"].pop(k, None)
            with open(w + "/state.json", "w") as f:
                json.dump(state, f)
            shutil.rmtree(w + "/clusters", ignore_errors=True)  # as in a whole run: no earlier members file to remove
            p = subprocess.run([sys.executable, "-c", _CHILD, "dedup", corpus, "-o", f"{root}/o_{name}", "--work-dir", w,
                                "-q", "--overwrite", "--resume"], env=dict(os.environ, PYTHONPATH=os.path.abspath(src)),
                               check=True, capture_output=True, text=True)
            line = json.loads(next(x for x in p.stdout.splitlines() if x.startswith("CLUSTERS "))[9:])
            line["load"] = os.getloadavg()[0]
            runs[name].append(line)
            print(name, json.dumps({k: v for k, v in line.items() if k != "timeline"}), flush=True)
            for call, thread, start, end in line.get("timeline", []):
                print(f"  {start:8.2f} {end:8.2f} {end - start:7.2f}  {thread:24s} {call}")
    summary = {name: {**{k: statistics.median(x[k] for x in v) for k in ("cpu", "minflt", "wall", "load", "pairs_wall", "pairs_cpu")},
                      "best_wall": min(x["wall"] for x in v), "best_cpu": min(x["cpu"] for x in v),
                      **({"again_best_wall_ms": min(a[0] for x in v for a in x["again"]),
                          "again_median_wall_ms": statistics.median(a[0] for x in v for a in x["again"]),
                          "again_median_cpu_ms": statistics.median(a[1] for x in v for a in x["again"])}
                         if all(x.get("again") for x in v) else {})}
               for name, v in runs.items()}
    print(json.dumps(summary, indent=1))
    if out_name:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", out_name), "w") as f:
            json.dump({"command": " ".join(sys.argv), "trees": trees, "summary": summary, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
