"""Read speed of neardup.io.read_source on big local JSONL files, for one or more source trees
in one run (interleaved, fresh process each time; wall and CPU seconds, all threads, the minimum
over the repeats).

    python bench/io_read.py --make 200000            # /tmp/neardup-read.jsonl{,.gz,.zst}
    python bench/io_read.py --trees /path/old/src src --repeat 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys

BASE = "/tmp/neardup-read.jsonl"
_CHILD = r"""
import resource, sys, time
from neardup.io import discover, read_source
(src,) = discover([sys.argv[1]])
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
t, c = time.perf_counter(), cpu()
n = sum(len(b) for b in read_source(src, id_column="id"))
print(n, time.perf_counter() - t, cpu() - c)
"""


def make(n: int) -> None:
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(5000)]
    with open(BASE, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": i, "text": " ".join(rng.choice(words) for _ in range(300))}) + "\n")
    with open(BASE, "rb") as fi, gzip.open(BASE + ".gz", "wb", compresslevel=6) as fo:
        shutil.copyfileobj(fi, fo, 1 << 20)
    import zstandard

    with open(BASE, "rb") as fi, open(BASE + ".zst", "wb") as fo:
        zstandard.ZstdCompressor(level=3).copy_stream(fi, fo)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--make", type=int, help="write the test files with this many documents")
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees to compare (PYTHONPATH)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if a.make:
        make(a.make)
    best = {}
    for _ in range(a.repeat):
        for path in (BASE, BASE + ".gz", BASE + ".zst"):
            for tree in a.trees:
                env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
                out = subprocess.run([sys.executable, "-c", _CHILD, path], env=env, check=True,
                                     capture_output=True, text=True).stdout.split()
                n, wall, cpu = int(out[0]), float(out[1]), float(out[2])
                key = (os.path.basename(path), tree)
                w0, c0, _ = best.get(key, (1e9, 1e9, n))
                best[key] = (min(w0, wall), min(c0, cpu), n)
    size = os.path.getsize(BASE) / 1e6
    for (name, tree), (wall, cpu, n) in best.items():
        print(f"{name:24s} {tree:28s} {n} docs  wall {wall:6.2f} s ({size / wall:4.0f} MB/s)  cpu {cpu:6.2f} s")


if __name__ == "__main__":
    main()
