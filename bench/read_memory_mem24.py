"""The read stage's CPU, page faults and RSS growth of two checkouts, alternating runs of the CLI.

    .venv/bin/python bench/read_memory_mem24.py --before BASE/src --after src \
        --input /work/main/bench/data/synth_100000_s0.jsonl --pairs 4

Each run is ``python -m neardup dedup INPUT`` in a fresh process with hooks (``--hook``, this
file run as a script in the child) that note getrusage at the end of each stage: the read stage's
wall, user and system CPU, minor faults, and the max RSS before and after it. The outputs go to a
folder under ``--trash`` (never deleted here: on this VM, creating files right after deleting many
is slow). Writes bench/results/read_memory_mem24.json (``--output``) with the command, the date and
the load average of each run; prints the medians per checkout. ``--sleep``: idle seconds before
each run: on a VM that hands freed memory back to its host (virtio-balloon free page reporting),
a fresh page touched right after the last run's exit is cheaper than one touched later.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _hook(argv) -> None:
    """In the child: neardup's CLI with the read stage's counters printed as one JSON line."""
    import resource

    def ru():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return {"wall": time.perf_counter(), "user": r.ru_utime, "sys": r.ru_stime, "minflt": r.ru_minflt,
                "maxrss_mib": r.ru_maxrss / 1024}

    import neardup.cli as cli
    import neardup.stages as ns
    marks = {}
    for st in ns.PIPELINE:
        if st.name == "read":
            run = type(st).run

            def timed(self, *a, **k):
                marks["before"] = ru()
                try:
                    return run(self, *a, **k)
                finally:
                    marks["after"] = ru()
            type(st).run = timed
    _exit = os._exit

    def exit_now(code):
        b, a, end = marks["before"], marks["after"], ru()
        out = {k: a[k] - b[k] for k in ("wall", "user", "sys", "minflt")}
        out.update(cpu=out["user"] + out["sys"], maxrss_before=b["maxrss_mib"], maxrss_after=a["maxrss_mib"],
                   maxrss_run=end["maxrss_mib"])
        print("READ_STAGE " + json.dumps(out), file=sys.stderr)
        _exit(code)
    os._exit = exit_now
    sys.argv = ["neardup"] + argv
    cli.main()


def main(argv=None) -> int:
    from common import RESULTS_DIR, run_header, write_json
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="PYTHONPATH of the checkout before")
    ap.add_argument("--after", required=True, help="PYTHONPATH of the checkout after")
    ap.add_argument("--input", required=True)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--sleep", type=float, default=0.0,
                    help="seconds idle before each run (freed memory handed back to the host meanwhile)")
    ap.add_argument("--trash", type=Path, default=Path("/tmp/read_memory_trash"))
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "read_memory_mem24.json")
    args = ap.parse_args(argv)
    result = run_header(sys.argv)
    result["paths"] = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    result["input"] = args.input
    runs = []
    stamp = time.strftime("%H%M%S")
    for i in range(args.pairs):
        for name in ("before", "after"):
            time.sleep(args.sleep)
            out = args.trash / f"{stamp}-{i}-{name}"
            env = dict(os.environ, PYTHONPATH=os.path.abspath(getattr(args, name)))
            p = subprocess.run([sys.executable, __file__, "--hook", "dedup", args.input, "--output", str(out),
                                "--overwrite", "--quiet"], env=env, capture_output=True, text=True)
            line = [x for x in p.stderr.splitlines() if x.startswith("READ_STAGE ")]
            if p.returncode or not line:
                raise SystemExit(f"{name} run failed: {p.stderr[-2000:]}")
            r = json.loads(line[-1][len("READ_STAGE "):])
            r.update(tree=name, pair=i, load=os.getloadavg()[0])
            runs.append(r)
            print(json.dumps(r))
    result["runs"] = runs
    result["median"] = {name: {k: statistics.median(r[k] for r in runs if r["tree"] == name)
                               for k in ("wall", "user", "sys", "cpu", "minflt", "maxrss_after", "maxrss_run")}
                        for name in ("before", "after")}
    print(json.dumps(result["median"], indent=1))
    write_json(args.output, result)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--hook":
        _hook(sys.argv[2:])
    else:
        sys.exit(main())
