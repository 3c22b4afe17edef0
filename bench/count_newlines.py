"""The newline count of a file's split ranges alone (:func:`neardup.kernels.lines.count_newlines`,
as :mod:`neardup.io.splits` calls it: 16 MiB reads into one buffer), source trees alternating in
fresh processes: CPU seconds of the count calls (the reads not counted), the load with each.

    python bench/count_newlines.py --input bench/data/synth_1000000_s0.jsonl --src /work/main/src --src src \\
        --rounds 3 --out bench/results/count_newlines_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import RESULTS_DIR, run_header, write_json

CHILD = r'''
import sys, time
from neardup.kernels.lines import count_newlines
buf = bytearray(16 << 20)
view = memoryview(buf)
count_newlines(buf, 100)  # the kernel loaded before the timing
cpu, n = 0.0, 0
with open(sys.argv[1], "rb", buffering=0) as f:
    while True:
        got = f.readinto(view)
        if not got:
            break
        c0 = time.process_time()
        n += count_newlines(buf, got)
        cpu += time.process_time() - c0
print(n, round(cpu, 3))
'''


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--src", action="append", required=True, help="a source tree (its src/ folder); give two for A/B")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS_DIR / "count_newlines.json"))
    args = ap.parse_args(argv)
    result = {**run_header(sys.argv), "input": args.input, "runs": []}
    for r in range(args.rounds):
        for src in args.src:
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, "-c", CHILD, args.input], check=True, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": os.path.abspath(src)}).stdout.split()
            row = {"src": src, "round": r, "load_before": round(load, 2), "newlines": int(out[0]), "cpu_s": float(out[1])}
            result["runs"].append(row)
            print(json.dumps(row), flush=True)
    write_json(args.out, result)


if __name__ == "__main__":
    main()
