"""Where a run over a folder of small text files spends its main thread (issue 32): ``neardup
dedup`` on the folder that bench/small_files.py makes, source trees alternating, each run probed
from inside: the CPU (``time.thread_time`` of the calling thread) and wall of each step named in
STEPS, summed over its calls (a step called in a pool thread counts that thread's CPU), the main
thread's CPU up to the program's start and to its exit, the process's CPU-seconds and what it
read from storage (``ru_inblock``, major faults: the corpus is not pinned in memory).

    .venv/bin/python bench/small_files_phases.py --trees /work/wt-base51/src src --dir /tmp/small --repeat 3

Outputs go to fresh folders, moved into the corpus folder's ``trash`` and deleted at the end
(:func:`small_files.empty_trash`; the next run of this script or of small_files.py waits 5 minutes
after it: :func:`small_files.settle`). Min and median per tree; JSON to ``--output`` (default
bench/results/small_files_phases.json).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_files import alternate, finish, folder_args, probed  # noqa: E402

# (module, owner or "", name): the steps timed, where the run looks them up when it calls them
STEPS = [
    ("neardup.io", "", "discover"), ("neardup.io", "", "choose_id_column"), ("neardup.run", "", "_check_folders"),
    ("neardup.stages.identity", "", "run_identity"), ("neardup.stages.identity", "", "fingerprint"),
    ("neardup.run", "", "claim_output"), ("neardup.stages.workdir", "WorkDir", "__init__"),
    ("neardup.stages.workdir", "WorkDir", "plan"), ("neardup.stages.read", "", "read_block"),
    ("neardup.stages.read", "", "_process"), ("neardup.stages.read", "ReadStage", "finish"),
    ("neardup.stages.write", "WriteStage", "_write_kept"), ("neardup.stages.write", "", "write_kept_partition"),
    ("neardup.stages.write", "", "write_kept_group"), ("neardup.stages.write", "", "rows_of_sources"),
    ("neardup.stages.write", "", "finish_write"), ("neardup.stages.write", "", "build_stats"),
    ("neardup.stages.write", "", "bound_lists"), ("neardup.io.formats.text", "", "_copy_files"),
    ("neardup.report.html", "", "write_report"), ("neardup.io.storage.folder", "Folder", "publish"),
]

PROBE = r"""
import importlib, json, os, resource, sys, threading, time
T0, C0 = time.perf_counter(), time.thread_time()
steps, acc, marks = json.loads(sys.argv[1]), {}, {}
sys.argv = ["neardup"] + sys.argv[2:]
import neardup.cli as cli
def wrap(owner, name, label):
    f = getattr(owner, name, None)
    if f is None:  # (a tree without it)
        return
    def timed(*a, **k):
        w, c = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            s = acc.setdefault(label, [0.0, 0.0, 0])
            s[0] += time.perf_counter() - w; s[1] += time.thread_time() - c; s[2] += 1
    setattr(owner, name, timed)
start = cli._program_start
def program_start(args):
    marks["program_start"] = (time.perf_counter() - T0, time.thread_time() - C0)
    start(args)
    import neardup.stages as stages
    for module, owner, name in steps:
        m = importlib.import_module(module)
        wrap(getattr(m, owner) if owner else m, name, (owner + "." if owner else "") + name)
    for stage in stages.PIPELINE:
        wrap(stage, "run", "stage " + stage.name)
cli._program_start = program_start
exit_now = cli._exit_now
def exit_marked(code):
    marks["exit"] = (time.perf_counter() - T0, time.thread_time() - C0)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    os.write(2, ("PROBE " + json.dumps({"marks": marks, "steps": acc, "cpu_s": ru.ru_utime + ru.ru_stime,
                                        "sys_s": ru.ru_stime, "disk_read_bytes": ru.ru_inblock * 512,
                                        "major_faults": ru.ru_majflt}) + "\n").encode())
    exit_now(code)
cli._exit_now = exit_marked
cli.main()
"""


def one_run(tree: str, inp: Path, out: Path) -> dict:
    probe, stats, wall = probed(tree, PROBE, [json.dumps(STEPS)], inp, out)
    stages = stats["seconds"]
    return {"wall_s": round(wall, 3), "cpu_s": round(probe["cpu_s"], 3), "sys_s": round(probe["sys_s"], 3),
            "main_cpu_s": round(probe["marks"]["exit"][1], 3),
            "main_cpu_to_start_s": round(probe["marks"]["program_start"][1], 3),
            "disk_read_bytes": probe["disk_read_bytes"], "major_faults": probe["major_faults"], "stages_s": stages,
            "steps": {k: {"wall_s": round(v[0], 4), "cpu_s": round(v[1], 4), "calls": v[2]}
                      for k, v in sorted(probe["steps"].items())},
            "load": round(os.getloadavg()[0], 2)}


def main() -> None:
    a = folder_args(__doc__, 3, "small_files_phases.json")
    result = alternate(a.trees, Path(a.dir), a.docs, a.repeat, one_run, "phases",
                       show=lambda run: {k: v for k, v in run.items() if k != "steps"})
    summary = {}
    for tree, runs in result["runs"].items():
        s = {k: {"min": min(x[k] for x in runs), "median": statistics.median(x[k] for x in runs)}
             for k in ("wall_s", "cpu_s", "main_cpu_s", "main_cpu_to_start_s")}
        for step in sorted(set().union(*(x["steps"] for x in runs))):
            cpu = [x["steps"].get(step, {}).get("cpu_s", 0.0) for x in runs]
            s["step " + step + " cpu_s"] = {"min": min(cpu), "median": statistics.median(cpu)}
        summary[tree] = s
        print(tree, json.dumps(s, indent=1), flush=True)
    finish(result, summary, a)


if __name__ == "__main__":
    main()
