"""Plan a large run from measured ones: time, memory per node, work-dir size and bytes moved.

    # 1. measure: run neardup on samples of the corpus (here: the benchmark corpus at 100k and 1M)
    .venv/bin/python bench/plan.py measure --sizes 100k,1M --engine ray
    .venv/bin/python bench/plan.py measure --run 1M=bench/data/scale_10m/part-00.jsonl.zst \\
        --run 3M=bench/data/scale_10m/part-0[012].jsonl.zst --engine ray --output plan_runs_scale.json
    # 2. predict: a corpus of N documents on K nodes of C cores
    .venv/bin/python bench/plan.py predict --docs 1B --nodes 16 --cores 32
    .venv/bin/python bench/plan.py predict --docs 1B --nodes 16 --cores 32 --store s3
    # 3. check: fit on some measured runs, predict the others, print the error
    .venv/bin/python bench/plan.py check --fit 100k,1M
    # 4. a cluster of 4 raylets on this machine (ray.cluster_utils.Cluster), checked against one raylet
    .venv/bin/python bench/plan.py measure --sizes 1M --raylets 4 --output plan_runs_4raylets.json
    .venv/bin/python bench/plan.py check --fit 1M --against plan_runs_4raylets.json

On a user's cluster, the ten-minute check (docs/scaling.md, "Planning a run"): ``measure --run
S=SAMPLE --engine ray --ray-address ADDR`` on two samples of the corpus (for example 0.1% and
1% of its files), then ``predict --docs N --nodes K --cores C`` for the whole of it.

What a measured run records (``measure``), per run: the command's wall time; the CPU-seconds of
every process of its tree (the driver, and on the Ray engine the raylet, the workers and Ray's
helpers: polled every 0.2 s with psutil, the last reading of each process summed); each stage's
wall time (stats.json ``seconds``) and its CPU-seconds (the tree's CPU between the stage's start
and end: the end is the newest file the stage wrote in the work directory, the start its end
minus its seconds); the counts (documents, candidate and verified pairs, cluster members); the
bytes of the input, of each stage's folder of the work directory and of the outputs; the
driver's and the largest worker's peak RSS.

The model (``predict``), per stage s, for N documents on K nodes of C cores:

    cpu_s(N)     = a_s * N ** e_s        fitted (least squares in log-log) over the measured runs;
                                          with one run, e_s = 1
    compute_s    = cpu_s(N) / (K * C * u_s)   u_s: the stage's measured use of the cores
                                          (cpu_s / (wall_s * cores)), the mean over the runs
    shuffle_s    = shuffled bytes(N) * (K - 1) / K / (K * network)   (0 on one node)
    storage_s    = stored bytes(N) / min(K * node storage, storage)  (read input, write shards,
                                          read them back, write kept files)
    stage_s      = max(compute_s, storage_s) + shuffle_s
    total        = start-up (measured: wall - the stages' seconds) + the sum of the stages

Shuffled bytes per document are the measured counts times the row sizes of docs/scaling.md's
stage table (band rows 24 B per band; 45 B per candidate pair; 24 B per verified pair and
star step; 200 B per cluster member, twice). Stored bytes: the input twice, the work directory's
read/ folder written once, and the kept output. Memory per node: C times the largest worker's
peak, plus Ray's own processes, plus the object store's share of the largest shuffle (spilled
to disk past 30% of the node's memory: said): an upper bound, since a worker's RSS counts the
object store's pages it maps, which the workers of a node share, and the workers of a large
cluster each hold a smaller share of the corpus than the measured runs' (not checked by a run). The work directory grows linearly: its bytes per document times N.

``measure --raylets N`` starts a ``ray.cluster_utils.Cluster`` of N raylets on this machine
(``--raylet-cpus`` each, default the cores over N; ``--raylet-store-mb`` of object store each, no
authentication), runs every sample joined to it (``--ray-address``), and shuts it down; the
cluster's processes are counted with the run's (their CPU before the run is not). ``check
--against FILE`` predicts such runs from a model fitted on the runs of ``--runs`` (one raylet): N
nodes sharing the machine's cores (compute over all the cores), the object transfers between
raylets counted as network.

On one node the Ray engine runs the pair and cluster stages as one task each (docs/scaling.md,
"Limits and knobs"); a cluster of several nodes partitions and shuffles them. To fit a model for
such a cluster from runs on one node, measure with ``NEARDUP_RAY_ONE_CALL=0`` in the
environment (the partitioned path). ``cpu_by_process`` in each run: the CPU-seconds of the
driver, of Ray's workers and of each of Ray's own processes.

The exponents are what the measurements say: a stage whose CPU grows faster than the corpus
(e > 1) is extrapolated as such, and the prediction is only as good as the samples are like the
corpus (duplicate share, document length). ``check`` states the error on runs not used in the
fit. Results: bench/results/plan_runs.json (``measure``), printed tables (``predict``, ``check``),
bench/results/plan_check.json (``check --output``).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, WARMUP_ENV, ensure_corpus, fmt_bytes, run_header, write_json  # noqa: E402

STAGES = ("read", "pairs", "clusters", "write")
BAND_ROW_BYTES = 24          # partition 4, band 4, key 8, document 8
CANDIDATE_PAIR_BYTES = 45
VERIFIED_PAIR_BYTES = 24     # per large-star / small-star step
STAR_STEPS = 8               # 4 rounds of 2 steps on the benchmark corpus
MEMBER_BYTES = 200           # through the range shuffle, then again in the stitch
OBJECT_STORE_SHARE = 0.3     # Ray's default object store: 30% of a node's memory

# Storage and network defaults for predict: a node's own disk or a shared file system, or an
# object store (S3 and its kind: high aggregate bandwidth, per-node throughput the limit).
STORES = {
    "fs": {"node_gbs": 2.0, "aggregate_gbs": 10.0},
    "s3": {"node_gbs": 1.0, "aggregate_gbs": 100.0},
}


def parse_count(text: str) -> int:
    """``100k`` -> 100_000, ``1M``, ``2.5B``, plain integers."""
    text = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9}.get(text[-1:], None)
    value = float(text[:-1]) * scale if scale else float(text)
    return int(round(value))


def label_of(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale and n % int(scale / 10) == 0:
            return f"{n / scale:g}{unit}"
    return str(n)


# --------------------------------------------------------------------------- measure

class TreePoller(threading.Thread):
    """Polls a process tree: per process its latest CPU-seconds and peak RSS; a timeline of the
    tree's CPU-seconds (so that a window's CPU can be read back)."""

    def __init__(self, pid: int, period: float = 0.2, cluster: bool = False):
        super().__init__(daemon=True)
        import psutil
        self.root = psutil.Process(pid)
        # a cluster this process started (--raylets): its processes are this process's children,
        # not the run's; their CPU before the run is not the run's (``base``)
        self.cluster = psutil.Process() if cluster else None
        self.started = time.time()
        self.base: Dict[int, float] = {}
        self.period = period
        self.cpu: Dict[int, float] = {}
        self.rss: Dict[int, int] = {}
        self.names: Dict[int, str] = {}
        self.timeline: List[Tuple[float, float]] = []
        self.stop = threading.Event()

    def run(self):
        import psutil
        while not self.stop.is_set():
            try:
                procs = [self.root] + self.root.children(recursive=True)
                if self.cluster is not None:
                    seen = {p.pid for p in procs}
                    procs += [p for p in self.cluster.children(recursive=True) if p.pid not in seen]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    t = p.cpu_times()
                    if p.pid not in self.cpu and p.pid != self.root.pid and p.create_time() < self.started:
                        self.base[p.pid] = t.user + t.system  # a process of the cluster, older than the run
                    self.cpu[p.pid] = t.user + t.system - self.base.get(p.pid, 0.0)
                    self.rss[p.pid] = max(self.rss.get(p.pid, 0), p.memory_info().rss)
                    if not self.names.get(p.pid, "").startswith("ray::"):  # a worker renames itself once started
                        self.names[p.pid] = " ".join(p.cmdline()[:3])[:80]
                except psutil.Error:
                    pass
            self.timeline.append((time.time(), sum(self.cpu.values())))
            self.stop.wait(self.period)

    def cpu_between(self, t0: float, t1: float) -> float:
        def at(t):
            tl = self.timeline
            if not tl or t <= tl[0][0]:
                return tl[0][1] if tl else 0.0
            for (ta, ca), (tb, cb) in zip(tl, tl[1:]):
                if ta <= t <= tb:
                    return ca + (cb - ca) * (t - ta) / max(tb - ta, 1e-9)
            return tl[-1][1]
        return max(0.0, at(t1) - at(t0))


def tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def newest_mtime(path: Path) -> Optional[float]:
    newest = None
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                m = os.lstat(os.path.join(root, f)).st_mtime
            except OSError:
                continue
            newest = m if newest is None else max(newest, m)
    return newest


def measure_run(label: str, inputs: Sequence[str], engine: str, workers: int, run_dir: Path,
                extra: Sequence[str], log=print, raylets: int = 0) -> dict:
    out, work = run_dir / "out", run_dir / "work"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    cmd = [sys.executable, "-m", "neardup", "dedup", *inputs, "--output", str(out), "--work-dir", str(work),
           "--engine", engine, "--workers", str(workers), "--quiet", *extra]
    log(f"  {label}: {' '.join(cmd[3:])}")
    t_start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    poller = TreePoller(proc.pid, cluster=raylets > 0)
    poller.start()
    stdout, stderr = proc.communicate()
    wall = time.time() - t_start
    poller.stop.set()
    poller.join()
    if proc.returncode != 0:
        raise SystemExit(f"{label}: neardup exited {proc.returncode}:\n{stderr.decode()[-3000:]}")
    stats = json.loads((out / "stats.json").read_text())
    seconds = stats["seconds"]
    stages = {}
    for s in STAGES:
        end = newest_mtime(work / s)
        if end is None:   # a stage that writes nothing in the work dir: after the one before
            end = (stages[STAGES[STAGES.index(s) - 1]]["end"] if s != "read" else t_start) + seconds.get(s, 0)
        stages[s] = {"seconds": seconds.get(s, 0.0), "end": end,
                     "cpu_s": poller.cpu_between(end - seconds.get(s, 0.0), end),
                     "work_bytes": tree_bytes(work / s)}
    members = _members(out)
    counts = stats["counts"]
    driver_rss = poller.rss.get(proc.pid, 0)
    # Ray's workers name themselves ray::...; the raylet, GCS and the object store's shared pages
    # are Ray's own processes (one per node, not one per core)
    workers_rss = [r for pid, r in poller.rss.items() if pid != proc.pid and poller.names.get(pid, "").startswith("ray::")]
    ray_rss = [r for pid, r in poller.rss.items() if pid != proc.pid and not poller.names.get(pid, "").startswith("ray::")]
    input_bytes = sum(os.path.getsize(p) for p in inputs)
    res = {
        "label": label, "documents": counts["input"], "inputs": list(inputs), "input_bytes": input_bytes,
        "engine": engine, "cores": workers, "wall_s": wall, "cpu_s": sum(poller.cpu.values()),
        "startup_s": wall - sum(seconds.values()), "stages": stages,
        "counts": {k: counts.get(k) for k in ("input", "kept", "removed", "candidate_pairs", "verified_pairs",
                                              "clusters", "buckets")},
        "members": members, "bands": stats["params"]["bands"],
        "output_bytes": {"kept": tree_bytes(out / "kept"),
                         "removed.parquet": os.path.getsize(out / "removed.parquet"),
                         "clusters.parquet": os.path.getsize(out / "clusters.parquet")},
        "driver_peak_rss": driver_rss, "largest_worker_rss": max(workers_rss, default=0),
        "ray_processes_rss": sum(ray_rss),
        "processes": len(poller.cpu),
        "cpu_by_process": cpu_by_process(poller, proc.pid),
        "raylets": raylets,   # 0: a local instance started by the run; N: joined to N raylets (--raylets)
    }
    log(f"    {wall:.1f} s wall, {res['cpu_s']:.1f} CPU-s, stages "
        + ", ".join(f"{s} {stages[s]['seconds']:.1f}s/{stages[s]['cpu_s']:.1f}cpu" for s in STAGES)
        + f", driver {fmt_bytes(driver_rss)}")
    shutil.rmtree(run_dir, ignore_errors=True)
    return res


def cpu_by_process(poller: TreePoller, driver: int) -> Dict[str, float]:
    """CPU-seconds per kind of process: the driver, Ray's workers (all ``ray::`` processes
    together), and each of Ray's own by its program (raylet, gcs_server, a helper's script)."""
    out: Dict[str, float] = {}
    for pid, cpu in poller.cpu.items():
        name = poller.names.get(pid, "")
        if pid == driver:
            kind = "driver"
        elif name.startswith("ray::"):
            kind = "workers"
        else:
            words = name.split()
            prog = next((w for w in words if w.endswith(".py")), words[0] if words else "?")
            kind = os.path.basename(prog)
        out[kind] = round(out.get(kind, 0.0) + cpu, 2)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _members(out: Path) -> int:
    import pyarrow.parquet as pq
    return pq.ParquetFile(out / "clusters.parquet").metadata.num_rows


def cmd_measure(args) -> int:
    runs_spec: List[Tuple[str, List[str]]] = []
    for size in filter(None, (args.sizes or "").split(",")):
        n = parse_count(size)
        corpus = ensure_corpus(n)
        runs_spec.append((label_of(n), [corpus["path"]]))
    for spec in args.run or []:
        label, _, pattern = spec.partition("=")
        paths = sorted(p for part in pattern.split(",") for p in glob.glob(part))
        if not paths:
            raise SystemExit(f"--run {spec}: no file matches")
        runs_spec.append((label, paths))
    if not runs_spec:
        raise SystemExit("nothing to measure: give --sizes or --run")
    header = run_header(sys.argv)
    print(f"load average at start: {os.getloadavg()}")
    cluster = None
    extra = args.neardup_args.split() if args.neardup_args else []
    if args.raylets:
        if args.engine != "ray":
            raise SystemExit("--raylets runs the Ray engine: give --engine ray")
        cpus = args.raylet_cpus or max(1, args.workers // args.raylets)
        cluster = start_raylets(args.raylets, cpus, args.raylet_store_mb)
        extra += ["--ray-address", cluster.address]
        header["raylets"] = {"count": args.raylets, "cpus_each": cpus, "object_store_mb_each": args.raylet_store_mb}
        print(f"{args.raylets} raylets at {cluster.address}")
    try:
        runs = _measure_all(args, runs_spec, extra, cluster)
    finally:
        if cluster is not None:
            cluster.shutdown()
    path = RESULTS_DIR / args.output
    old = json.loads(path.read_text()) if path.exists() and args.append else {"runs": []}
    result = dict(header, load_average_at_end=os.getloadavg(), runs=old["runs"] + runs)
    write_json(path, result)
    print(f"written {path}")
    return 0


def start_raylets(count: int, cpus: int, store_mb: int):
    """A ``ray.cluster_utils.Cluster`` of ``count`` raylets on this machine (the head is one of
    them), ``cpus`` CPUs and ``store_mb`` MiB of object store each, without authentication; the
    runs join it with --ray-address (as a driver joins a real cluster), the caller shuts it down.
    Its processes are this process's children: the runs' CPU counts theirs."""
    from ray.cluster_utils import Cluster
    node = dict(num_cpus=cpus, object_store_memory=store_mb << 20)
    env = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a token file of an earlier `ray start` must not turn it on
    try:
        cluster = Cluster(initialize_head=True, connect=False, head_node_args=dict(node, include_dashboard=False))
        for _ in range(count - 1):
            cluster.add_node(**node)
        cluster.wait_for_nodes()
    finally:
        if env is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = env
    return cluster


def _measure_all(args, runs_spec, extra: List[str], cluster) -> List[dict]:
    if not args.no_warmup:   # compile the kernels (and the JSONL scanner) in an untimed run
        warm = ensure_corpus(2000)
        wd = Path(args.run_dir + "-warmup")  # beside the run's own scratch folder
        shutil.rmtree(wd, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "neardup", "dedup", warm["path"], "--output", str(wd), "--quiet",
                        "--engine", args.engine, "--workers", str(args.workers), *extra], check=True,
                       env=dict(os.environ, **WARMUP_ENV), capture_output=True)
        shutil.rmtree(wd, ignore_errors=True)
    return [measure_run(label, paths, args.engine, args.workers, Path(args.run_dir), extra,
                        raylets=args.raylets if cluster is not None else 0)
            for label, paths in runs_spec]


# --------------------------------------------------------------------------- model

def fit_power(xs: Sequence[float], ys: Sequence[float]) -> Tuple[float, float]:
    """(a, e) of y = a * x ** e, least squares in log-log; e = 1 through the mean with one point."""
    pts = [(math.log(x), math.log(max(y, 1e-9))) for x, y in zip(xs, ys)]
    if len(pts) == 1 or len({p[0] for p in pts}) == 1:
        e = 1.0
    else:
        mx = sum(p[0] for p in pts) / len(pts)
        my = sum(p[1] for p in pts) / len(pts)
        e = sum((p[0] - mx) * (p[1] - my) for p in pts) / sum((p[0] - mx) ** 2 for p in pts)
    a = math.exp(sum(p[1] - e * p[0] for p in pts) / len(pts))
    return a, e


def build_model(runs: Sequence[dict]) -> dict:
    """Per-stage CPU power laws and core use, per-document bytes and counts, from measured runs."""
    n = [r["documents"] for r in runs]
    model = {"fitted_on": [r["label"] for r in runs], "engine": runs[0]["engine"], "stages": {}}
    for s in STAGES:
        a, e = fit_power(n, [r["stages"][s]["cpu_s"] for r in runs])
        use = [r["stages"][s]["cpu_s"] / max(r["stages"][s]["seconds"] * r["cores"], 1e-9) for r in runs]
        model["stages"][s] = {"a": a, "exponent": e, "core_use": min(1.0, max(0.05, sum(use) / len(use))),
                              "work_bytes_per_doc": sum(r["stages"][s]["work_bytes"] / r["documents"] for r in runs) / len(runs)}
    per_doc = lambda f: sum(f(r) / r["documents"] for r in runs) / len(runs)  # noqa: E731
    model.update(
        startup_s=sum(r["startup_s"] for r in runs) / len(runs),
        input_bytes_per_doc=per_doc(lambda r: r["input_bytes"]),
        kept_bytes_per_doc=per_doc(lambda r: r["output_bytes"]["kept"]),
        candidate_pairs_per_doc=per_doc(lambda r: r["counts"]["candidate_pairs"] or 0),
        verified_pairs_per_doc=per_doc(lambda r: r["counts"]["verified_pairs"] or 0),
        members_per_doc=per_doc(lambda r: r["members"]),
        bands=runs[0]["bands"],
        worker_peak_rss=max(r.get("largest_worker_rss", 0) for r in runs),
        node_processes_rss=max(r.get("ray_processes_rss", 0) for r in runs),
        driver_peak_rss=max(r["driver_peak_rss"] for r in runs),
    )
    return model


def predict(model: dict, docs: int, nodes: int, cores: int, *, network_gbit: float = 10.0,
            store: str = "fs", node_gbs: Optional[float] = None, aggregate_gbs: Optional[float] = None,
            node_memory_gb: float = 128.0) -> dict:
    st = STORES[store]
    storage_bw = min(nodes * (node_gbs or st["node_gbs"]), aggregate_gbs or st["aggregate_gbs"]) * 1e9
    net_bw = nodes * network_gbit / 8 * 1e9
    cross = (nodes - 1) / nodes
    shuffled = {
        "read": 0.0,
        "pairs": docs * (model["bands"] * BAND_ROW_BYTES + model["candidate_pairs_per_doc"] * CANDIDATE_PAIR_BYTES),
        "clusters": docs * model["verified_pairs_per_doc"] * VERIFIED_PAIR_BYTES * STAR_STEPS,
        "write": docs * model["members_per_doc"] * MEMBER_BYTES * 2,
    }
    stored = {
        "read": docs * (model["input_bytes_per_doc"] + model["stages"]["read"]["work_bytes_per_doc"]),
        "pairs": docs * model["stages"]["pairs"]["work_bytes_per_doc"],
        "clusters": docs * model["stages"]["clusters"]["work_bytes_per_doc"],
        "write": docs * (model["input_bytes_per_doc"] + model["kept_bytes_per_doc"]
                         + model["stages"]["write"]["work_bytes_per_doc"]),
    }
    rows = {}
    for s in STAGES:
        m = model["stages"][s]
        cpu = m["a"] * docs ** m["exponent"]
        compute = cpu / (nodes * cores * m["core_use"])
        shuffle = shuffled[s] * cross / net_bw if nodes > 1 else 0.0
        storage = stored[s] / storage_bw
        rows[s] = {"cpu_s": cpu, "compute_s": compute, "shuffle_s": shuffle, "storage_s": storage,
                   "seconds": max(compute, storage) + shuffle, "shuffled_bytes": shuffled[s],
                   "stored_bytes": stored[s], "limit": ("storage" if storage > compute else "compute")
                   if shuffle < max(compute, storage) else "network"}
    largest_shuffle = max(shuffled.values()) / nodes
    store_bytes = node_memory_gb * 1e9 * OBJECT_STORE_SHARE
    work_bytes = docs * sum(m["work_bytes_per_doc"] for m in model["stages"].values())
    return {
        "docs": docs, "nodes": nodes, "cores": cores, "store": store, "stages": rows,
        "total_s": model["startup_s"] + sum(r["seconds"] for r in rows.values()),
        "memory_per_node_bytes": (cores * model["worker_peak_rss"] + model["node_processes_rss"]
                                  + min(largest_shuffle, store_bytes)),
        "object_store_spills": largest_shuffle > store_bytes,
        "largest_shuffle_per_node_bytes": largest_shuffle,
        "work_dir_bytes": work_bytes, "driver_peak_rss": model["driver_peak_rss"],
    }


def fmt_s(x: float) -> str:
    return f"{x:.1f} s" if x < 120 else f"{x / 60:.1f} min" if x < 7200 else f"{x / 3600:.1f} h"


def print_prediction(p: dict) -> None:
    print(f"{p['docs']:,} documents on {p['nodes']} node(s) of {p['cores']} cores, storage {p['store']}:")
    print(f"  {'stage':9} {'CPU':>10} {'compute':>10} {'storage':>10} {'shuffle':>10} {'stage':>10}  limit")
    for s, r in p["stages"].items():
        print(f"  {s:9} {fmt_s(r['cpu_s']):>10} {fmt_s(r['compute_s']):>10} {fmt_s(r['storage_s']):>10} "
              f"{fmt_s(r['shuffle_s']):>10} {fmt_s(r['seconds']):>10}  {r['limit']}")
    print(f"  total {fmt_s(p['total_s'])}; memory per node at most {fmt_bytes(p['memory_per_node_bytes'])}"
          f"{' (the object store spills to disk)' if p['object_store_spills'] else ''}; work dir "
          f"{fmt_bytes(p['work_dir_bytes'])}; driver {fmt_bytes(p['driver_peak_rss'])} (the largest measured run's)")


def load_runs(path: Path) -> List[dict]:
    if not path.exists():
        raise SystemExit(f"{path}: no measured runs; run `bench/plan.py measure` first")
    return json.loads(path.read_text())["runs"]


def cmd_predict(args) -> int:
    runs = load_runs(RESULTS_DIR / args.runs)
    if args.fit:
        wanted = set(args.fit.split(","))
        runs = [r for r in runs if r["label"] in wanted]
    model = build_model(runs)
    print(f"model fitted on {', '.join(model['fitted_on'])} ({model['engine']} engine); CPU exponents "
          + ", ".join(f"{s} {m['exponent']:.2f}" for s, m in model["stages"].items()))
    p = predict(model, parse_count(args.docs), args.nodes, args.cores, network_gbit=args.network_gbit,
                store=args.store, node_gbs=args.node_gbs, aggregate_gbs=args.aggregate_gbs,
                node_memory_gb=args.node_memory_gb)
    print_prediction(p)
    return 0


def cmd_check(args) -> int:
    runs = load_runs(RESULTS_DIR / args.runs)
    fit = set(args.fit.split(","))
    model = build_model([r for r in runs if r["label"] in fit])
    if args.against:  # the runs to predict from another file (a --raylets measure), every one of them
        runs, fit = load_runs(RESULTS_DIR / args.against), set()
    rows = []
    print(f"fitted on {', '.join(sorted(fit or model['fitted_on']))}; predicted against measured:")
    for r in runs:
        if r["label"] in fit:
            continue
        # N raylets on one machine: N nodes sharing its cores (the model's compute divides by all
        # the cores; the shuffle between raylets is counted as network)
        nodes = max(1, r.get("raylets", 0))
        p = predict(model, r["documents"], nodes, r["cores"] / nodes)
        err = p["total_s"] / r["wall_s"] - 1
        stage_err = {s: p["stages"][s]["seconds"] / max(r["stages"][s]["seconds"], 1e-9) - 1 for s in STAGES}
        rows.append({"label": r["label"], "documents": r["documents"], "nodes": nodes, "measured_s": r["wall_s"],
                     "predicted_s": p["total_s"], "error": err, "stage_error": stage_err,
                     "work_dir_measured": sum(r["stages"][s]["work_bytes"] for s in STAGES),
                     "work_dir_predicted": p["work_dir_bytes"]})
        print(f"  {r['label']:>5} ({nodes} node{'s' if nodes > 1 else ''}, {r['cores']} cores): measured {r['wall_s']:.1f} s, predicted {p['total_s']:.1f} s ({err:+.0%}); "
              + ", ".join(f"{s} {e:+.0%}" for s, e in stage_err.items())
              + f"; work dir {fmt_bytes(rows[-1]['work_dir_measured'])} / {fmt_bytes(p['work_dir_bytes'])}")
    if args.output:
        write_json(RESULTS_DIR / args.output, dict(run_header(sys.argv), model=model, checks=rows))
    return 0 if all(abs(r["error"]) <= 0.25 for r in rows) else 1


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="run neardup on samples and record what each stage used")
    m.add_argument("--sizes", help="benchmark corpus sizes, e.g. 100k,1M (generated under bench/data/)")
    m.add_argument("--run", action="append", help="LABEL=GLOB[,GLOB]: a sample of your corpus (repeatable)")
    m.add_argument("--engine", default="ray", choices=("local", "ray"))
    m.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="cores to use (default: all)")
    m.add_argument("--neardup-args", default="", help="more options for neardup dedup (e.g. --ray-address ADDR)")
    m.add_argument("--output", default="plan_runs.json", help="file under bench/results/")
    m.add_argument("--append", action="store_true", help="add to the runs already in --output")
    m.add_argument("--no-warmup", action="store_true", help="skip the untimed 2,000-document run")
    m.add_argument("--run-dir", default=str(DATA_DIR / "plan_run"), help="scratch folder of a run (emptied)")
    m.add_argument("--raylets", type=int, default=0,
                   help="start a ray.cluster_utils.Cluster of N raylets on this machine and run joined to it")
    m.add_argument("--raylet-cpus", type=int, default=0, help="CPUs of each raylet (default: --workers / N, at least 1)")
    m.add_argument("--raylet-store-mb", type=int, default=1536, help="object store of each raylet, MiB")
    p = sub.add_parser("predict", help="time, memory, work dir and bytes moved for N documents")
    p.add_argument("--docs", required=True, help="documents, e.g. 1B, 250M")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores per node")
    p.add_argument("--store", default="fs", choices=sorted(STORES), help="shared file system or object store")
    p.add_argument("--node-gbs", type=float, default=None, help="storage GB/s per node (default by --store)")
    p.add_argument("--aggregate-gbs", type=float, default=None, help="storage GB/s of the whole store")
    p.add_argument("--network-gbit", type=float, default=10.0, help="network per node, Gbit/s")
    p.add_argument("--node-memory-gb", type=float, default=128.0)
    p.add_argument("--runs", default="plan_runs.json", help="measured runs under bench/results/")
    p.add_argument("--fit", default=None, help="labels of the runs to fit on (default: all)")
    c = sub.add_parser("check", help="fit on some runs, predict the others; exit 1 past 25%% error")
    c.add_argument("--fit", required=True, help="labels of the runs to fit on, e.g. 100k,1M")
    c.add_argument("--runs", default="plan_runs.json")
    c.add_argument("--output", default=None, help="write the check under bench/results/")
    c.add_argument("--against", default=None,
                   help="predict the runs of this file under bench/results/ instead (e.g. a --raylets measure)")
    args = ap.parse_args(argv)
    return {"measure": cmd_measure, "predict": cmd_predict, "check": cmd_check}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
