"""Where the write stage of a run over a folder of small text files runs on one core (issue 32):
``neardup dedup`` on the folder that bench/small_files.py makes, source trees alternating, each
run probed from inside: the stage's wall, the copy's window (the first copy thread's start to the
last one's end, :func:`neardup.io.formats.text._copy_files`), the stage's time before it (one
core: the kept files found, the lists made) and after it (one core: what waited for the copy's
end), the groups of kept files copied (``write_kept_partition`` calls), and when the thread
beside kept/ (removed.parquet and clusters.parquet: ``stitch_output``) ended against the copy's
end. Those one-core spans are what a second core cannot hide; on a shared machine the copy's
window stretches with the load, the spans before and after much less.

    .venv/bin/python bench/write_stage_serial.py --trees /work/wt-base/src src --dir /tmp/small --repeat 6

Outputs go to fresh folders moved into the corpus folder's ``trash`` and deleted at the end
(:func:`small_files.empty_trash`: the next run of small_files.py waits 5 minutes after it).
Median and spread per tree; JSON to ``--output`` (default bench/results/write_stage_serial.json).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_files import alternate, finish, folder_args, probed  # noqa: E402

PROBE = r"""
import json, os, sys, threading, time
T0 = time.perf_counter()
spans = {}
sys.argv = ["neardup"] + sys.argv[1:]
import neardup.cli as cli
def wrap(owner, name):
    f = getattr(owner, name)
    def timed(*a, **k):
        w = time.perf_counter() - T0
        try:
            return f(*a, **k)
        finally:
            spans.setdefault(name, []).append((w, time.perf_counter() - T0))
    setattr(owner, name, timed)
start = cli._program_start
def program_start(args):
    start(args)
    from neardup.io.formats import text
    from neardup.stages import write
    for owner, name in ((text, "_copy_files"), (write, "write_kept_partition"), (write, "stitch_output"),
                        (write.WriteStage, "run")):
        wrap(owner, name)
cli._program_start = program_start
exit_now = cli._exit_now
def exit_marked(code):
    os.write(2, ("PROBE " + json.dumps(spans) + "\n").encode())
    exit_now(code)
cli._exit_now = exit_marked
cli.main()
"""


def one_run(tree: str, inp: Path, out: Path) -> dict:
    spans, _stats, _wall = probed(tree, PROBE, [], inp, out)
    time.sleep(1)
    (stage_start, stage_end), = spans["run"]
    copies = spans.get("_copy_files", [])
    first, last = min(s for s, _ in copies), max(e for _, e in copies)
    stitched = max((e for _, e in spans.get("stitch_output", [])), default=None)
    return {"stage_s": round(stage_end - stage_start, 3), "before_copy_s": round(first - stage_start, 3),
            "copy_window_s": round(last - first, 3), "after_copy_s": round(stage_end - last, 3),
            "groups": len(spans["write_kept_partition"]), "copy_calls": len(copies),
            "members_end_after_copy_s": None if stitched is None else round(stitched - last, 3),
            "load": round(os.getloadavg()[0], 2)}


def main() -> None:
    a = folder_args(__doc__, 6, "write_stage_serial.json")
    result = alternate(a.trees, Path(a.dir), a.docs, a.repeat, one_run, "serial")
    summary = {}
    for tree, runs in result["runs"].items():
        summary[tree] = {k: {"median": statistics.median(x[k] for x in runs), "min": min(x[k] for x in runs),
                             "max": max(x[k] for x in runs)}
                         for k in ("stage_s", "before_copy_s", "copy_window_s", "after_copy_s",
                                   "members_end_after_copy_s", "groups", "load")
                         if all(x[k] is not None for x in runs)}
        print(tree, json.dumps(summary[tree]), flush=True)
    finish(result, summary, a)


if __name__ == "__main__":
    main()
