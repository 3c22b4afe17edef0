"""The read stage of a real ``neardup dedup`` run (its overlap kept) as a timeline of spans, each
with the wall and the CPU of the thread that ran it (``time.thread_time``): the block reads and
parses of the prefetch threads, each call of the kernels (``MinHasher.signatures_and_codes``) and
of the band keys, the glue around them (``_process``), each block's end (its writer's close, its
line bounds, its summary), the main thread's tail (``ReadStage.finish``: the size and duplicate-id
checks), and each kernel numba loads from its cache (which thread, when, how long it waited on
numba's lock). Beside them the stage's process CPU (user, system; numba's own threads are what
the Python threads do not account for) and page faults, the first kernel call of each map thread
(the pipeline's start) and the last (the serial tail after it).

Wall is meaningless on a loaded machine (say so), thread CPU much less so. Each tree runs in a
fresh process (``--trees``, alternating).

    python bench/read_timeline.py --input bench/data/synth_100000_s0.jsonl --trees src \\
        --repeat 3 --out bench/results/read_timeline_100k.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, os, resource, shutil, sys, tempfile, threading, time
from collections import defaultdict

lock = threading.Lock()
ev = []       # (thread, step, start, end, thread CPU)
threads = []  # (thread, start, end, thread CPU) of every Python thread that ended
stage = {}


def rec(name, a, b, ca, cb):
    with lock:
        ev.append((threading.current_thread().name, name, a, b, cb - ca))


def wrap(obj, attr, name=None):
    f = getattr(obj, attr)
    name = name or attr

    def g(*a, **k):
        t, c = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            rec(name, t, time.perf_counter(), c, time.thread_time())
    setattr(obj, attr, g)


def wrap_generator(obj, attr, name):
    f = getattr(obj, attr)

    def g(*a, **k):
        it = f(*a, **k)
        while True:
            t, c = time.perf_counter(), time.thread_time()
            try:
                x = next(it)
            except StopIteration:
                return
            finally:
                rec(name, t, time.perf_counter(), c, time.thread_time())
            yield x
    setattr(obj, attr, g)


import neardup.stages.read as R
import neardup.io._streams as S
import neardup.io.formats.jsonl as J
import neardup.kernels.minhash as M
import neardup.kernels.bands as B
from neardup.io.storage.folder import Folder
from numba.core.dispatcher import Dispatcher

wrap_generator(S, "_plain_blocks", "block read")
wrap(J._JsonlParser, "parse", "parse")
wrap(M.MinHasher, "signatures_and_codes", "kernel")
wrap(B, "band_keys", "band keys")
wrap(R, "_process", "_process (kernel, band keys, glue)")
wrap(R._Writer, "close", "writer close")
wrap(R, "write_line_bounds", "line bounds file")
wrap(Folder, "write_json", "summary file")
wrap(R, "read_block", "read_block")
wrap(R.ReadStage, "finish", "finish (checks)")
wrap(R, "release_scratches", "release buffers")
_compile = Dispatcher.compile


def compile_(self, sig):
    t, c = time.perf_counter(), time.thread_time()
    try:
        return _compile(self, sig)
    finally:
        rec("load " + self.py_func.__name__, t, time.perf_counter(), c, time.thread_time())


Dispatcher.compile = compile_
_thread_run = threading.Thread.run


def thread_run(self):
    t, c = time.perf_counter(), time.thread_time()
    try:
        _thread_run(self)
    finally:
        with lock:
            threads.append((self.name, t, time.perf_counter(), time.thread_time() - c))


threading.Thread.run = thread_run
_run = R.ReadStage.run


def run(self, run_, engine):
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    stage["main_cpu0"] = time.thread_time()
    stage["start"] = time.perf_counter()
    try:
        return _run(self, run_, engine)
    finally:
        stage["end"] = time.perf_counter()
        stage["main_cpu"] = time.thread_time() - stage["main_cpu0"]
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        stage["user_s"] = r1.ru_utime - r0.ru_utime
        stage["sys_s"] = r1.ru_stime - r0.ru_stime
        stage["minflt"] = r1.ru_minflt - r0.ru_minflt


R.ReadStage.run = run
from neardup.cli import main
out = tempfile.mkdtemp(prefix="read_timeline_")
try:
    main(["dedup", sys.argv[1], "-o", os.path.join(out, "o"), "--quiet"])
finally:
    shutil.rmtree(out, ignore_errors=True)
t0, t1 = stage["start"], stage["end"]
ms = lambda x: round(1000 * x, 2)
spans = [(th, n, a, b, c) for th, n, a, b, c in sorted(ev, key=lambda e: e[2]) if a >= t0 - 0.002 and b <= t1 + 0.002]
steps = defaultdict(lambda: [0, 0.0, 0.0])
for th, n, a, b, c in spans:
    s = steps[n if not n.startswith("load ") else "loads from numba's cache"]
    s[0] += 1
    s[1] += b - a
    s[2] += c


def kind(name):
    if name.startswith("neardup-map"):
        return "map"
    if name.endswith("(worker)"):
        return "prefetch (block reads, parse)"
    if name.endswith("(_run)"):
        return "writer (codes file)"
    if name == "neardup-kernels":
        return "preload (later stages' kernels)"
    return "other"


by_kind = defaultdict(float)
for name, a, b, c in threads:
    if b > t0 and a < t1:
        by_kind[kind(name)] += c
by_kind["main"] = stage["main_cpu"]
cpu = stage["user_s"] + stage["sys_s"]
by_kind["numba's threads (the rest)"] = cpu - sum(by_kind.values())
first, last = {}, {}
for th, n, a, b, c in spans:
    if n == "kernel":
        first.setdefault(th, ms(a - t0))
        last[th] = ms(b - t0)
print("RESULT " + json.dumps({
    "wall_ms": ms(t1 - t0), "user_s": round(stage["user_s"], 3), "sys_s": round(stage["sys_s"], 3),
    "minor_faults": stage["minflt"],
    "cpu_ms_by_thread_kind": {k: ms(v) for k, v in sorted(by_kind.items())},
    "steps": {n: {"calls": k, "wall_ms": ms(w), "thread_cpu_ms": ms(c)}
              for n, (k, w, c) in sorted(steps.items(), key=lambda x: -x[1][2])},
    "first_kernel_call_ms": first, "last_kernel_end_ms": last,
    "tail_after_last_kernel_ms": ms(t1 - t0) - max(last.values()) if last else None,
    "spans": [[th, n, ms(a - t0), ms(b - t0), ms(c)] for th, n, a, b, c in spans],
    "loadavg": open("/proc/loadavg").read().split()[:3],
}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees (PYTHONPATH), alternating")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spans", action="store_true", help="print every span of each run")
    ap.add_argument("--out")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import run_header
    runs = []
    for r in range(args.repeat):
        for tree in args.trees:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
            load = open("/proc/loadavg").read().split()[:3]
            p = subprocess.run([sys.executable, "-c", _CHILD, args.input], env=env, capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"{tree}: failed\n{p.stderr[-3000:]}")
            res = json.loads(next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])
            res.update(tree=tree, repeat=r, load_before=load)
            runs.append(res)
            kinds = " ".join(f"{k.split(' ')[0]} {v:.0f}" for k, v in res["cpu_ms_by_thread_kind"].items())
            steps = " ".join(f"{k.split(' ')[0]} {v['thread_cpu_ms']:.0f}" for k, v in res["steps"].items()
                             if k not in ("read_block", "_process (kernel, band keys, glue)"))
            print(f"{tree:24s} wall {res['wall_ms']:7.1f} ms  user {res['user_s']:.3f} sys {res['sys_s']:.3f} "
                  f"faults {res['minor_faults']}  first kernel {sorted(res['first_kernel_call_ms'].values())} "
                  f"tail {res['tail_after_last_kernel_ms']:.1f} ms  load {' '.join(load)}\n"
                  f"    thread CPU ms by kind: {kinds}\n    by step: {steps}", flush=True)
            if args.spans:
                for th, n, a, b, c in res["spans"]:
                    print(f"    {th[:20]:20s} {n:36s} {a:8.1f} {b:8.1f}  cpu {c:7.1f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**run_header(sys.argv), "input": args.input, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
