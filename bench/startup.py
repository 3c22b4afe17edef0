"""A `neardup dedup` run end to end, start-up included (issue 32): where its wall goes outside
the work, A/B between source trees, alternated in the same minutes.

    .venv/bin/python bench/startup.py --trees /work/main/src src --docs 100000 --repeat 3

For each repeat and each tree (alternated), a fresh ``python -m neardup dedup CORPUS -o OUT
--overwrite --quiet``: its wall, its CPU-seconds (user + sys of the process and its children)
and its stages' seconds (stats.json); the same on the first 10 documents of the corpus (the
fixed costs: imports, numba's set-up, kernel loading, report, exit). Then, for the last tree, one
timeline of a run in one process (``--timeline``): the import of neardup, each kernel loaded
from numba's cache (wall, CPU, thread), each stage, the report, the publish and the work dir's
removal, with the process's end measured from outside. Writes JSON (``--output``, default
bench/results/startup.json).

Python's bytecode: an installed neardup (pip compiles it at install) and the peers' packages
start from their .pyc files; a source tree run with ``PYTHONDONTWRITEBYTECODE=1`` and no
__pycache__ compiles every module of neardup at each start (~100 modules, 1.1 G instructions).
``--bytecode cached`` runs every tree as installed: its bytecode written once under
``SCRATCH/pycache`` (``PYTHONPYCACHEPREFIX``, the trees untouched) by the untimed first run and
read by the timed ones; ``--bytecode both`` runs each tree both ways, alternated ("TREE
(bytecode cached)"); the default, ``env``, as the environment says. The result records it
(``bytecode``); under ``PYTHONDONTWRITEBYTECODE=1`` it lists, per tree, the modules whose
bytecode is stale or missing (``stale_bytecode``: compiled again at every start) and warns.

``--phases N``: N more runs a tree (alternated) on the first 10 documents, each cut at the
program's own functions (``neardup.cli.main``'s path, numba imported as the program imports it):
the CPU-seconds of the process in each phase (``phases_10_docs_cpu_s``, min and median): Python's
start, neardup.cli, numba, the parser, the library with numba's runtime, each stage, the report,
the publish, the work dir's removal, the exit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, run_header, write_json  # noqa: E402

TIMELINE = r"""
import sys, time, threading
T0, C0 = time.perf_counter(), time.process_time()
events, loads = [], []
def mark(name):
    events.append((name, round(time.perf_counter() - T0, 4), round(time.process_time() - C0, 4)))
import neardup
mark("import neardup")
from neardup.kernels import compile as kc
_load = kc._KernelCache.load_overload
def load(self, sig, tc):
    t, c = time.perf_counter(), time.process_time()
    try:
        return _load(self, sig, tc)
    finally:
        loads.append({"kernel": self._func.__module__ + "." + self._func.__name__, "at_s": round(t - T0, 4),
                      "wall_s": round(time.perf_counter() - t, 4), "cpu_s": round(time.process_time() - c, 4),
                      "thread": threading.current_thread().name})
kc._KernelCache.load_overload = load
def wrap(owner, name, label):
    f = getattr(owner, name)
    def w(*a, **k):
        mark("> " + label)
        try:
            return f(*a, **k)
        finally:
            mark("< " + label)
    setattr(owner, name, w)
import neardup.stages as ns, neardup.report.html as rh
from neardup.stages.workdir import WorkDir
from neardup.io.storage.folder import Folder
wrap(rh, "write_report", "report"); wrap(Folder, "publish", "publish"); wrap(WorkDir, "remove", "work dir removed")
for st in ns.PIPELINE:
    wrap(st, "run", "stage " + st.name)
mark("timeline set up")
import atexit, json
DUMP = sys.argv[1]
@atexit.register
def _dump():
    mark("atexit")
    with open(DUMP, "w") as fh:
        json.dump({"events": events, "kernel_loads": loads}, fh)
sys.argv = ["neardup"] + sys.argv[2:]
from neardup.cli import main
sys.exit(main())
"""


def stale_bytecode(tree: str, package: str = "neardup") -> list:
    """The modules of ``package`` under ``tree`` whose ``__pycache__`` bytecode is missing or does
    not match the source (its recorded mtime and size, as the interpreter checks them; hash-based
    bytecode is taken as current). With
    ``PYTHONDONTWRITEBYTECODE=1`` each of them is compiled again at every start of a run (25 stale
    modules of /work/main/src: +0.09-0.12 CPU-s of a 10-document run, on the run's path), a cost
    that a pip-installed neardup, its bytecode written at install, never pays."""
    import importlib.util
    stale = []
    for py in sorted(Path(tree, package).rglob("*.py")):
        pyc = Path(importlib.util.cache_from_source(str(py)))
        try:
            head = pyc.read_bytes()[:16]
        except OSError:
            stale.append(str(py.relative_to(tree)))
            continue
        st = py.stat()
        timestamped = head[4:8] == bytes(4)  # the flags: 0, its source's mtime and size follow
        if timestamped and (int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")) != \
                (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF):
            stale.append(str(py.relative_to(tree)))
    return stale


# The program's own path (``neardup.cli.main``: numba imported as the program imports it, then
# the parser, the library and numba's runtime), cut into phases at its own functions; the CPU of
# the process (all its threads) at each mark, and the mark just before os._exit.
PHASES = r"""
import os, sys, time
DUMP = sys.argv[1]
marks = [("python start", time.process_time())]
def mark(name):
    marks.append((name, time.process_time()))
import neardup.cli as cli
mark("import neardup.cli")
def after(owner, name, label, then=None):
    f = getattr(owner, name)
    def w(*a, **k):
        try:
            return f(*a, **k)
        finally:
            mark(label)
            if then is not None:
                then()
    setattr(owner, name, w)
def on_library():
    import neardup.api as api, neardup.stages as ns, neardup.report.html as rh
    from neardup.io.storage.folder import Folder
    from neardup.stages.workdir import WorkDir
    for st in ns.PIPELINE:
        after(st, "run", "stage " + st.name)
    after(rh, "write_report", "report"); after(Folder, "publish", "publish")
    after(WorkDir, "remove", "work dir removal"); after(api, "run", "run's end")
after(cli, "_import_numba", "import numba")
after(cli, "build_parser", "parser (the command's modules, config)")
after(cli, "_program_start", "parse, import the library, numba's runtime", on_library)
_exit = os._exit
def exit_now(code):
    mark("exit (atexit, flush)")
    with open(DUMP, "w") as fh:
        fh.write(repr(marks))
    _exit(code)
os._exit = exit_now
sys.argv = ["neardup"] + sys.argv[2:]
cli.main()
"""


def phases(tree: str, corpus: str, out: str, scratch: Path, pycache=None) -> dict:
    """One run of the program on ``corpus`` cut into phases: {phase: CPU-s of the process in it}."""
    import ast
    dump = scratch / "phases.txt"
    r = subprocess.run([sys.executable, "-c", PHASES, str(dump), "dedup", corpus, "-o", out, "--overwrite",
                        "--quiet"], env=child_env(tree, pycache), capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"phases: exit {r.returncode}\n{r.stderr}")
    marks = ast.literal_eval(dump.read_text())
    return {name: round(t - (marks[k - 1][1] if k else 0.0), 4) for k, (name, t) in enumerate(marks)}


def child_env(tree: str, pycache) -> dict:
    """The environment of a run of ``tree``: its sources first on the path; with ``pycache``,
    its bytecode kept there (written when missing, read after)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    if pycache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.abspath(pycache)
    return env


def run_once(tree: str, corpus: str, out: str, pycache=None) -> dict:
    env = child_env(tree, pycache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "neardup", "dedup", corpus, "-o", out, "--overwrite", "--quiet"],
                       env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        raise SystemExit(f"{tree}: exit {r.returncode}\n{r.stderr}")
    seconds = json.loads((Path(out) / "stats.json").read_text()).get("seconds", {})
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "stages_s": seconds,
            "outside_stages_s": round(wall - sum(seconds.values()), 3)}


def timeline(tree: str, corpus: str, out: str, scratch: Path, pycache=None) -> dict:
    env = child_env(tree, pycache)
    dump = scratch / "timeline.json"
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", TIMELINE, str(dump), "dedup", corpus, "-o", out, "--overwrite",
                        "--quiet"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode:
        raise SystemExit(f"timeline: exit {r.returncode}\n{r.stderr}")
    got = json.loads(dump.read_text())
    got["process_wall_s"] = round(wall, 3)
    got["kernels_loaded"] = len(got["kernel_loads"])
    got["kernel_load_wall_s"] = round(sum(k["wall_s"] for k in got["kernel_loads"]), 3)
    return got


def summary(runs: list) -> dict:
    def best_median(key):
        xs = sorted(r[key] for r in runs)
        return {"best": xs[0], "median": xs[len(xs) // 2], "all": [r[key] for r in runs]}
    return {k: best_median(k) for k in ("wall_s", "cpu_s", "outside_stages_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", nargs="+", default=["/work/main/src", "src"])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--corpus", default=None, help="default: bench/data/synth_DOCS_s0.jsonl")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scratch", default="/tmp/startup_bench")
    ap.add_argument("--no-timeline", action="store_true")
    ap.add_argument("--phases", type=int, default=0, metavar="N",
                    help="also N runs a tree (alternated) on the first 10 documents cut into phases at the "
                         "program's own functions: CPU-s of each (imports, parser, library, stages, report, exit)")
    ap.add_argument("--bytecode", choices=("env", "cached", "both"), default="env",
                    help="cached: each tree's bytecode kept, as an installed package has it; env: as the environment "
                         "says (PYTHONDONTWRITEBYTECODE=1 compiles every module at each start); both, alternated")
    ap.add_argument("--output", default=str(RESULTS_DIR / "startup.json"))
    a = ap.parse_args()
    corpus = a.corpus or str(DATA_DIR / f"synth_{a.docs}_s0.jsonl")
    scratch = Path(a.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    small = scratch / "first_10.jsonl"
    with open(corpus, "rb") as src, open(small, "wb") as dst:
        dst.writelines(line for _, line in zip(range(10), src))
    with open(corpus, "rb") as fh:  # into the page cache
        while fh.read(1 << 24):
            pass
    pycache = str(scratch / "pycache")
    env_bytecode = "compiled at each start" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "as __pycache__ holds it"
    variants = [(t if mode == "env" else f"{t} (bytecode cached)", t, pycache if mode == "cached" else None)
                for t in a.trees for mode in (("env", "cached") if a.bytecode == "both" else (a.bytecode,))]
    result = {**run_header(sys.argv), "corpus": corpus, "load_before": os.getloadavg(),
              "bytecode": {"env": env_bytecode, "cached": f"kept in {pycache}"}, "trees": {}}
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        for key, t, pyc in variants:
            stale = [] if pyc else stale_bytecode(t)
            result["trees"][key] = {"stale_bytecode": stale}
            if stale:
                print(f"warning: {key}: {len(stale)} modules' bytecode stale or missing, compiled at each start "
                      f"(python -m compileall -q {t}, or --bytecode cached): {', '.join(stale[:5])}", flush=True)
    runs = {key: {"full": [], "ten_docs": []} for key, _, _ in variants}
    for _, t, pyc in variants:  # untimed: kernels in numba's cache, bytecode written, the files in the page cache
        run_once(t, str(small), str(scratch / "out"), pyc)
    for i in range(a.repeat):
        for key, t, pyc in variants:
            runs[key]["full"].append(run_once(t, corpus, str(scratch / "out"), pyc))
            runs[key]["ten_docs"].append(run_once(t, str(small), str(scratch / "out10"), pyc))
            print(f"{i + 1}/{a.repeat} {key}: {runs[key]['full'][-1]}  10 docs: {runs[key]['ten_docs'][-1]}",
                  flush=True)
    for key in runs:
        result["trees"].setdefault(key, {}).update(full=summary(runs[key]["full"]),
                                                   ten_docs=summary(runs[key]["ten_docs"]), runs=runs[key])
    cut = {key: [] for key, _, _ in variants}
    for i in range(a.phases):
        for key, t, pyc in variants:
            cut[key].append(phases(t, str(small), str(scratch / "out10"), scratch, pyc))
    for key, got in cut.items():
        if got:
            result["trees"][key]["phases_10_docs_cpu_s"] = {
                name: {"min": min(g[name] for g in got), "median": sorted(g[name] for g in got)[len(got) // 2]}
                for name in got[0]}
    if not a.no_timeline:
        key, t, pyc = variants[-1]
        result["timeline"] = {"tree": key, **timeline(t, corpus, str(scratch / "out"), scratch, pyc)}
    result["load_after"] = os.getloadavg()
    write_json(Path(a.output), result)
    for key in runs:
        s = result["trees"][key]
        print(f"{key}: wall best {s['full']['wall_s']['best']} s, cpu best {s['full']['cpu_s']['best']} s; "
              f"10 docs wall best {s['ten_docs']['wall_s']['best']} s, cpu best {s['ten_docs']['cpu_s']['best']} s")
        for name, v in s.get("phases_10_docs_cpu_s", {}).items():
            print(f"    {name:45s} CPU min {v['min'] * 1000:7.1f} ms, median {v['median'] * 1000:7.1f} ms")
    print("load", result["load_before"], "->", result["load_after"])


if __name__ == "__main__":
    main()
