"""The read stage of a real ``neardup dedup`` run (overlap kept, unlike ``read_profile.py``) by
thread: CPU seconds (user, system) of each kind of thread, from ``/proc/self/task`` sampled
every few milliseconds, and the stage's timeline in slices (how many cores each kind kept busy:
the first and last slices show the start, the kernels' first loads, and the tail where a core
idles). Kinds: ``map`` (the threads that read the blocks and call the kernels: ``neardup-map``,
or the main thread), ``parse`` (the prefetch threads: block reads, line bounds, the JSONL
scanner), ``writer`` (the fingerprint / signature file writes), ``kernels`` (numba's own
threads, which Python does not know), ``other``. Also: the input's block buffers made fresh and
used again (``neardup.io._streams.BufferPool.take``, ``_buffer`` in trees before), the stage's page faults. Each tree runs in a fresh
process (``--trees``, alternating); wall and the timeline are meaningless under load (say so),
CPU seconds much less so.

    python bench/read_threads.py --input bench/data/synth_100000_s0.jsonl --trees /work/main/src src \\
        --repeat 2 --out bench/results/read_threads_100k.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, os, resource, shutil, sys, tempfile, threading, time

TICK = os.sysconf("SC_CLK_TCK")
names = {}      # native thread id -> Python thread name (those Python knows)
seen = {}       # tid -> (utime, stime) in ticks, last sample
samples = []    # (t, {tid: (du, ds)})
stage = {}
stop = threading.Event()


def read_tasks():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(fields[11]), int(fields[12]))
        except OSError:
            pass
    return out


def sampler(every):
    me = threading.get_native_id()
    while not stop.wait(every):
        for t in threading.enumerate():
            if t.native_id is not None:
                names[t.native_id] = t.name
        now = time.monotonic()
        cur = read_tasks()
        delta = {}
        for tid, (u, s) in cur.items():
            if tid == me:
                continue
            u0, s0 = seen.get(tid, (0, 0))  # a thread born since the last sample: all its ticks
            if (u - u0) or (s - s0):
                delta[tid] = (u - u0, s - s0)
        seen.update(cur)
        if "start" in stage and "end" not in stage:
            samples.append((now, delta))


def kind(tid):
    name = names.get(tid)
    if name is None:
        return "kernels"
    if name.startswith("neardup-map") or name == "MainThread":
        return "map"
    if name.endswith("(worker)"):
        return "parse"
    if name.endswith("(_run)"):
        return "writer"
    return "other"


import neardup.stages.read as R
import neardup.io._streams as S
buffers = {"fresh": 0, "reused": 0, "fresh_bytes": 0}
def _counted(before, buf, size):
    if id(buf) in before:
        buffers["reused"] += 1
    else:
        buffers["fresh"] += 1
        buffers["fresh_bytes"] += size
    return buf


if hasattr(S, "BufferPool"):  # a pool object (read18 on)
    _orig_take = S.BufferPool.take

    def _take(self, size, keep):
        before = {id(b) for b in self._kept}
        return _counted(before, _orig_take(self, size, keep), size)
    S.BufferPool.take = _take
elif hasattr(S, "_buffer"):  # trees before: a module-level list and a free function
    _orig_buffer = S._buffer

    def _buffer(recycle, size, keep):
        before = {id(b) for b in recycle}
        return _counted(before, _orig_buffer(recycle, size, keep), size)
    S._buffer = _buffer

_orig_run = R.ReadStage.run


def run(self, run_, engine):
    seen.update(read_tasks())
    stage["faults0"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    stage["start"] = time.monotonic()
    try:
        return _orig_run(self, run_, engine)
    finally:
        stage["end"] = time.monotonic()
        stage["faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - stage["faults0"]


R.ReadStage.run = run
threading.Thread(target=sampler, args=(float(sys.argv[3]),), daemon=True, name="bench-sampler").start()

from neardup.cli import main
out = tempfile.mkdtemp(prefix="read_threads_")
try:
    main(["dedup", sys.argv[1], "-o", os.path.join(out, "o"), "--quiet"])
finally:
    stop.set()
    shutil.rmtree(out, ignore_errors=True)
# the last sample after the stage's end is cut at the end; every tick counted once
per_kind = {}
for _, delta in samples:
    for tid, (du, ds) in delta.items():
        k = per_kind.setdefault(kind(tid), [0, 0])
        k[0] += du
        k[1] += ds
slice_s = float(sys.argv[2])
timeline = {}
for t, delta in samples:
    i = int((t - stage["start"]) // slice_s)
    row = timeline.setdefault(i, {})
    for tid, (du, ds) in delta.items():
        row[kind(tid)] = row.get(kind(tid), 0) + du + ds
print(json.dumps({
    "wall_s": round(stage["end"] - stage["start"], 4),
    "faults": stage["faults"],
    "cpu_by_kind": {k: {"user_s": u / TICK, "sys_s": s / TICK} for k, (u, s) in sorted(per_kind.items())},
    "timeline_cores": [{"at_s": round(i * slice_s, 3), **{k: round(v / TICK / slice_s, 2) for k, v in sorted(row.items())}}
                       for i, row in sorted(timeline.items())],
    "block_buffers": buffers,
}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees (PYTHONPATH), alternating")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--slice", type=float, default=0.05, help="seconds of a timeline slice")
    ap.add_argument("--every", type=float, default=0.005, help="seconds between samples")
    ap.add_argument("--out")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import run_header
    env = dict(os.environ, NEARDUP_JSONL_SCANNER="1")
    runs = []
    for r in range(args.repeat):
        for tree in args.trees:
            env["PYTHONPATH"] = os.path.abspath(tree)
            load = os.getloadavg()
            p = subprocess.run([sys.executable, "-c", _CHILD, args.input, str(args.slice), str(args.every)],
                               env=env, capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"{tree}: failed\n{p.stderr[-3000:]}")
            res = json.loads(p.stdout.strip().splitlines()[-1])
            res.update(tree=tree, repeat=r, load_before=[round(x, 2) for x in load])
            runs.append(res)
            cpu = " ".join(f"{k} {v['user_s'] + v['sys_s']:.2f} (sys {v['sys_s']:.2f})"
                           for k, v in res["cpu_by_kind"].items())
            print(f"{tree:28s} wall {res['wall_s']:.2f} faults {res['faults']:6d} {cpu} "
                  f"buffers {res['block_buffers']} load {load[0]:.1f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**run_header(sys.argv), "input": args.input, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
