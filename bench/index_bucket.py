"""What a big bucket costs a query, to choose ``neardup.index.core.MAX_BUCKET`` by measurement.

An index whose ``--bucket`` documents share all their band keys (boilerplate: one bucket of that
size in every band of one segment) and have random shingle fingerprints (``--fps`` each, so that
none verifies), plus ``--others`` ordinary documents; one query document with those band keys.
``Index.match`` of that document is timed (best of ``--repeat``) with the bound lifted, for each
bucket size: the wall and CPU time of verifying one candidate, and of a whole bucket, with the
load average beside it (the machine is shared). MAX_BUCKET is then the largest bucket whose
verification stays within ``--budget-ms`` of CPU for one query document in one segment. Writes
``bench/results/index_bucket.json``::

    python bench/index_bucket.py --sizes 1000 5000 20000 50000 --budget-ms 20
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import common


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000, 50000])
    ap.add_argument("--fps", type=int, default=330, help="fingerprints a document (330: a ~2 KB text)")
    ap.add_argument("--others", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budget-ms", type=float, default=20.0)
    ap.add_argument("--out", default=str(common.RESULTS_DIR / "index_bucket.json"))
    args = ap.parse_args(argv)
    from neardup.index import Index, core

    result = {**common.run_header(sys.argv), "fps": args.fps, "others": args.others, "repeat": args.repeat,
              "budget_ms": args.budget_ms, "sizes": []}
    rng = np.random.default_rng(0)
    for size in args.sizes:
        tmp = tempfile.mkdtemp(prefix="bench-bucket-")
        try:
            idx = Index(os.path.join(tmp, "ix"), workers=1)
            b = idx.config.bands
            n = size + args.others
            keys = rng.integers(0, 2**63, size=(n, b), dtype=np.uint64)
            shared = rng.integers(0, 2**63, size=b, dtype=np.uint64)
            keys[:size] = shared
            off = np.arange(n + 1, dtype=np.int64) * args.fps
            fp = rng.integers(0, 2**32, size=n * args.fps, dtype=np.uint64).astype(np.uint32)
            idx.add_arrays(keys, [f"d{i}" for i in range(n)], "bench", shingles=(off, fp))
            q_off = np.array([0, args.fps], np.int64)
            q_fp = rng.integers(0, 2**32, size=args.fps, dtype=np.uint64).astype(np.uint32)
            core.MAX_BUCKET = 1 << 40  # lifted: the whole bucket is verified
            times, cpu = [], []
            for _ in range(args.repeat + 1):  # the first call reads and checks the files
                t0, c0 = time.perf_counter(), time.process_time()
                m = idx.match(shared[None, :], shingles=(q_off, q_fp))
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            best, best_cpu = min(times[1:]), min(cpu[1:])
            row = {"bucket": size, "candidates": m.candidates, "best_s": round(best, 5),
                   "best_cpu_s": round(best_cpu, 5),
                   "us_per_candidate": round(1e6 * best / max(m.candidates, 1), 3),
                   "cpu_us_per_candidate": round(1e6 * best_cpu / max(m.candidates, 1), 3),
                   "load_average": os.getloadavg()[0]}
            result["sizes"].append(row)
            print(row, flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    # CPU time (one thread): what the machine's load does not inflate as much as the wall clock
    per = float(np.median([r["cpu_us_per_candidate"] for r in result["sizes"] if r["bucket"] >= 5000] or
                          [r["cpu_us_per_candidate"] for r in result["sizes"]]))
    result["median_us_per_candidate"] = per
    result["bound_for_budget"] = int(args.budget_ms * 1000 / per)
    print("µs a candidate", per, "-> bucket within budget", result["bound_for_budget"])
    common.write_json(Path(args.out), result)


if __name__ == "__main__":
    main()
