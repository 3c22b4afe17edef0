"""The duplicate-id check at the end of the read stage (``ReadStage.finish``: the ids read back,
hashed, grouped and checked), A/B between source trees, alternated in the same minutes.

    .venv/bin/python bench/duplicate_ids.py --src /work/main/src,src --docs 100000 --repeat 4

For each repeat and each tree, a fresh ``neardup dedup`` of the corpus (the JSONL scanner on,
``NEARDUP_JSONL_SCANNER=1``) in a child process that times ``ReadStage.finish`` (CPU seconds of
the process and wall); the load average before and after. Writes JSON (``--output``, default
bench/results/duplicate_ids.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, run_header, write_json  # noqa: E402

CHILD = r"""
import json, sys, time
from neardup.stages.read import ReadStage
finish, took = ReadStage.finish, {}
def timed(*a, **k):
    c, t = time.process_time(), time.perf_counter()
    try:
        return finish(*a, **k)
    finally:
        took.update(cpu_s=round(time.process_time() - c, 5), wall_s=round(time.perf_counter() - t, 5))
ReadStage.finish = timed
from neardup.cli import main
main(["dedup", sys.argv[1], "-o", sys.argv[2], "--overwrite", "--quiet"])
print(json.dumps(took))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="/work/main/src,src", help="source trees, comma-separated")
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--scratch", default="/tmp/duplicate_ids_bench")
    ap.add_argument("--output", default=str(RESULTS_DIR / "duplicate_ids.json"))
    args = ap.parse_args(argv)
    corpus = DATA_DIR / f"synth_{args.docs}_s0.jsonl"
    trees = [str(Path(t).resolve()) for t in args.src.split(",")]
    result = {**run_header(sys.argv), "corpus": str(corpus), "load_before": os.getloadavg(),
              "runs": {t: [] for t in trees}}
    for r in range(args.repeat):
        for i, tree in enumerate(trees):
            out = Path(args.scratch) / f"out{i}"
            env = {**os.environ, "PYTHONPATH": tree, "NEARDUP_JSONL_SCANNER": "1"}
            done = subprocess.run([sys.executable, "-c", CHILD, str(corpus), str(out)], env=env, check=True,
                                  capture_output=True, text=True)
            took = json.loads(done.stdout.strip().splitlines()[-1])
            result["runs"][tree].append(took)
            print(f"{r + 1}/{args.repeat} {tree}: {took}", flush=True)
    shutil.rmtree(args.scratch, ignore_errors=True)
    result["load_after"] = os.getloadavg()
    result["best_cpu_s"] = {t: min(x["cpu_s"] for x in runs) for t, runs in result["runs"].items()}
    print(result["best_cpu_s"])
    write_json(Path(args.output), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
