"""What a dedup run spends outside its four stages that the code decides (issue 32): the
(bands, rows) search at start-up and the report drawn after the write stage, A/B between source
trees, alternated in the same minutes.

    .venv/bin/python bench/outside_stages.py --folder OUT --trees /work/main/src src --repeat 3

``--folder``: an output folder of ``neardup dedup`` (its report is drawn again, not written).
Each measurement is a fresh subprocess with ``PYTHONPATH=TREE``: the report as the Ray engine's
driver draws it (no kernel loaded before it), its CPU-seconds, wall and the process's max RSS;
then ``choose_params(0.8, 128)`` uncached, CPU-seconds (after the package is imported). Writes
JSON (``--out``, default bench/results/outside_stages.json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from neardup.report.html import render_report
from neardup.config.params import _choose_params
c, w = time.process_time(), time.perf_counter()
page = render_report(sys.argv[1], plots="svg")
report = {"cpu_s": round(time.process_time() - c, 3), "wall_s": round(time.perf_counter() - w, 3),
          "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "bytes": len(page)}
c = time.process_time()
_choose_params.__wrapped__(0.8, 128)
print(json.dumps({"report": report, "choose_params_cpu_s": round(time.process_time() - c, 3)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", required=True)
    ap.add_argument("--trees", nargs="+", default=["/work/main/src", "src"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="bench/results/outside_stages.json")
    a = ap.parse_args()
    runs = {t: [] for t in a.trees}
    for _ in range(a.repeat):
        for t in a.trees:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(t))
            out = subprocess.run([sys.executable, "-c", CHILD, a.folder], env=env, check=True,
                                 capture_output=True, text=True).stdout
            runs[t].append(json.loads(out.strip().splitlines()[-1]))
    result = {"command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]), "folder": a.folder,
              "load_before": os.getloadavg(), "runs": runs}
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(result, fh, indent=1)
    for t, rs in runs.items():
        print(t, "report cpu_s", [r["report"]["cpu_s"] for r in rs], "maxrss_mib", [r["report"]["maxrss_mib"] for r in rs],
              "choose_params cpu_s", [r["choose_params_cpu_s"] for r in rs])


if __name__ == "__main__":
    main()
