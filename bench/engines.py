"""The local engine against the Ray engine on one machine, and the per-core rates of the Ray model.

    .venv/bin/python bench/engines.py                          # 100k and 1M documents
    .venv/bin/python bench/engines.py --sizes 100000           # one size
    .venv/bin/python bench/engines.py --throughput-only        # only the per-core rates

Engines. For every size the synthetic corpus bench/data/synth_N_s0.jsonl (neardup.testing.synth, shared
with bench/pipeline.py, generated once) is deduplicated twice, each run its own subprocess:
    python -m neardup dedup CORPUS --output OUT --quiet --engine local
    python -m neardup dedup CORPUS --output OUT --quiet --engine ray   (starts a local Ray instance
                                                                      on every core, stops it)
timed from start to exit (Python start, imports and, for Ray, starting and stopping the local
instance included), ``--repeat`` times each, alternating (the median run is reported, every wall
time is listed: this machine is shared). Peak memory is polled every 0.2 s over the process tree (the command, and
for Ray the raylet, GCS, workers it starts): the largest sum of RSS, and the largest sum of PSS
(shared pages, e.g. Ray's object store mapped by several workers, divided between the processes
that map them: RSS counts them once per process). A 2,000-document run of each engine first
fills numba's compile cache; it is not timed. The outputs of the two engines are compared file
by file (stats.json without "seconds"): ``same_output``.

Per-core rates (``throughput``), the inputs of the model in docs/scaling.md:
    signatures   MinHasher on one numba thread over 20,000 corpus documents: text -> signature
                 and band keys, for verify=estimate (signatures_and_counts) and exact
                 (signatures_and_shingles, which also keeps the shingle hashes)
    stages       the Ray engine's task functions run in this process on one thread (numba and
                 Arrow), without Ray: read tasks over a 50,000-document JSONL file (parse,
                 kernels, shard files), and the pair search over one partition holding all of
                 it (band rows, buckets, data lookup, re-anchored search, distinct pairs)
    grouping     the Ray engine's band-key shuffle on a local Ray instance with --cpus CPUs:
                 (part, band, key, doc) rows of every band of 1M documents (13 bands, a third of
                 the documents in groups that share keys) -> keyed shuffle -> buckets; rows/s
                 divided by the CPUs; and the local engine's bucket_runs on the same keys, one thread

Writes bench/results/engines.json (``--output``) and prints a table. The Ray engine's overhead
on one machine should stay under 2x the local engine's (wall time).
"""

from __future__ import annotations

import argparse
import os
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (DATA_DIR, REPO_DIR, RESULTS_DIR, WARMUP_ENV, ensure_corpus, fmt_bytes, run_header,  # noqa: E402
                    write_json)

RATIO_TARGET = 2.0


# --------------------------------------------------------------------------- measuring a run

def measure(cmd: List[str], poll_s: float = 0.2, timeout: Optional[float] = None) -> dict:
    """Runs cmd; wall time, peak RSS and PSS summed over its process tree, exit status."""
    import psutil

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_DIR)
    root = psutil.Process(proc.pid)
    peak_rss = peak_pss = 0
    peak_procs = 0
    while proc.poll() is None:
        rss = pss = 0
        try:
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                mi = p.memory_full_info()
                rss += mi.rss
                pss += getattr(mi, "pss", mi.rss)
            except psutil.Error:
                pass
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        peak_procs = max(peak_procs, len(procs))
        if timeout is not None and time.perf_counter() - t0 > timeout:
            for p in procs[::-1]:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            break
        try:
            proc.wait(poll_s)
        except subprocess.TimeoutExpired:
            pass
    out, err = proc.communicate()
    return {"command": " ".join(cmd), "returncode": proc.returncode, "wall_s": time.perf_counter() - t0,
            "peak_rss_tree_bytes": peak_rss, "peak_pss_tree_bytes": peak_pss, "peak_processes": peak_procs,
            "stderr_tail": err.decode("utf-8", "replace")[-3000:]}


def outputs(folder: Path) -> Dict[str, object]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and ".neardup-work" not in p.parts:
            rel = str(p.relative_to(folder))
            if rel == "stats.json":
                d = json.loads(p.read_text())
                d.pop("seconds", None)
                out[rel] = d
            else:
                out[rel] = p.read_bytes()
    return out


def dedup_cmd(corpus: str, out: Path, engine: str, workers: Optional[int]) -> List[str]:
    cmd = [sys.executable, "-m", "neardup", "dedup", corpus, "--output", str(out), "--quiet", "--engine", engine]
    if workers:
        cmd += ["--workers", str(workers)]
    return cmd


def run_engines(n: int, workers: Optional[int], repeat: int, log) -> dict:
    """Both engines ``repeat`` times, alternating; the run with the median wall time of each is
    reported (all wall times are listed)."""
    corpus = ensure_corpus(n, log=log)
    runs_dir = DATA_DIR / "runs" / f"engines_{n}"
    res = {"n_docs": n, "corpus": corpus, "repeat": repeat}
    runs: Dict[str, list] = {"local": [], "ray": []}
    for i in range(repeat):
        for engine in ("local", "ray"):
            out = runs_dir / engine
            shutil.rmtree(out, ignore_errors=True)
            log(f"  {engine} engine, {n:,} documents (run {i + 1}/{repeat}) ...")
            r = measure(dedup_cmd(corpus["path"], out, engine, workers))
            if r["returncode"] != 0:
                raise SystemExit(f"{engine} engine failed:\n{r['stderr_tail']}")
            r["stage_seconds"] = json.loads((out / "stats.json").read_text())["seconds"]
            r["docs_per_s"] = n / r["wall_s"]
            runs[engine].append(r)
            log(f"    {r['wall_s']:.1f} s, peak RSS {fmt_bytes(r['peak_rss_tree_bytes'])}, "
                f"PSS {fmt_bytes(r['peak_pss_tree_bytes'])}, stages {r['stage_seconds']}")
    for engine, rs in runs.items():
        rs = sorted(rs, key=lambda r: r["wall_s"])
        res[engine] = dict(rs[len(rs) // 2], all_wall_s=[r["wall_s"] for r in runs[engine]],
                           all_peak_pss_bytes=[r["peak_pss_tree_bytes"] for r in runs[engine]])
    res["same_output"] = outputs(runs_dir / "local") == outputs(runs_dir / "ray")
    res["ray_over_local_wall"] = res["ray"]["wall_s"] / res["local"]["wall_s"]
    res["ray_over_local_stages"] = sum(res["ray"]["stage_seconds"].values()) / sum(
        res["local"]["stage_seconds"].values())
    res["ray_over_local_peak_pss"] = res["ray"]["peak_pss_tree_bytes"] / max(1, res["local"]["peak_pss_tree_bytes"])
    res["ray_over_local_peak_rss"] = res["ray"]["peak_rss_tree_bytes"] / max(1, res["local"]["peak_rss_tree_bytes"])
    res["wall_target"] = f"ray/local < {RATIO_TARGET}"
    res["wall_target_met"] = res["ray_over_local_wall"] < RATIO_TARGET
    return res


def warm_up(workers: Optional[int], log) -> None:
    corpus = ensure_corpus(2000, log=log)
    for engine in ("local", "ray"):
        out = DATA_DIR / "runs" / f"engines_warmup_{engine}"
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(dedup_cmd(corpus["path"], out, engine, workers), check=True, cwd=REPO_DIR,
                       capture_output=True, env=dict(os.environ, **WARMUP_ENV))


# --------------------------------------------------------------------------- per-core rates

def signature_rates(n_docs: int = 20000, repeat: int = 3) -> dict:
    import pyarrow as pa

    from neardup.kernels.bands import band_keys
    from neardup.config import Config
    from neardup.kernels.minhash import MinHasher
    from neardup.testing.synth import generate_corpus

    cfg = Config().resolved()
    texts = pa.array(generate_corpus(n_docs, seed=1).texts, pa.large_string())
    mb = texts.nbytes / 1e6
    hasher = MinHasher.from_config(Config(workers=1))
    hasher.signatures_and_counts(texts.slice(0, 100))  # compile / load the cache
    hasher.signatures_and_shingles(texts.slice(0, 100))
    out = {"documents": n_docs, "text_mb": mb, "bands": cfg.bands, "rows": cfg.rows, "threads": 1}
    for name, fn in (("estimate", hasher.signatures_and_counts), ("exact", hasher.signatures_and_shingles)):
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = fn(texts)
            band_keys(r[0], cfg.bands, cfg.rows, cfg.seed)
            best = min(best, time.perf_counter() - t0)
        out[name] = {"seconds": best, "docs_per_s_per_core": n_docs / best, "mb_per_s_per_core": mb / best}
    return out


def stage_rates(n_docs: int = 50_000) -> dict:
    """The stage functions both engines run, in this process on one thread (numba and Arrow), no
    Ray: the read stage over one block (JSONL parse, kernels, block files) and the pair search over
    one partition holding all of it (buckets, keep order, search, distinct pairs), per verify
    mode; documents/s per core."""
    import dataclasses
    import os
    import tempfile

    import pyarrow as pa

    from neardup import io as nio
    from neardup.kernels.bands import bucket_runs
    from neardup.config import Config
    from neardup.kernels.hashing import kernel_threads
    from neardup.stages.corpus import Corpus, DocStore
    from neardup.stages.workdir import WorkDir
    from neardup.stages.pairs import distinct_pairs, make_verifier, search_partition
    from neardup.stages.read import read_block
    from neardup.testing.synth import generate_corpus, write_jsonl

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    out = {"documents": n_docs, "threads": 1}
    with tempfile.TemporaryDirectory(prefix="neardup-rates-") as tmp:
        path = os.path.join(tmp, "c.jsonl")
        write_jsonl(path, generate_corpus(n_docs, seed=2).texts)
        sources = nio.discover([path])
        for verify in ("estimate", "exact"):
            cfg = dataclasses.replace(Config(verify=verify).resolved(), workers=1)
            work = WorkDir(os.path.join(tmp, verify), "rates", resume=False)
            with kernel_threads(1):
                t0 = time.perf_counter()
                read_block(work.folder, cfg, sources, 0, [0])
                read_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                corpus = Corpus(work, cfg, [[0]])
                store = DocStore(work.folder, corpus.block_start, cfg.num_perm)
                offsets, members = bucket_runs(corpus.column("keys"), corpus.column("count") > 0)
                checked, _ = search_partition(offsets, members, make_verifier(store, cfg), cfg)
                pairs, candidates = distinct_pairs(checked)
                pairs_s = time.perf_counter() - t0
            out[verify] = {"read_s": read_s, "read_docs_per_s_per_core": n_docs / read_s,
                           "pairs_s": pairs_s, "pairs_docs_per_s_per_core": n_docs / pairs_s,
                           "bucket_members": int(len(members)), "candidate_pairs": candidates,
                           "verified_pairs": pairs.num_rows}
    return out


def _band_rows(n_docs: int, bands: int, seed: int = 0):
    """Band keys of n documents: a third in groups of 2-4 sharing 1-13 bands, the rest unique."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2**63, size=(n_docs, bands), dtype=np.int64).astype(np.uint64) * np.uint64(2) + \
        np.uint64(1)
    dup = rng.permutation(n_docs)[: n_docs // 3]
    src = rng.integers(0, n_docs, size=len(dup))
    shared = rng.random((len(dup), bands)) < rng.uniform(0.1, 1.0, size=(len(dup), 1))
    keys[dup] = np.where(shared, keys[src], keys[dup])
    return keys


def _buckets_of_partition(table):
    import pyarrow as pa

    from neardup.kernels.bands import bucket_runs_of_rows
    doc = table.column("doc").to_numpy()
    offsets, members = bucket_runs_of_rows(table.column("band").to_numpy(), table.column("key").to_numpy(), doc, doc)
    return pa.table({"doc": pa.array(members)})


def grouping_rates(n_docs: int, cpus: int) -> dict:
    """Bucket formation alone: the local engine's (every band of the matrix, a few at a time) and
    the Ray engine's (the rows shuffled on the key, then each partition's buckets), same kernel."""
    import pyarrow as pa

    from neardup.kernels.bands import bucket_runs
    from neardup.engines.ray import RayEngine
    from neardup.kernels.hashing import kernel_threads

    bands = 13
    keys = _band_rows(n_docs, bands)
    rows = n_docs * bands
    # the local engine's grouping, one thread
    with kernel_threads(1):
        t0 = time.perf_counter()
        offsets, members = bucket_runs(keys)
        local_s = time.perf_counter() - t0
    with RayEngine(workers=cpus, quiet=True) as engine:
        blocks = 4 * cpus
        bounds = np.linspace(0, n_docs, blocks + 1).astype(np.int64)
        parts = engine.partitions(rows * 24)
        tables = [pa.table({"band": pa.array(np.tile(np.arange(bands, dtype=np.int32), b - a)),
                            "key": pa.array(keys[a:b].reshape(-1)),
                            "doc": pa.array(np.repeat(np.arange(a, b, dtype=np.int64), bands))})
                  for a, b in zip(bounds[:-1], bounds[1:])]
        runs = []
        for _ in range(2):  # the first run also starts the workers
            frame = engine.persist(engine.map(lambda i: tables[i], range(len(tables))))  # rows exist before the clock
            t0 = time.perf_counter()
            out = engine.persist(engine.map(_buckets_of_partition, engine.shuffle(frame, "key", parts)))
            runs.append(time.perf_counter() - t0)
            members_ray = sum(t.num_rows for t in engine.collect(out))
        ray_s = min(runs)
    return {"documents": n_docs, "bands": bands, "rows": rows, "row_bytes": 24, "cpus": cpus, "partitions": parts,
            "ray_shuffle_and_buckets_s": ray_s, "ray_rows_per_s_per_core": rows / ray_s / cpus,
            "ray_bucket_members": int(members_ray), "local_bucket_runs_s": local_s,
            "local_rows_per_s_per_core": rows / local_s, "local_bucket_members": int(len(members)),
            "buckets": int(len(offsets) - 1)}


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="corpus sizes (documents), comma-separated")
    ap.add_argument("--workers", type=int, default=None, help="--workers for both engines (default: every core)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each engine per size (the median is reported)")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the Ray instance that measures grouping")
    ap.add_argument("--group-docs", type=int, default=1_000_000, help="documents of the grouping measurement")
    ap.add_argument("--throughput-only", action="store_true", help="only the per-core rates")
    ap.add_argument("--no-throughput", action="store_true", help="skip the per-core rates")
    ap.add_argument("--output", default=str(RESULTS_DIR / "engines.json"))
    args = ap.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    result = run_header(sys.argv)
    result["sizes"] = {}
    previous = {}
    try:
        previous = json.loads(Path(args.output).read_text())
    except (OSError, ValueError):
        pass
    if not args.throughput_only:
        warm_up(args.workers, log)
        for n in [int(x) for x in args.sizes.split(",") if x]:
            result["sizes"][str(n)] = run_engines(n, args.workers, args.repeat, log)
    elif "sizes" in previous:
        result["sizes"] = previous["sizes"]
    if not args.no_throughput:
        log("per-core rates: signatures ...")
        result["throughput"] = {"signatures": signature_rates()}
        log("per-core rates: read and pair-search tasks ...")
        result["throughput"]["stages"] = stage_rates()
        log("per-core rates: grouping ...")
        result["throughput"]["grouping"] = grouping_rates(args.group_docs, args.cpus)
    elif "throughput" in previous:
        result["throughput"] = previous["throughput"]
    write_json(Path(args.output), result)

    print(f"{'docs':>10} {'engine':>6} {'wall s':>8} {'peak RSS':>10} {'peak PSS':>10}  stages")
    for n, r in result["sizes"].items():
        for engine in ("local", "ray"):
            e = r[engine]
            print(f"{int(n):>10,} {engine:>6} {e['wall_s']:>8.1f} {fmt_bytes(e['peak_rss_tree_bytes']):>10} "
                  f"{fmt_bytes(e['peak_pss_tree_bytes']):>10}  {e['stage_seconds']}")
        print(f"{'':>10} ray/local wall {r['ray_over_local_wall']:.2f} (target < {RATIO_TARGET}), "
              f"stages {r['ray_over_local_stages']:.2f}, peak PSS {r['ray_over_local_peak_pss']:.2f}; "
              f"same output: {r['same_output']}")
    if "throughput" in result:
        s = result["throughput"]["signatures"]
        g = result["throughput"]["grouping"]
        print(f"signatures per core: estimate {s['estimate']['docs_per_s_per_core']:,.0f} docs/s "
              f"({s['estimate']['mb_per_s_per_core']:.1f} MB/s), exact {s['exact']['docs_per_s_per_core']:,.0f} docs/s")
        st = result["throughput"]["stages"]
        for v in ("estimate", "exact"):
            print(f"{v}: read tasks {st[v]['read_docs_per_s_per_core']:,.0f} docs/s per core, "
                  f"pair search {st[v]['pairs_docs_per_s_per_core']:,.0f} docs/s per core")
        print(f"grouping per core: ray shuffle + buckets {g['ray_rows_per_s_per_core']:,.0f} rows/s, "
              f"local bucket_runs {g['local_rows_per_s_per_core']:,.0f} rows/s")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
