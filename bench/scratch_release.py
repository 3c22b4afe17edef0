"""Whether every Ray worker process that read blocks lets its kept read scratches go
(:func:`neardup.stages.read.give_back_scratch`: KEPT_IDLE_S without a block), on a cluster of
three raylets on this machine (``ray.cluster_utils.Cluster``, one CPU a node), and how many
threads each process started for that.

    PYTHONPATH=$PWD/src .venv/bin/python bench/scratch_release.py [--docs 30000] [--label NAME]

The script is the Ray driver (``ray.init`` on the cluster, then ``neardup.dedup(engine="ray")``
joins that connection, so the workers live on after the run until the script ends). Each
worker process counts, through a ``worker_process_setup_hook`` (no change to neardup): the
blocks it gave its scratch back after (``give_back_scratch``), each ``release_scratches`` (the
thread it ran in, how many scratches were kept then), and the threads it started for the idle
release (``threading.Timer`` or the watcher thread). The read plan is one block per input file
(``workdir.BLOCK_BYTES`` lowered in the driver, which plans), the corpus cut into 9 files. After
the run the script waits KEPT_IDLE_S + 3 s. A process released its scratches when its last event
is a release after its last block. Run it once with PYTHONPATH at each tree; the output (a
JSON line a tree) is appended to bench/results/scratch_release.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOGS = tempfile.mkdtemp(prefix="scratch_release-")


def _hook():
    """Runs in each worker process as it starts: the counters, a JSON line an event, in LOGS."""
    import json as _json
    import os as _os
    import threading as _threading
    import time as _time

    from neardup.stages import read

    log = _os.path.join(LOGS, f"{_os.getpid()}.jsonl")

    def note(**event):
        with open(log, "a") as f:
            f.write(_json.dumps(dict(event, t=_time.time())) + "\n")

    release, give_back, start = read.release_scratches, read.give_back_scratch, _threading.Thread.start

    def counted_release(_item=None):
        note(event="release", kept=len(read._scratches), thread=_threading.current_thread().name)
        release(_item)

    def counted_give_back(scratch):
        give_back(scratch)
        note(event="block", kept=len(read._scratches))

    def counted_start(self):
        if isinstance(self, _threading.Timer) or self.name == "neardup-idle-scratches":
            note(event="thread", name=self.name)
        start(self)

    read.release_scratches, read.give_back_scratch = counted_release, counted_give_back
    _threading.Thread.start = counted_start


def _corpus(docs: int, folder: Path, files: int = 9) -> str:
    src = HERE / "data" / "synth_100000_s0.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    outs = [open(folder / f"part-{i}.jsonl", "w") for i in range(files)]
    with open(src) as f:
        for i, line in enumerate(f):
            if i == docs:
                break
            outs[i % files].write(line)
    for o in outs:
        o.close()
    return str(folder)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=30000)
    ap.add_argument("--label", default=os.environ.get("PYTHONPATH", ""))
    ap.add_argument("--out", default=str(HERE / "results" / "scratch_release.jsonl"))
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    import neardup
    from neardup.stages import read, workdir

    node = dict(num_cpus=1, object_store_memory=80 << 20)
    cluster = Cluster(initialize_head=True, connect=False, head_node_args=dict(node, include_dashboard=False))
    for _ in range(2):
        cluster.add_node(**node)
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, runtime_env={"worker_process_setup_hook": _hook,
                                                       "env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
        workdir.BLOCK_BYTES = 1  # one block a file
        tmp = Path(tempfile.mkdtemp(prefix="scratch_release-run-"))
        inp = _corpus(args.docs, tmp / "in")
        t0 = time.time()
        res = neardup.dedup(inp, output=str(tmp / "out"), engine="ray", ray_address=cluster.address,
                            work_dir=str(tmp / "work"), quiet=True)
        ended = time.time()
        time.sleep(read.KEPT_IDLE_S + 3)
        ray.shutdown()
    finally:
        cluster.shutdown()
    procs = {}
    for name in os.listdir(LOGS):
        events = [json.loads(line) for line in open(os.path.join(LOGS, name))]
        blocks = [e for e in events if e["event"] == "block"]
        releases = [e for e in events if e["event"] == "release"]
        if not blocks:
            continue
        last = events[-1]
        procs[name.split(".")[0]] = {
            "blocks": len(blocks),
            "threads_started": len([e for e in events if e["event"] == "thread"]),
            "releases": [[e["thread"], e["kept"], round(e["t"] - t0, 2)] for e in releases],
            "released_after_last_block": last["event"] == "release",
            "last_block_s": round(blocks[-1]["t"] - t0, 2),
        }
    out = {"label": args.label, "docs": args.docs, "input": res.stats["counts"]["input"],
           "run_s": round(ended - t0, 2), "loadavg": os.getloadavg()[0], "processes": procs,
           "all_released": bool(procs) and all(p["released_after_last_block"] for p in procs.values())}
    print(json.dumps(out, indent=1))
    with open(args.out, "a") as f:
        f.write(json.dumps(out) + "\n")
    shutil.rmtree(tmp)
    shutil.rmtree(LOGS)


if __name__ == "__main__":
    main()
