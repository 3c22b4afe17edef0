"""A small run on a Ray instance started before (issue 28: a 6k-document run on an already started
cluster, at most 5 s more than the local engine): starts ``ray start --head --num-cpus N`` (its
workers import this checkout's neardup), runs ``neardup dedup CORPUS --engine ray --ray-address
ADDR`` and the local engine alternately, ``--repeat`` times each, then stops the instance.
Records each run's wall seconds and checks that both engines' outputs are the same bytes
(stats.json aside).

    .venv/bin/python bench/started_cluster.py --docs 6000 --repeat 3 --output bench/results/started_cluster_6k.json
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import DATA_DIR, ensure_corpus, run_header, write_json  # noqa: E402

SRC = os.path.join(HERE, "..", "src")


def same_outputs(a: str, b: str) -> bool:
    cmp = filecmp.dircmp(a, b, ignore=["stats.json"])
    todo = [cmp]
    while todo:
        c = todo.pop()
        if c.left_only or c.right_only or c.diff_files or c.funny_files:
            return False
        todo.extend(c.subdirs.values())
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=6000, help="the first DOCS lines of the 100k benchmark corpus")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--port", type=int, default=6399)
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    ensure_corpus(100_000)
    tmp = tempfile.mkdtemp(prefix="started_cluster_")
    corpus = os.path.join(tmp, "corpus.jsonl")
    with open(DATA_DIR / "synth_100000_s0.jsonl", "rb") as src, open(corpus, "wb") as out:
        for _ in range(args.docs):
            out.write(src.readline())
    env = dict(os.environ, PYTHONPATH=os.path.abspath(SRC))
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    address = f"127.0.0.1:{args.port}"
    subprocess.run([ray, "start", "--head", "--num-cpus", str(args.cpus), "--port", str(args.port),
                    "--disable-usage-stats"], env=env, check=True, capture_output=True)
    walls = {"ray": [], "local": []}
    try:
        for _ in range(args.repeat):
            for engine in ("ray", "local"):
                extra = ["--engine", "ray", "--ray-address", address] if engine == "ray" else []
                out = os.path.join(tmp, engine)
                t0 = time.monotonic()
                subprocess.run([sys.executable, "-m", "neardup", "dedup", corpus, "-o", out, "--quiet", "--overwrite",
                                *extra], env=env, check=True)
                walls[engine].append(round(time.monotonic() - t0, 3))
                print(engine, walls[engine][-1], flush=True)
        same = same_outputs(os.path.join(tmp, "ray"), os.path.join(tmp, "local"))
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    result = {**run_header(sys.argv), "docs": args.docs, "cpus": args.cpus, "wall_s": walls, "median_wall_s": med,
              "ray_minus_local_s": round(med["ray"] - med["local"], 3), "same_bytes": same,
              "load_average_at_end": os.getloadavg()}
    write_json(args.output, result)
    print(f"median ray {med['ray']:.2f} s, local {med['local']:.2f} s, +{med['ray'] - med['local']:.2f} s;",
          "same bytes" if same else "DIFFERENT BYTES")


if __name__ == "__main__":
    main()
