"""The first runs on a fresh machine (CI, a user's first day): every kernel compiled, numba's
cache empty (``NUMBA_CACHE_DIR`` a new empty folder for each tree and round). The steps, each a
fresh ``neardup`` process sharing that cache: a JSONL file, the same gzipped (its blocks bytes,
the plain file's a reader's bytearray), both read by the compiled JSONL scanner as an input of
1 GiB or more is (``NEARDUP_JSONL_SCANNER=1``), a folder of small text files (read and copied by
the compiled file loops), a list of texts in memory. For each source tree,
alternating: CPU seconds (user + sys of the processes) of each step, and the compiled versions
numba wrote (``.nbc`` files: one a kernel and argument types); the load average beside each.

    python bench/cold_compile.py --trees src /work/main/src --rounds 2

Results: bench/results/cold_compile.json (with the command, the machine and the load).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile

from common import DATA_DIR, RESULTS_DIR, run_header, write_json

_TEXTS = r"""
import neardup
neardup.dedup(["the cat sat on the mat today", "the cat sat on the mat today!", "another text"], threshold=0.5)
"""


def _small_files(folder: str, corpus: str, n: int) -> str:
    """A folder of the corpus's first ``n`` texts, one a file."""
    os.makedirs(folder)
    with open(corpus, encoding="utf-8") as f:
        for i, line in zip(range(n), f):
            with open(os.path.join(folder, f"{i:05d}.txt"), "w", encoding="utf-8") as out:
                out.write(json.loads(line)["text"])
    return folder


def _gzipped(path: str, corpus: str) -> str:
    with open(corpus, "rb") as f, gzip.open(path, "wb") as out:
        out.write(f.read())
    return path


def _steps(work: str, corpus: str, gzipped: str, small: str):
    neardup = [sys.executable, "-m", "neardup", "dedup", "--quiet", "--overwrite"]
    return {"jsonl": neardup + [corpus, "-o", os.path.join(work, "jsonl")],
            "jsonl_gz": neardup + [gzipped, "-o", os.path.join(work, "jsonl_gz")],
            "small_files": neardup + [small, "-o", os.path.join(work, "small")],
            "texts": [sys.executable, "-c", _TEXTS]}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", nargs="+", default=["src"], help="source trees to compare (PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--corpus", default=str(DATA_DIR / "synth_2000_s0.jsonl"))
    ap.add_argument("--files", type=int, default=500, help="small text files (the corpus's first texts)")
    ap.add_argument("--out", default=str(RESULTS_DIR / "cold_compile.json"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cold-compile-") as scratch:
        small = _small_files(os.path.join(scratch, "small"), a.corpus, a.files)
        gzipped = _gzipped(os.path.join(scratch, "corpus.jsonl.gz"), a.corpus)
        runs = []
        for r in range(a.rounds):
            for tree in a.trees:
                cache, work = (os.path.join(scratch, f"{what}-{r}-{len(runs)}") for what in ("cache", "out"))
                os.makedirs(cache)
                env = {**os.environ, "PYTHONPATH": os.path.abspath(tree), "NUMBA_CACHE_DIR": cache,
                       "NEARDUP_JSONL_SCANNER": "1"}
                run = {"tree": tree, "round": r + 1, "load": os.getloadavg(), "cpu_s": {}}
                for step, cmd in _steps(work, a.corpus, gzipped, small).items():
                    before = _children_cpu()
                    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                    run["cpu_s"][step] = round(_children_cpu() - before, 2)
                run["cpu_s"]["all"] = round(sum(run["cpu_s"].values()), 2)
                run["compiled_versions"] = sum(n.endswith(".nbc") for _, _, names in os.walk(cache) for n in names)
                runs.append(run)
                print(json.dumps(run), flush=True)
    write_json(a.out, {**run_header(sys.argv), "runs": runs})


if __name__ == "__main__":
    main()
