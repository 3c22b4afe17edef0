"""Signatures/s of two checkouts in one run, alternating, so that both see the same machine load.

    .venv/bin/python bench/before_after.py --before /work/base/src --after src --docs 20000 --rounds 3

Each round runs ``bench/signatures.py --tools neardup`` once with each checkout on PYTHONPATH
(the same synthetic ASCII corpus, neardup.testing.synth seed 0: the tokenizer's ASCII fast path) and
keeps neardup's docs/s (list of str, pyarrow array, one thread). Reports every round and the
median per checkout; writes bench/results/before_after.json (``--output``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402

KEYS = ("neardup", "neardup-arrow", "neardup-1thread")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="PYTHONPATH of the checkout before")
    ap.add_argument("--after", required=True, help="PYTHONPATH of the checkout after")
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "before_after.json")
    args = ap.parse_args(argv)
    script = Path(__file__).resolve().parent / "signatures.py"
    result = run_header(sys.argv)
    result["paths"] = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            row = {}
            for name in ("before", "after"):
                out = Path(tmp) / f"{name}{r}.json"
                env = dict(os.environ, PYTHONPATH=os.path.abspath(getattr(args, name)))
                subprocess.run([sys.executable, str(script), "--tools", "neardup", "--docs", str(args.docs),
                                "--pairs", "200", "--output", str(out)], env=env, check=True,
                               stdout=subprocess.DEVNULL)
                runs = json.loads(out.read_text())["runs"]
                row[name] = {k: runs[k]["docs_per_s"] for k in KEYS if k in runs}
                print(f"round {r} {name}: " + ", ".join(f"{k} {v:,.0f}/s" for k, v in row[name].items()),
                      flush=True)
            rounds.append(row)
    result["rounds"] = rounds
    result["median_docs_per_s"] = {name: {k: statistics.median(rw[name][k] for rw in rounds) for k in KEYS
                                          if all(k in rw[name] for rw in rounds)} for name in ("before", "after")}
    result["after_over_before"] = {k: result["median_docs_per_s"]["after"][k] / result["median_docs_per_s"]["before"][k]
                                   for k in result["median_docs_per_s"]["after"]}
    write_json(args.output, result)
    print(json.dumps(result["median_docs_per_s"], indent=1))
    print("after / before:", {k: round(v, 3) for k, v in result["after_over_before"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
