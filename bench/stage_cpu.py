"""CPU seconds (user, system), page faults and wall seconds of each stage of ``neardup dedup``,
two (or more) source trees alternating in one run, each run a fresh process: for speed work on a
shared machine, where wall time is noise and CPU seconds are not (much). The input is read with
the compiled JSONL scanner (``NEARDUP_JSONL_SCANNER=1``), as every input of 1 GiB or more is.

    python bench/stage_cpu.py --input bench/data/synth_1000000_s0.jsonl --trees /work/main/src src \\
        --repeat 2 --out bench/results/stage_cpu_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, resource, sys, time
import neardup.stages as st
def now():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt, time.perf_counter()
res = {}
for s in st.PIPELINE:
    def wrapped(run, engine, _orig=s.run, _name=s.name):
        a = now()
        try:
            return _orig(run, engine)
        finally:
            b = now()
            res[_name] = {"user": round(b[0] - a[0], 2), "sys": round(b[1] - a[1], 2),
                          "minflt": b[2] - a[2], "wall": round(b[3] - a[3], 2)}
    s.run = wrapped
from neardup.cli import main
code = main(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_SELF)
print("STAGES " + json.dumps({"stages": res, "maxrss_kb": r.ru_maxrss, "code": code}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees to compare (PYTHONPATH)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", default="bench/results/stage_cpu.json")
    a = ap.parse_args()
    runs = []
    for i in range(a.repeat):
        for tree in a.trees:
            out = tempfile.mkdtemp(prefix="stage-cpu-")
            shutil.rmtree(out)
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), NEARDUP_JSONL_SCANNER="1")
            load = open("/proc/loadavg").read().split()[:3]
            p = subprocess.run([sys.executable, "-c", _CHILD, "dedup", a.input, "-o", out, "--quiet"],
                               env=env, check=True, capture_output=True, text=True)
            line = next(x for x in p.stdout.splitlines() if x.startswith("STAGES "))
            rec = json.loads(line[len("STAGES "):])
            rec.update(tree=tree, repeat=i, load_before=load,
                       stats_seconds=json.load(open(os.path.join(out, "stats.json")))["seconds"])
            shutil.rmtree(out)
            runs.append(rec)
            rd = rec["stages"]["read"]
            print(f"{tree:28s} read user {rd['user']:6.2f} sys {rd['sys']:6.2f} faults {rd['minflt']:8d} "
                  f"wall {rd['wall']:6.2f}  peak RSS {rec['maxrss_kb'] / 1e6:.2f} GB  load {' '.join(load)}", flush=True)
    with open(a.out, "w") as f:
        json.dump({"input": a.input, "command": " ".join(sys.argv), "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
