"""The write stage alone, for one or more source trees in one run (interleaved, a fresh process
each time): a finished work dir given with ``--resume`` reruns only the write stage. Per run:
stats.json's write seconds and the process's CPU seconds (user + sys, all threads, start-up
included); the minimum over the repeats, and the load average at each run. Trees of different
work-dir layouts each need their own work dir: ``--work-dir`` one per tree, in the order of
``--trees``.

    neardup dedup bench/data/synth_100000_s0.jsonl -o /tmp/ws/out --work-dir /tmp/ws/w100k  # once
    python bench/write_stage.py bench/data/synth_100000_s0.jsonl --work-dir /tmp/ws/w100k \\
        --trees /work/main/src src --repeat 3 --out bench/results/write_stage_100k.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import summarise_runs  # noqa: E402
import tempfile


def one(tree: str, corpus: str, work: str, out: str) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    subprocess.run([sys.executable, "-m", "neardup", "dedup", corpus, "-o", out, "--work-dir", work, "--resume",
                    "-q"], env={**os.environ, "PYTHONPATH": os.path.abspath(tree)}, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.path.join(out, "stats.json")) as f:
        write = json.load(f)["seconds"]["write"]
    return {"write_s": write, "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "load": round(load, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--work-dir", required=True, nargs="+",
                    help="a finished run's work dir (--work-dir of that run), or one per tree")
    ap.add_argument("--trees", nargs="+", default=["src"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    runs = {t: [] for t in a.trees}
    works = a.work_dir * len(a.trees) if len(a.work_dir) == 1 else a.work_dir
    if len(works) != len(a.trees):
        ap.error("--work-dir: one, or one per tree")
    with tempfile.TemporaryDirectory(prefix="neardup-write-") as tmp:
        for k in range(a.repeat):
            order = list(enumerate(a.trees))
            for i, t in (order if k % 2 == 0 else order[::-1]):  # A B B A ...
                out = os.path.join(tmp, f"out{i}")
                r = one(t, a.corpus, works[i], out)
                shutil.rmtree(out, ignore_errors=True)  # 1M: 2.3 GB of kept/
                runs[t].append(r)
                print(t, r, flush=True)
    summarise_runs(a.corpus, runs, ("write_s", "cpu_s"), a.out)


if __name__ == "__main__":
    main()
