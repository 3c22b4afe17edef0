"""The pair stage alone, step by step, over the work dir of a finished run, A/B between source
trees: where its time goes as the corpus grows (issue 32: "the pair stage linear in the corpus").

    python bench/pairs_steps.py --input bench/data/synth_1000000_s0.jsonl --work-dir W \
        --src /work/main/src --src src [--repeats 2] [--out bench/results/pairs_steps.json]

W is the ``--work-dir`` of an earlier ``neardup dedup INPUT... --work-dir W`` with default options
(the read stage done), each INPUT given as it was to that run (``--input`` once per INPUT), from the same folder (or one W a
tree, ``--work-dir`` given once per ``--src``: each tree on the work dir it wrote, where a change
moved the work dir's bytes); each source tree re-runs ``PairsStage.whole`` on it in a process of its
own, trees interleaved, ``repeats`` times in each process (the first loads the kernels). Per run:
wall and CPU seconds (the process's user + system, every thread, and each apart), what it read from
storage rather than the page cache (``disk_read_bytes``, ``major_faults``: a work dir's files
evicted) and its minor page faults, and those of its steps
(bucket formation and its parts, the search's rounds, reading the fingerprints, the Jaccard
kernel, ...; steps nest: bucket_runs holds _runs_of), with the calling thread's CPU seconds
(``thread_cpu_s``: the serial part of a step whose kernel runs in numba's threads), and whether its pairs file is
byte-identical to the first tree's. CPU seconds are the figure to compare on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from common import RESULTS_DIR, run_header, write_json

# a child's start (argv: INPUT WORK_DIR REPEATS): the finished work dir opened as a run of the
# default options over INPUT would open it (config, sources, work; Run imported); write_precopy.py too
OPEN_WORK = r'''
import json, os, resource, sys, time
from neardup import io as nio
from neardup.config import Config
from neardup.io.storage.folder import Folder
from neardup.stages.context import Run
from neardup.stages.identity import run_identity
from neardup.stages.workdir import WorkDir

inp, wd, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = Config().resolved()
sources = nio.discover(inp.split(os.pathsep), input_format=config.input_format, follow_symlinks=config.follow_symlinks)
chosen, auto = nio.choose_id_column(sources, None)
if auto:
    config = config.replace(id_column=chosen, id_column_auto=True)
work = WorkDir(Folder.of(wd), run_identity(config, sources), resume=True)
'''

CHILD = OPEN_WORK + r'''
from neardup.stages import corpus as C, pairs as P
steps = {}

def timed(owner, name, label):
    if not hasattr(owner, name):
        return
    f = getattr(owner, name)
    def g(*a, **k):
        u0 = resource.getrusage(resource.RUSAGE_SELF)
        t0, c0, h0 = time.perf_counter(), time.process_time(), time.thread_time()
        r = f(*a, **k)
        u1 = resource.getrusage(resource.RUSAGE_SELF)
        s = steps.setdefault(label, [0.0, 0.0, 0, 0.0, 0, 0])
        s[0] += time.perf_counter() - t0
        s[1] += time.process_time() - c0
        s[2] += 1
        s[3] += time.thread_time() - h0
        s[4] += u1.ru_minflt - u0.ru_minflt
        s[5] += u1.ru_majflt - u0.ru_majflt
        return r
    setattr(owner, name, g)

from neardup.kernels import bands as B, components as K, verify as V
raw_kernel = V.exact_jaccard_coded
# the steps as the stage calls them: a function imported inside another is timed on its module
for owner, names in ((P, ("search_partition", "make_verifier", "verify_in_place", "dense_unique", "block_windows",
                          "locality_chunks", "distinct_pairs")),
                     (B, ("bucket_runs", "_keep_perm", "_in_threads", "_runs_of", "find_pairs", "_round_codes",
                          "unique", "_isin_sorted", "_large_runs", "_next_runs")),
                     (K, ("keep_order",)), (V, ("exact_jaccard_raw", "exact_jaccard_coded"))):
    for name in names:
        timed(owner, name, name)
for name in ("fingerprints", "codes", "code_places", "signatures", "hold_counts"):
    timed(C.DocStore, name, "read " + name)
again = int(sys.argv[4])  # each call of the coded Jaccard kernel made this many times more, timed alone
if again:
    once = V.exact_jaccard_coded  # timed as a step
    def repeated(*a, **k):
        for _ in range(again):
            c0 = time.process_time()
            raw_kernel(*a, **k)
            s = steps.setdefault("exact_jaccard_coded again", [0.0, 0.0, 0, 0.0, 0, 0])
            s[1] += time.process_time() - c0
            s[2] += 1
        return once(*a, **k)
    V.exact_jaccard_coded = repeated
out = []
for _ in range(repeats):
    steps.clear()
    run = Run(config=config, sources=sources, work=work, output=Folder.of(wd), quiet=True)
    excluded = run.excluded_from_pairs()
    u0 = resource.getrusage(resource.RUSAGE_SELF)
    t0, c0 = time.perf_counter(), time.process_time()
    info = P.PairsStage().whole(run, excluded)
    u1 = resource.getrusage(resource.RUSAGE_SELF)
    out.append({"wall_s": round(time.perf_counter() - t0, 3), "cpu_s": round(time.process_time() - c0, 3),
                "user_s": round(u1.ru_utime - u0.ru_utime, 3), "sys_s": round(u1.ru_stime - u0.ru_stime, 3),
                # read from storage, not the page cache (the work files evicted: this VM pages out idle files)
                "disk_read_bytes": (u1.ru_inblock - u0.ru_inblock) * 512, "major_faults": u1.ru_majflt - u0.ru_majflt,
                "minor_faults": u1.ru_minflt - u0.ru_minflt,
                "steps": {k: {"wall_s": round(v[0], 3), "cpu_s": round(v[1], 3), "thread_cpu_s": round(v[3], 3),
                              "calls": v[2], "minor_faults": v[4], "major_faults": v[5]} for k, v in steps.items()}})
print(json.dumps({"runs": out, "documents": run.corpus.n, "candidate_pairs": info.candidate_pairs,
                  "verified_pairs": info.verified_pairs,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
'''


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", action="append", required=True,
                    help="the run's input; once per INPUT where the run had several (the 10M shards)")
    ap.add_argument("--work-dir", action="append", required=True,
                    help="once, or once per --src: each tree on a work dir of its own (written by it: a "
                         "change of the work dir's format)")
    ap.add_argument("--src", action="append", required=True, help="a source tree (its src/ folder); give two for A/B")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="trees interleaved this many times")
    ap.add_argument("--kernel-repeats", type=int, default=0,
                    help="each call of exact_jaccard_coded made this many times more (a micro-bench of the "
                         "kernel over the run's own pairs: step 'exact_jaccard_coded again', CPU-s)")
    ap.add_argument("--out", default=str(RESULTS_DIR / "pairs_steps.json"))
    args = ap.parse_args(argv)
    if len(args.work_dir) not in (1, len(args.src)):
        ap.error("give --work-dir once, or once per --src")
    trees = list(zip(args.src, args.work_dir * len(args.src) if len(args.work_dir) == 1 else args.work_dir))
    result = {**run_header(sys.argv), "input": args.input, "runs": []}
    reference = None
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for src, wd in trees:
                load = os.getloadavg()[0]
                proc = subprocess.run([sys.executable, "-c", CHILD, os.pathsep.join(args.input), wd, str(args.repeats),
                                       str(args.kernel_repeats)],
                                      env={**os.environ, "PYTHONPATH": os.path.abspath(src)},
                                      capture_output=True, text=True)
                if proc.returncode:
                    sys.exit(f"{src}: the run failed:\n{proc.stderr}")
                row = {"src": src, "work_dir": wd, "round": r, "load_before": load, **json.loads(proc.stdout.strip().splitlines()[-1])}
                part = os.path.join(wd, "pairs", "part-00000.arrow")
                data = open(part, "rb").read()
                if reference is None:
                    reference = os.path.join(tmp, "pairs.parquet")
                    shutil.copy(part, reference)
                row["pairs_file_same_as_first"] = data == open(reference, "rb").read()
                result["runs"].append(row)
                print(json.dumps({k: row[k] for k in ("src", "round", "load_before", "runs", "pairs_file_same_as_first")}),
                      flush=True)
    write_json(args.out, result)


if __name__ == "__main__":
    main()
