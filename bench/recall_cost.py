"""The time cost of the default bands and rows (issue 30): interleaved runs of ``neardup dedup`` on
the 100k benchmark corpus (bench/pipeline.py writes it) at 13 x 7 (``--min-recall 0.95``, the
default before) and 18 x 7 (the default since), three of each; wall and CPU seconds, the stages'
seconds from stats.json, exact candidate counts, the load average before each run.

    .venv/bin/python bench/recall_cost.py bench/results/pipeline_recall30_100k_timing.json
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
corpus = "bench/data/synth_100000_s0.jsonl"
OUT = os.path.join(tempfile.gettempdir(), "neardup-recall-cost")
out = []
for rep in range(3):
    for name, extra in (("13x7 (--min-recall 0.95)", ["--min-recall", "0.95"]), ("18x7 (default)", [])):
        cmd = [sys.executable, "-m", "neardup", "dedup", corpus, "--output", OUT, "--overwrite",
               "--threshold", "0.8", "--quiet", *extra]
        load = os.getloadavg()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=dict(os.environ, PYTHONPATH=os.path.abspath("src")))
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        st = json.load(open(os.path.join(OUT, "stats.json")))
        row = {"run": name, "rep": rep, "wall_s": round(wall, 2), "cpu_s": round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 2),
               "stage_seconds": st["seconds"], "candidate_pairs": st["counts"]["candidate_pairs"],
               "verified_pairs": st["counts"]["verified_pairs"], "removed": st["counts"]["removed"],
               "load_average_before": [round(x, 2) for x in load], "command": " ".join(cmd)}
        print(json.dumps(row), flush=True)
        out.append(row)
json.dump({"what": __doc__, "runs": out, "load_average_at_end": os.getloadavg()}, open(sys.argv[1], "w"), indent=1)
