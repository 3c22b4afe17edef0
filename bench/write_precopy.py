"""The write stage's steps before the kept lines' copy can start, over the work dir of a finished
run, source trees alternating in fresh processes (thread CPU seconds, median of the warm repeats):
the rows and line bounds of the file's documents (``rows_of_sources``), the kept rows
(``kept_rows``), the byte ranges to copy (``write_lines.kept_ranges``). The copy waits for them
on the stage's main thread: what they cost is wall time of the stage (issue 32).

    python bench/write_precopy.py --input bench/data/synth_1000000_s0.jsonl --work-dir W \\
        --src /work/wt-lead48/src,src --rounds 2 --repeats 12 --out bench/results/write_precopy.json

W is the ``--work-dir`` of a finished ``neardup dedup INPUT --work-dir W`` (one JSONL file).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import RESULTS_DIR, run_header, write_json
from pairs_steps import OPEN_WORK

CHILD = OPEN_WORK + r'''
import os
import numpy as np
from neardup.stages import write as W, write_lines as WL
from neardup.stages.outputs import kept_rows

size = os.path.getsize(inp)
steps = {"rows_of_sources": [], "kept_rows": [], "kept_ranges": [], "total": []}
dropped = None
for i in range(repeats + 1):
    run = Run(config=config, sources=sources, work=work, output=Folder.of(wd), quiet=True)
    if dropped is None:
        dropped = W.dropped_rows(run.work.folder, run.work.parts("clusters"), [0], {}).get(0, np.zeros(0, np.int64))
    c0 = time.thread_time()
    lines = {}
    rows = W.rows_of_sources(run.store, {0: list(range(len(run.corpus.blocks)))}, lines)[0]
    c1 = time.thread_time()
    keep = kept_rows(rows, dropped)
    c2 = time.thread_time()
    starts, ends, _ = WL.kept_ranges(rows, lines[0], keep, size)
    c3 = time.thread_time()
    if i:  # the first: the modules' first calls
        for k, v in zip(steps, (c1 - c0, c2 - c1, c3 - c2, c3 - c0)):
            steps[k].append(v)
print(json.dumps({"median_thread_cpu_s": {k: round(float(np.median(v)), 4) for k, v in steps.items()},
                  "ranges": len(starts), "bytes": int(np.sum(np.asarray(ends) - np.asarray(starts)))}))
'''


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--src", required=True, help="source trees (their src/ folders), comma-separated, alternated")
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(RESULTS_DIR / "write_precopy.json"))
    args = ap.parse_args(argv)
    result = {**run_header(sys.argv), "input": args.input, "runs": []}
    for r in range(args.rounds):
        for src in args.src.split(","):
            load = os.getloadavg()[0]
            proc = subprocess.run([sys.executable, "-c", CHILD, args.input, args.work_dir, str(args.repeats)],
                                  env={**os.environ, "PYTHONPATH": os.path.abspath(src)}, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"{src}: failed:\n{proc.stderr}")
            row = {"src": src, "round": r, "load_before": round(load, 2), **json.loads(proc.stdout.strip().splitlines()[-1])}
            result["runs"].append(row)
            print(json.dumps(row), flush=True)
    write_json(args.out, result)


if __name__ == "__main__":
    main()
