"""Where the read stage's CPU goes: each step of ``neardup dedup``'s read stage timed, in CPU
seconds (``time.process_time``: every thread of the process; the system seconds and page
faults from getrusage, whose user / system split is sampled and lags), in one process that runs the real
stage with its overlap taken out: the ranges of a split file read one after another, no prefetch thread, the writer's coding and writing done in
the caller's thread, so that every CPU second between a step's start and end is that step's
(the kernels' own threads included). Steps nest (``extract`` holds ``_scan``, ``_offsets``,
``_gather``; ``signatures`` holds ``prepare``, ``_process_kernel``, ``_gather_sets`` or, where the
kernels' threads code the fingerprints, ``encode_parts``); ``rest`` is
what no step holds. The sum is more than the real stage's wall time (nothing overlaps here) and
about its CPU time. Each tree is run in a fresh process (``--trees``, alternating).

    python bench/read_profile.py --input bench/data/synth_1000000_s0.jsonl --trees src \\
        --out bench/results/read_profile_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, resource, shutil, sys, tempfile, time
from collections import defaultdict

totals = defaultdict(lambda: [0.0, 0.0, 0, 0])  # CPU, system, minor faults, calls


def now():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.process_time(), r.ru_stime, r.ru_minflt


def timed(name, fn):
    def wrapper(*a, **k):
        s = now()
        try:
            return fn(*a, **k)
        finally:
            e = now()
            t = totals[name]
            t[0] += e[0] - s[0]; t[1] += e[1] - s[1]; t[2] += e[2] - s[2]; t[3] += 1
    return wrapper


def timed_iter(name, make):
    def wrapper(*a, **k):
        it = make(*a, **k)
        while True:
            s = now()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                e = now()
                t = totals[name]
                t[0] += e[0] - s[0]; t[1] += e[1] - s[1]; t[2] += e[2] - s[2]; t[3] += 1
            yield item
    return wrapper


def patch(module, attr, name=None, it=False):
    if not hasattr(module, attr):  # a step another tree has not (or has moved)
        return
    setattr(module, attr, (timed_iter if it else timed)(name or attr, getattr(module, attr)))


import pyarrow as pa
import neardup.stages as st
from neardup.stages import read as rd
from neardup.io.formats import jsonl as fj
from neardup.kernels import jsonl as kj, lines as kl, minhash as mh, shingles as sh

rd.prefetch = lambda it, depth=2: it
rd.read_concurrency = lambda engine, spans: 1  # the ranges of a split file one after another


class SyncWriter(rd._Writer):
    # the coding and writing in the caller's thread
    def __init__(self, sink, depth=16, code=None):
        self._f, self._code, self._error = sink, code, None

    def write(self, *item):
        data = self._code(*item) if self._code is not None else item[0]
        self._write(rd.array_bytes(data) if hasattr(rd, "array_bytes") else memoryview(rd.np.ascontiguousarray(data)).cast("B"))

    def close(self):
        self._f.close()


SyncWriter._write = timed("write fp/sig file", lambda self, b: self._f.write(b))
rd._Writer = SyncWriter
if hasattr(rd, "_Encoder"):  # the writer thread's coding (before the codes came from the kernels' threads)
    rd._Encoder.__call__ = timed("eliasfano encode", rd._Encoder.__call__)
if hasattr(mh, "eliasfano"):
    patch(mh.eliasfano, "encode_parts", "signatures.encode_parts (eliasfano)")
if hasattr(mh.MinHasher, "signatures_and_codes"):
    patch(mh.MinHasher, "signatures_and_codes", "signatures (all of it)")
patch(fj, "iter_blocks", "read blocks (syscalls)", it=True)
patch(kl, "line_bounds_ascii")  # imported where called (the parse), so patched where defined
patch(kl, "blank_lines")
patch(fj, "_utf8_ok")
patch(fj._JsonlParser, "parse", "parse block (all of it)")
patch(kj, "extract", "extract (scanner, all of it)")
patch(kj, "_scan", "extract._scan")
if hasattr(kj, "scan_block"):  # the lines found while scanned (one pass, before extract)
    patch(kj, "scan_block", "scan_block (lines + scan, one pass)")
patch(kj, "_offsets", "extract._offsets")
patch(kj, "_gather", "extract._gather")
patch(kj.ScannedBlock, "extract", "scan_block.extract (texts, ids)")
patch(rd, "_process", "process batch (all of it)")
patch(mh.MinHasher, "signatures_and_fingerprints", "signatures (all of it)")
patch(mh, "_process_kernel", "signatures._process_kernel")
patch(mh, "_gather_sets", "signatures._gather_sets")
patch(sh, "prepare", "signatures.prepare")
from neardup.kernels import bands as kb
patch(kb, "band_keys")  # imported where called (_process), so patched where defined
patch(rd, "add_row_runs")
patch(rd, "_row_sources")
patch(rd, "_count_per_source")  # trees before small24's (rd._PerSource.add since)
if hasattr(rd, "_PerSource"):
    patch(rd._PerSource, "add", "_count_per_source")
if hasattr(rd, "count_range"):  # the pass before the ranges were read (their rows numbered from 0 since)
    patch(rd, "count_range", "count newlines of split ranges")
if hasattr(rd, "range_bytes"):
    patch(rd, "range_bytes", "range bounds of split ranges")
patch(rd.nio, "estimate_documents")
patch(rd, "read_block", "read_block (all of it)")
patch(rd, "_read_into", "_read_into (all of it)")
patch(rd.ReadStage, "finish", "stage finish (size and id checks)")
patch(rd, "numpy_fixed_binary")
patch(rd.pa, "concat_arrays", "concat_arrays (coalesced batches)")
if hasattr(rd, "pc"):  # trees before round 49 (no pyarrow.compute in a default run since)
    patch(rd.pc, "binary_length")
patch(pa.ipc.RecordBatchFileWriter, "write_batch", "arrow ipc write_batch")

result = {}
orig = rd.ReadStage.run


def run_read(self, run, engine):
    s = now(); w = time.perf_counter()
    try:
        return orig(self, run, engine)
    finally:
        e = now()
        result["read"] = {"cpu": round(e[0] - s[0], 3), "sys": round(e[1] - s[1], 3), "minflt": e[2] - s[2],
                          "wall": round(time.perf_counter() - w, 3)}
        raise SystemExit(0)


rd.ReadStage.run = run_read
from neardup.cli import main
out = tempfile.mkdtemp(prefix="read-profile-")
shutil.rmtree(out)
try:
    main(["dedup", sys.argv[1], "-o", out, "--quiet"])
except SystemExit:
    pass
shutil.rmtree(out, ignore_errors=True)
result["steps"] = {k: {"cpu": round(v[0], 3), "sys": round(v[1], 3), "minflt": v[2], "calls": v[3]}
                   for k, v in sorted(totals.items())}
print("PROFILE " + json.dumps(result))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees to profile (PYTHONPATH)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default="bench/results/read_profile.json")
    a = ap.parse_args()
    runs = []
    for i in range(a.repeat):
        for tree in a.trees:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), NEARDUP_JSONL_SCANNER="1")
            load = open("/proc/loadavg").read().split()[:3]
            p = subprocess.run([sys.executable, "-c", _CHILD, a.input], env=env, capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"{tree}: the profiled run failed:\n{p.stderr[-3000:]}")
            line = next(x for x in p.stdout.splitlines() if x.startswith("PROFILE "))
            rec = json.loads(line[len("PROFILE "):])
            rec.update(tree=tree, repeat=i, load_before=load)
            runs.append(rec)
            r = rec["read"]
            print(f"{tree}: read stage CPU {r['cpu']:.2f} sys {r['sys']:.2f} wall {r['wall']:.2f} "
                  f"(load {' '.join(load)})")
            for name, v in rec["steps"].items():
                print(f"  {name:36s} CPU {v['cpu']:7.2f} sys {v['sys']:6.2f} faults {v['minflt']:8d} "
                      f"calls {v['calls']}")
    with open(a.out, "w") as f:
        json.dump({"input": a.input, "command": " ".join(sys.argv), "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
