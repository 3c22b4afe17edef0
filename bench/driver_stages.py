"""Where the driver of ``neardup dedup --engine ray`` grows: its RSS, high-water mark, Ray's
ref count and its Python objects at each stage's start and end, after each ``collect`` and
``persist`` of the engine, around the engine's exit and the report's parts.

    .venv/bin/python bench/driver_stages.py --sizes 1M,3M --shuffled    # the path of a cluster of many nodes
    .venv/bin/python bench/driver_stages.py --sizes 300k,1M             # one node

Issue 28 (bench/driver_memory.py measures the peak alone). The corpora are driver_memory.py's
(made once under bench/data/). Each size is one ``python -c PROBE neardup dedup ...`` subprocess:
the probe wraps the stages' ``run``, ``RayEngine.collect/persist/__exit__`` and the report's
functions in this process only (nothing in neardup itself). ``--shuffled`` sets
``NEARDUP_RAY_ONE_CALL=0``. Writes bench/results/driver_stages.json (``--output``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402
from driver_memory import corpus, count  # noqa: E402

PROBE = r"""
import gc, importlib, json, sys
out, argv = sys.argv[1], sys.argv[2:]
def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))
events = []
def note(where):
    e = {"where": where, "rss": status("VmRSS"), "hwm": status("VmHWM"), "objects": len(gc.get_objects())}
    import ray
    worker = ray._private.worker.global_worker
    if worker.connected:
        e["refs"] = len(worker.core_worker.get_all_reference_counts())
    events.append(e)
def around(owner, name, label=None):
    original = getattr(owner, name)
    def wrapped(*a, **k):
        note(f"{label or name}:begin")
        try:
            return original(*a, **k)
        finally:
            note(f"{label or name}:end")
    setattr(owner, name, wrapped)
import neardup.stages as stages
from neardup.engines.ray import RayEngine
for stage in stages.PIPELINE:
    around(stage, "run", stage.name)
for name in ("collect", "persist", "__exit__"):
    around(RayEngine, name)
html = importlib.import_module("neardup.report.html")
for name in ("write_report", "_similarity_histogram", "cluster_sizes", "_largest_html"):
    around(html, name)
rc = 1
try:
    from neardup.cli import main
    rc = main(argv)
finally:
    with open(out, "w") as f:
        json.dump({"returncode": rc, "driver_vmhwm_bytes": status("VmHWM"), "events": events}, f)
sys.exit(rc)
"""


def probe(folder: Path, env: dict) -> dict:
    out = Path(tempfile.mkdtemp(prefix="driver-stages-"))
    info = out / "probe.json"
    cmd = [sys.executable, "-c", PROBE, str(info), "dedup", str(folder), "--output", str(out / "out"),
           "--engine", "ray", "--quiet"]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode:
        raise SystemExit(f"neardup failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}")
    result = json.loads(info.read_text())
    shutil.rmtree(out, ignore_errors=True)
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1M,3M")
    p.add_argument("--shuffled", action="store_true", help="NEARDUP_RAY_ONE_CALL=0: every big step shuffled")
    p.add_argument("--doc-words", type=int, default=80)
    p.add_argument("--dup-fraction", type=float, default=0.4)
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--pythonpath", default=str(Path(__file__).resolve().parents[1] / "src"))
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "driver_stages.json")
    args = p.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=args.pythonpath)
    if args.shuffled:
        env["NEARDUP_RAY_ONE_CALL"] = "0"
    sys.path.insert(0, args.pythonpath)
    result = {**run_header(sys.argv), "pythonpath": args.pythonpath, "shuffled": args.shuffled, "runs": []}
    for n in (count(s) for s in args.sizes.split(",")):
        r = probe(corpus(n, args), env)
        result["runs"].append({"documents": n, **r})
        print(f"{n:,} documents: driver peak {r['driver_vmhwm_bytes'] / 2**20:.1f} MiB")
        for e in r["events"]:
            if not e["where"].startswith(("collect", "persist")):
                print(f"  {e['where']:30} rss {e['rss'] / 2**20:6.1f}  hwm {e['hwm'] / 2**20:6.1f} MiB"
                      f"  refs {e.get('refs', '-')!s:>5}  objects {e['objects']:,}")
    write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
