"""Peak memory of `Index.compact()`: streaming (this tree) against holding each merged group in
memory (another tree, e.g. the commit before streaming), on the same synthetic index.

The index is made with ``IndexWriter.add_arrays`` from random band keys and random shingle
fingerprints (what a segment holds does not depend on texts), ``--docs`` documents in
``--segments`` equal segments, optionally with every ``--remove-every``-th document removed
first (so the merge drops tombstoned documents too). Each step runs in its own process under
``common.run_measured``; the compaction's peak memory is that process's, less the peak of the same
process that only opens the index (imports and numba kernels). Writes
``bench/results/index_compaction.json``::

    python bench/index_compaction.py --docs 1000000 --segments 8 --before /work/main/src
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import common

CHILD = r"""
import json, sys, time
import numpy as np
from neardup.index import Index
what, path, docs, segments, fps, remove_every = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
if what == "build":
    idx = Index(path)
    rng = np.random.default_rng(0)
    per = docs // segments
    for s in range(segments):
        keys = rng.integers(0, 2**63, size=(per, idx.config.bands), dtype=np.uint64)
        sizes = rng.integers(fps // 2, fps * 3 // 2, size=per)
        off = np.zeros(per + 1, np.int64)
        np.cumsum(sizes, out=off[1:])
        values = rng.integers(0, 2**32, size=int(off[-1]), dtype=np.uint64).astype(np.uint32)
        ids = [f"doc-{s}-{i}" for i in range(per)]
        idx.add_arrays(keys, ids, f"part{s}", shingles=(off, values))
    if remove_every and hasattr(idx, "remove"):
        idx.remove(ids=[f"doc-{s}-{i}" for s in range(segments) for i in range(0, per, remove_every)])
    print(json.dumps(idx.stats()))
elif what == "open":
    idx = Index(path)
    print(json.dumps({"documents": idx.stats()["documents"]}))
else:
    idx = Index(path)
    t0 = time.perf_counter()
    r = idx.compact()
    print(json.dumps(dict(r, wall=time.perf_counter() - t0, stats=idx.stats())))
"""


def step(src: str, what: str, path: str, args) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    r = common.run_measured([sys.executable, "-c", CHILD, what, path, args.docs, args.segments, args.fps,
                             args.remove_every], env=env)
    if r.get("returncode") != 0:
        raise SystemExit(f"{what} with {src} failed: {r.get('stderr_tail') or r}")
    out = json.loads(r["stdout_tail"].strip().splitlines()[-1])
    return {"result": out, "peak_memory_bytes": r["peak_memory_bytes"], "wall_s": r.get("wall_s")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--fps", type=int, default=48, help="fingerprints per document, on average")
    ap.add_argument("--remove-every", type=int, default=10, help="remove every N-th document first (0: none)")
    ap.add_argument("--before", default=None, help="another source tree to compare with (its src/ folder)")
    ap.add_argument("--out", default=str(common.RESULTS_DIR / "index_compaction.json"))
    args = ap.parse_args(argv)
    trees = {"streaming": str(common.REPO_DIR / "src")}
    if args.before:
        trees["before"] = args.before
    result = {**common.run_header(sys.argv), "docs": args.docs, "segments": args.segments, "fps": args.fps,
              "remove_every": args.remove_every, "runs": {}}
    for name, src in trees.items():
        tmp = tempfile.mkdtemp(prefix="bench-compact-")
        try:
            path = os.path.join(tmp, "ix")
            built = step(src, "build", path, args)
            opened = step(src, "open", path, args)
            compacted = step(src, "compact", path, args)
            stats = built["result"]
            run = {"index_bytes": stats["bytes"], "documents": stats["documents"],
                   "segments_before": compacted["result"]["segments_before"],
                   "segments_after": compacted["result"]["segments_after"],
                   "compact_seconds": round(compacted["result"]["wall"], 2),
                   "open_peak_bytes": opened["peak_memory_bytes"],
                   "compact_peak_bytes": compacted["peak_memory_bytes"],
                   "compact_peak_over_open_bytes": compacted["peak_memory_bytes"] - opened["peak_memory_bytes"]}
            result["runs"][name] = run
            print(name, json.dumps(run), flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    common.write_json(Path(args.out), result)


if __name__ == "__main__":
    main()
