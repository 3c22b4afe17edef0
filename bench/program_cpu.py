"""The ``neardup`` program's fixed costs, A/B between source trees in CPU-seconds (for a machine
other helpers load): a whole ``python -m neardup dedup CORPUS -o OUT --overwrite --quiet``
(user + sys of the process; default corpus: the 100k corpus's first 10 documents, so that the
start-up, the report and the publish over an old result are most of it), and the program's
import of numba alone (``neardup.cli._import_numba``, CPU of the process). The trees alternate,
A B then B A, each with its bytecode written once under its own ``PYTHONPYCACHEPREFIX`` by an
untimed run (as pip installs it); ``NEARDUP_JSONL_SCANNER=1``. Medians and every value, the
load average before and after.

    .venv/bin/python bench/program_cpu.py --trees /work/main/src src --rounds 12 \\
        --output bench/results/program_cpu.json
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, run_header, write_json  # noqa: E402

IMPORT = ("import time; c = time.process_time(); from neardup.cli import _import_numba; _import_numba(); "
          "print(time.process_time() - c)")


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", nargs="+", default=["/work/main/src", "src"])
    ap.add_argument("--corpus", default=None, help="default: the first 10 lines of bench/data/synth_100000_s0.jsonl")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--output", default=str(RESULTS_DIR / "program_cpu.json"))
    a = ap.parse_args()
    scratch = Path(a.scratch or tempfile.mkdtemp(prefix="program_cpu-"))
    scratch.mkdir(parents=True, exist_ok=True)
    corpus = a.corpus
    if corpus is None:
        corpus = str(scratch / "ten.jsonl")
        with open(DATA_DIR / "synth_100000_s0.jsonl") as src, open(corpus, "w") as dst:
            dst.writelines(line for _, line in zip(range(10), src))
    trees = [os.path.abspath(t) for t in a.trees]

    def env(i: int) -> dict:
        e = dict(os.environ, PYTHONPATH=trees[i], NEARDUP_JSONL_SCANNER="1",
                 PYTHONPYCACHEPREFIX=str(scratch / f"pycache{i}"))
        e.pop("PYTHONDONTWRITEBYTECODE", None)
        return e

    def dedup(i: int) -> list:
        return [sys.executable, "-m", "neardup", "dedup", corpus, "-o", str(scratch / f"out{i}"), "--quiet", "--overwrite"]

    for i in range(len(trees)):  # untimed: the bytecode, an old result to publish over
        subprocess.run(dedup(i), env=env(i), check=True)
        subprocess.run([sys.executable, "-c", IMPORT], env=env(i), check=True, capture_output=True)
    result = {**run_header(sys.argv), "corpus": corpus, "rounds": a.rounds, "load_before": os.getloadavg(),
              "run_cpu_s": {t: [] for t in trees}, "import_numba_cpu_s": {t: [] for t in trees}}
    for r in range(a.rounds):
        for i in (range(len(trees)) if r % 2 == 0 else reversed(range(len(trees)))):
            c = children_cpu()
            subprocess.run(dedup(i), env=env(i), check=True)
            result["run_cpu_s"][trees[i]].append(round(children_cpu() - c, 4))
            p = subprocess.run([sys.executable, "-c", IMPORT], env=env(i), check=True, capture_output=True, text=True)
            result["import_numba_cpu_s"][trees[i]].append(round(float(p.stdout), 4))
    result["load_after"] = os.getloadavg()
    for key in ("run_cpu_s", "import_numba_cpu_s"):
        result["median_" + key] = {t: statistics.median(v) for t, v in result[key].items()}
    write_json(Path(a.output), result)
    for t in trees:
        print(t, "run CPU-s median", result["median_run_cpu_s"][t], "import numba CPU-s median",
              result["median_import_numba_cpu_s"][t])


if __name__ == "__main__":
    main()
