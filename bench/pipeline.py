"""End-to-end dedup (JSONL in, removals out) at threshold 0.8: neardup against datasketch and rensa.

    .venv/bin/python bench/pipeline.py                                  # 100k and 1M documents
    .venv/bin/python bench/pipeline.py --sizes 20000 --tools datasketch,rensa

For every size, a synthetic corpus (neardup.testing.synth, seed 0, a third planted near-duplicates with
word-5-gram Jaccard uniform in [0.5, 0.95]) is written once to bench/data/synth_N_s0.jsonl with
its ground truth beside it (synth_N_s0.truth.npz), and reused by later runs.

Every tool runs in its own subprocess, so its wall time (Python start and imports included) and
its peak memory (psutil, summed over the process tree every 0.1 s, and the kernel's ru_maxrss)
are its own:
    neardup     python -m neardup dedup CORPUS --output OUT --threshold 0.8 --quiet
                (a 2,000-document run first fills numba's compile cache; it is not timed)
    peers       python bench/peers.py dedup --tool T CORPUS --output RESULT.json
                (JSONL read + shingling + signatures + LSH + union-find, see bench/peers.py);
                only on sizes up to --peer-max-size (100k by default)
When 1M documents are asked for, neardup also runs at 250k: the scaling ratio time(1M)/time(250k)
(linear would be 4).

Quality at the threshold, graded with exact word-5-gram Jaccard computed here in plain Python
(bench/common.py, independent of neardup's code):
    residual        among the planted pairs (same cluster) whose exact Jaccard >= threshold,
                    the share with both documents still kept
    false removals  among removed documents, the share whose exact Jaccard with the
                    representative the tool names (peers: the kept first document of the
                    component) is < 0.75

neardup runs ``--repeat`` times (3 by default) at every size and its median run (by wall time) is
the one reported and graded; every run's wall and CPU are kept (``runs_wall_s``, ``runs_cpu_s``).
A 100k neardup run lasts ~1.3 s and one run varies by +-0.1 s on this machine, where a peer's
run of 13-130 s varies by a few per cent, so the peers run once. ``--rounds R`` repeats the
whole (neardup ``--repeat`` times, then each peer) R times at each size: the machine's drift
over minutes then falls on both sides of each round's ratio; every round's ratios are kept
(``rounds``, ``round_ratios`` with their median), and the reported records are each tool's
median round.

Targets reported against (measured, never adjusted; issue 32): neardup >= 12x rensa and >= 35x
datasketch in docs/s at the peers' largest size (100k), >= 15x rensa at 1M when the peers run
there (``--peer-max-size 1000000``), peak memory < 2 GB at 1M documents, residual < 2 %, false
removals < 0.5 %, time(1M)/time(250k) <= 4.4.

Writes bench/results/pipeline.json (``--output``) and prints a table.
"""

from __future__ import annotations

import argparse
import compileall
import gc
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (BENCH_DIR, DATA_DIR, REPO_DIR, RESULTS_DIR, disk_read_note, ensure_corpus, fmt_bytes,  # noqa: E402
                    TruthPairs, fmt_rate, grade, gram_set, jaccard_sets, load_truth, read_jsonl_texts,
                    WARMUP_ENV, run_header, run_measured, write_json)

PEER_TOOLS = ("datasketch", "rensa", "rensa-dedup")
TARGETS = {
    "neardup_over_rensa_docs_per_s": (">=", 12.0),
    "neardup_over_datasketch_docs_per_s": (">=", 35.0),
    "neardup_over_rensa_docs_per_s_at_1M": (">=", 15.0),
    "neardup_peak_memory_bytes_at_1M": ("<", 2 * 10**9),
    "neardup_residual_share": ("<", 0.02),
    "neardup_false_removal_share": ("<", 0.005),
    "neardup_time_1M_over_250k": ("<=", 4.4),
}


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- neardup

def neardup_command(corpus: Path, out: Path, threshold: float, extra: List[str]) -> List[str]:
    return [sys.executable, "-m", "neardup", "dedup", str(corpus), "--output", str(out),
            "--threshold", str(threshold), "--quiet", *extra]


def _to_index(values, n: int):
    """Map neardup's ids (our JSONL ids 0..n-1, as int or str) back to document indices."""
    out = np.empty(len(values), np.int64)
    how = "int"
    for k, v in enumerate(values):
        if v is None:
            out[k] = -1
        elif isinstance(v, (int, np.integer)):
            out[k] = int(v)
        else:
            s = str(v)
            if s.isdigit():
                out[k] = int(s)
                how = "str"
            else:
                m = re.search(r"(\d+)$", s)
                out[k] = int(m.group(1)) if m else -1
                how = "trailing digits of str"
    return out, how


def read_neardup_output(out: Path, n: int) -> dict:
    import pyarrow.parquet as pq
    res: dict = {}
    stats_path = out / "stats.json"
    if stats_path.exists():
        res["stats"] = json.loads(stats_path.read_text(encoding="utf-8"))
    removed_path = out / "removed.parquet"
    if not removed_path.exists():
        res["error"] = f"{removed_path} not found"
        return res
    table = pq.read_table(removed_path)
    res["removed_columns"] = table.column_names
    ids, how_i = _to_index(table.column("id").to_pylist(), n)
    reps, how_r = _to_index(table.column("representative").to_pylist(), n)
    res["id_mapping"] = {"id": how_i, "representative": how_r}
    res["removed"] = ids
    res["representative"] = reps
    if "similarity" in table.column_names:
        sim = np.asarray(table.column("similarity").to_numpy(zero_copy_only=False), float)
        res["reported_similarity_quantiles"] = (np.nanquantile(sim, [0, 0.01, 0.5, 1]).round(4).tolist()
                                                if len(sim) else None)
    if "source" in table.column_names:
        vals, counts = np.unique(np.asarray(table.column("source").to_pylist(), dtype=str),
                                 return_counts=True)
        res["source_counts"] = dict(zip(vals.tolist()[:20], counts.tolist()[:20]))
    bad = int((ids < 0).sum() + (ids >= n).sum())
    if bad:
        res["error"] = f"{bad} removed ids could not be mapped to document indices"
    return res


def run_neardup(corpus: dict, threshold: float, extra: List[str], runs_dir: Path,
                timeout: float) -> dict:
    n = corpus["n_docs"]
    out = runs_dir / f"neardup_{n}"
    if out.exists():
        shutil.rmtree(out)
    cmd = neardup_command(Path(corpus["path"]), out, threshold, extra)
    log(f"  neardup {n:,}: {' '.join(shlex.quote(c) for c in cmd[1:])}")
    m = run_measured(cmd, timeout=timeout, cwd=REPO_DIR)
    rec = {"tool": "neardup", "n_docs": n, "output_dir": str(out), **_measure_fields(m, n, corpus)}
    if m["returncode"] != 0:
        rec["error"] = f"exit status {m['returncode']}" + (" (timed out)" if m["timed_out"] else "")
        rec["stderr_tail"] = m["stderr_tail"][-2000:]
        log(f"    FAILED: {rec['error']}: {m['stderr_tail'][-500:].strip()}")
        return rec
    got = read_neardup_output(out, n)
    rec.update({k: v for k, v in got.items() if k not in ("removed", "representative")})
    if "removed" in got:
        rec["_removed"], rec["_representative"] = got["removed"], got["representative"]
        rec["removed_count"] = int(len(got["removed"]))
    log(f"    {m['wall_s']:.1f} s, {fmt_rate(rec['docs_per_s'])} docs/s, peak {fmt_bytes(m['peak_memory_bytes'])}"
        f", removed {rec.get('removed_count', '?')}")
    warning = disk_read_note([m], corpus["bytes"])
    if warning:
        rec["disk_read_warning"] = warning
        log(f"    {warning}")
    return rec


def _bands_rows(rec: dict):
    params = rec.get("params") or rec.get("stats", {}).get("params") or {}
    b, r = params.get("bands"), params.get("rows")
    return (int(b), int(r)) if b and r else None


def _check_id_offset(rec: dict, texts) -> None:
    """When ids were read as "<file>:<number>", make sure the number is the 0-based line index.

    Compares neardup's reported similarity with the exact Jaccard of the first removed pairs for
    offsets 0 and -1 (a 1-based line number) and keeps the offset that matches.
    """
    if "trailing digits" not in str(rec.get("id_mapping")) or not len(rec["_removed"]):
        return
    import pyarrow.parquet as pq
    out = Path(rec["output_dir"])
    sim = pq.read_table(out / "removed.parquet", columns=["similarity"]).column("similarity").to_pylist()
    k = min(30, len(sim))
    errs = {}
    for off in (0, -1):
        a, b = rec["_removed"][:k] + off, rec["_representative"][:k] + off
        if (a < 0).any() or (b < 0).any() or (a >= len(texts)).any() or (b >= len(texts)).any():
            continue
        ex = [jaccard_sets(gram_set(texts[i]), gram_set(texts[j])) for i, j in zip(a, b)]
        errs[off] = float(np.mean([abs(x - (y if y is not None else 0)) for x, y in zip(ex, sim)]))
    best = min(errs, key=errs.get)
    rec["id_mapping"]["row_offset"] = best
    rec["id_mapping"]["check_mean_abs_diff"] = errs
    if best:
        rec["_removed"] = rec["_removed"] + best
        rec["_representative"] = rec["_representative"] + best


def median_run(runs: List[dict]) -> dict:
    """The run of median wall time among ``runs`` (the lower middle one for an even count), with
    every run's wall and CPU seconds beside it; a failed run is the one reported."""
    failed = [r for r in runs if "error" in r]
    pick = failed[0] if failed else sorted(runs, key=lambda r: r["wall_s"])[(len(runs) - 1) // 2]
    pick["runs_wall_s"] = [round(r["wall_s"], 4) for r in runs]
    pick["runs_cpu_s"] = [round(r["cpu_user_s"] + r["cpu_sys_s"], 4) for r in runs]
    pick["runs_disk_read_bytes"] = [r.get("disk_read_bytes") for r in runs]
    if len(runs) > 1:
        log(f"    median of {len(runs)}: {pick['wall_s']:.2f} s (runs {', '.join(f'{w:.2f}' for w in pick['runs_wall_s'])})")
    return pick


# --------------------------------------------------------------------------- peers

def run_peer(tool: str, corpus: dict, threshold: float, bands: Optional[int], verify: Optional[str],
             runs_dir: Path, timeout: float) -> dict:
    n = corpus["n_docs"]
    out = runs_dir / f"{tool}_{n}.json"
    if out.exists():
        out.unlink()
    cmd = [sys.executable, str(BENCH_DIR / "peers.py"), "dedup", "--tool", tool, corpus["path"],
           "--output", str(out), "--threshold", str(threshold)]
    if bands:
        cmd += ["--bands", str(bands)]
    if verify:
        cmd += ["--verify", verify]
    log(f"  {tool} {n:,} ...")
    m = run_measured(cmd, timeout=timeout, cwd=REPO_DIR)
    rec = {"tool": tool, "n_docs": n, **_measure_fields(m, n, corpus)}
    if m["returncode"] != 0 or not out.exists():
        rec["error"] = f"exit status {m['returncode']}" + (" (timed out)" if m["timed_out"] else "")
        rec["stderr_tail"] = m["stderr_tail"][-2000:]
        log(f"    FAILED: {rec['error']}: {m['stderr_tail'][-500:].strip()}")
        return rec
    got = json.loads(out.read_text(encoding="utf-8"))
    rec.update(description=got["description"], params=got["params"], timings=got["timings"],
               candidate_pairs=got.get("candidate_pairs"), removed_count=len(got["removed"]))
    rec["_removed"] = np.asarray(got["removed"], np.int64)
    rec["_representative"] = np.asarray(got["representative"], np.int64)
    log(f"    {m['wall_s']:.1f} s, {fmt_rate(rec['docs_per_s'])} docs/s, peak {fmt_bytes(m['peak_memory_bytes'])}"
        f", removed {rec['removed_count']}")
    return rec


def _measure_fields(m: dict, n: int, corpus: dict) -> dict:
    return {"command": m["command"], "returncode": m["returncode"], "wall_s": m["wall_s"],
            "docs_per_s": n / m["wall_s"], "mb_per_s": corpus["text_bytes"] / 1e6 / m["wall_s"],
            "cpu_user_s": m["cpu_user_s"], "cpu_sys_s": m["cpu_sys_s"],
            "peak_memory_bytes": m["peak_memory_bytes"], "peak_rss_tree_bytes": m["peak_rss_tree_bytes"],
            "peak_vmhwm_bytes": m["peak_vmhwm_bytes"], "ru_maxrss_bytes": m["ru_maxrss_bytes"],
            "disk_read_bytes": m.get("disk_read_bytes"), "major_faults": m.get("major_faults"),
            "timed_out": m["timed_out"]}


def round_record(n: int, k: int, got: Dict[str, dict]) -> dict:
    """One round of ``--rounds`` at ``n`` documents: each tool's wall seconds and neardup's ratio
    to each peer (docs/s) in that round alone."""
    rec = {"n_docs": n, "round": k + 1, "wall_s": {t: r.get("wall_s") for t, r in got.items()}, "ratios": {}}
    nd = got.get("neardup")
    for tool, r in got.items():
        if tool != "neardup" and nd and "error" not in nd and "error" not in r:
            rec["ratios"][f"neardup/{tool}"] = nd["docs_per_s"] / r["docs_per_s"]
            log(f"    round {k + 1}: neardup/{tool} {rec['ratios'][f'neardup/{tool}']:.2f}x")
    return rec


def median_round(tool: str, recs: List[dict]) -> dict:
    """The record of ``tool`` of median wall time over the rounds (the lower middle one for an
    even count; a failed one if any failed), with each round's wall seconds beside it."""
    failed = [r for r in recs if "error" in r]
    pick = failed[0] if failed else sorted(recs, key=lambda r: r["wall_s"])[(len(recs) - 1) // 2]
    if len(recs) > 1:
        pick["rounds_wall_s"] = [round(r["wall_s"], 4) for r in recs]
    for r in recs:
        if r is not pick:  # the removals kept for grading are the reported run's alone
            r.pop("_removed", None)
            r.pop("_representative", None)
    return pick


# --------------------------------------------------------------------------- main

def compile_bytecode(env: Optional[Dict[str, str]] = None) -> None:
    """Writes the bytecode of the neardup package that ``python -m neardup`` resolves here and of
    bench/'s modules (the peers import bench/common.py), as an install does: each timed process
    starts from current bytecode, whatever PYTHONDONTWRITEBYTECODE says."""
    subprocess.run([sys.executable, "-c", "import compileall, os, neardup; "
                    "compileall.compile_dir(os.path.dirname(neardup.__file__), quiet=1)"],
                   check=True, cwd=REPO_DIR, env=env)
    compileall.compile_dir(str(BENCH_DIR), maxlevels=0, quiet=1)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated corpus sizes")
    ap.add_argument("--tools", default="neardup,datasketch,rensa",
                    help="comma-separated: neardup," + ",".join(PEER_TOOLS))
    ap.add_argument("--peer-max-size", type=int, default=100_000,
                    help="run the peers only on corpora up to this size (default 100000)")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--false-below", type=float, default=0.75,
                    help="a removal is false when exact J with its representative is below this")
    ap.add_argument("--seed", type=int, default=0, help="corpus seed")
    ap.add_argument("--peer-bands", type=int, default=None,
                    help="LSH bands for the peers (default: datasketch's own choice, rensa 8)")
    ap.add_argument("--peer-verify", choices=["none", "estimate"], default=None,
                    help="peers: keep only candidates with estimated J >= threshold (default none)")
    ap.add_argument("--neardup-args", default="", help="extra arguments for neardup dedup (one string)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed neardup runs at each size; the median one (by wall) is reported (default 3)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds at each size, each running neardup (--repeat times) then every peer, so that "
                         "the machine's drift falls on both; every round's ratios are kept and the reported "
                         "records are each tool's median round (default 1)")
    ap.add_argument("--no-scaling", action="store_true", help="skip the extra 250k neardup run")
    ap.add_argument("--no-quality", action="store_true", help="skip grading against the truth")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per tool run")
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "pipeline.json")
    args = ap.parse_args(argv)

    sizes = sorted({int(float(s)) for s in args.sizes.split(",") if s.strip()})
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    bad = set(tools) - {"neardup", *PEER_TOOLS}
    if bad:
        ap.error(f"unknown tools {sorted(bad)}")
    extra = shlex.split(args.neardup_args)
    neardup_sizes = list(sizes)
    if "neardup" in tools and not args.no_scaling and max(sizes) >= 1_000_000 and 250_000 not in sizes:
        neardup_sizes = sorted(set(sizes) | {250_000})
    all_sizes = sorted(set(neardup_sizes if "neardup" in tools else []) |
                       {s for s in sizes if s <= args.peer_max_size and set(tools) & set(PEER_TOOLS)})

    result: Dict = run_header(sys.argv)
    result["settings"] = {"sizes": sizes, "neardup_sizes": neardup_sizes if "neardup" in tools else [],
                          "tools": tools, "peer_max_size": args.peer_max_size,
                          "threshold": args.threshold, "false_below": args.false_below,
                          "seed": args.seed, "peer_bands": args.peer_bands,
                          "peer_verify": args.peer_verify or "none", "neardup_args": extra}
    runs_dir = args.data_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)

    corpora = {n: ensure_corpus(n, args.seed, args.data_dir, log=log) for n in all_sizes}
    result["corpora"] = corpora

    # Bytecode as an install writes it: with PYTHONDONTWRITEBYTECODE=1 (as here) a source tree whose
    # __pycache__ is stale compiles those modules again at every start (+0.05-0.09 CPU-s a
    # neardup run), which no pip-installed tool pays; the peers' bench modules the same way.
    compile_bytecode()

    if "neardup" in tools:
        # numba compiles every kernel on the first run after an install or a source change (minutes
        # on a small machine) and caches it; two untimed runs, so the timed ones start warm.
        warm = ensure_corpus(2000, args.seed, args.data_dir, log=log)
        out = runs_dir / "neardup_warmup"
        result["neardup_warmup"] = []
        for k in range(2):
            if out.exists():
                shutil.rmtree(out)
            log(f"neardup warm-up {k + 1}/2 (2,000 documents; compiles on a cold cache; not timed) ...")
            m = run_measured(neardup_command(Path(warm["path"]), out, args.threshold, extra),
                             timeout=args.timeout, cwd=REPO_DIR, env=dict(os.environ, **WARMUP_ENV))
            result["neardup_warmup"].append(
                {"wall_s": m["wall_s"], "returncode": m["returncode"],
                 "stderr_tail": m["stderr_tail"][-1000:] if m["returncode"] else ""})
            log(f"  {m['wall_s']:.1f} s")
            if m["returncode"] != 0:
                log(f"  warm-up failed (exit {m['returncode']}): {m['stderr_tail'][-500:].strip()}")
                break

    records: List[dict] = []
    result["rounds"] = []
    for n in all_sizes:
        log(f"== {n:,} documents")
        by_round: List[Dict[str, dict]] = []  # each round's record of each tool
        for k in range(max(1, args.rounds)):
            if args.rounds > 1:
                log(f"  round {k + 1}/{args.rounds}")
            got: Dict[str, dict] = {}
            if "neardup" in tools and n in neardup_sizes:
                runs = [run_neardup(corpora[n], args.threshold, extra, runs_dir, args.timeout)
                        for _ in range(max(1, args.repeat))]
                got["neardup"] = median_run(runs)
            if n <= args.peer_max_size and n in sizes:
                for tool in tools:
                    if tool in PEER_TOOLS:
                        got[tool] = run_peer(tool, corpora[n], args.threshold, args.peer_bands,
                                             args.peer_verify, runs_dir, args.timeout)
            by_round.append(got)
            if args.rounds > 1:
                result["rounds"].append(round_record(n, k, got))
        recs = [median_round(tool, [got[tool] for got in by_round]) for tool in by_round[0]]
        gradable = [r for r in recs if "_removed" in r and "error" not in r]
        if gradable and not args.no_quality:
            log("  grading against the truth (exact Jaccard) ...")
            t0 = time.perf_counter()
            texts, _ = read_jsonl_texts(Path(corpora[n]["path"]))
            truth = TruthPairs(texts, load_truth(Path(corpora[n]["truth"]))["cluster_of"])
            corpora[n]["planted_pairs"] = int(len(truth.j))
            corpora[n]["planted_pairs_at_or_above_threshold"] = int((truth.j >= args.threshold).sum())
            for r in gradable:
                if r["tool"] == "neardup":
                    _check_id_offset(r, texts)
                r["quality"] = grade(truth, texts, r["_removed"], r["_representative"],
                                     threshold=args.threshold, false_below=args.false_below)
                br = _bands_rows(r)
                if br:
                    # What the LSH S-curve alone predicts: the mean over true pairs of
                    # P(never candidates) = (1 - J^r)^b (transitive links can only do better).
                    jt = truth.j[truth.j >= args.threshold]
                    r["quality"]["s_curve"] = {
                        "bands": br[0], "rows": br[1],
                        "predicted_residual_share": float(np.mean((1 - jt ** br[1]) ** br[0])) if len(jt) else None,
                        "p_candidate_at_threshold": float(1 - (1 - args.threshold ** br[1]) ** br[0])}
                q = r["quality"]
                log(f"    {r['tool']}: residual {100 * q['residual_share']:.2f} % of {q['true_pairs']} pairs, "
                    f"false removals {100 * q['false_removal_share']:.2f} % of {q['removed']}")
            del texts, truth
            gc.collect()
            log(f"  graded in {time.perf_counter() - t0:.1f} s")
        for r in recs:
            r.pop("_removed", None)
            r.pop("_representative", None)
        records.extend(recs)
        result["runs"] = records
        write_json(args.output, result)          # partial results survive a later failure

    # Ratios and targets.
    def rec(tool, n):
        for r in records:
            if r["tool"] == tool and r["n_docs"] == n and "error" not in r:
                return r
        return None

    ratios = {}
    for n in sizes:
        nd = rec("neardup", n)
        for tool in PEER_TOOLS:
            p = rec(tool, n)
            if nd and p:
                ratios[f"{n}: neardup/{tool} docs/s"] = nd["docs_per_s"] / p["docs_per_s"]
    result["ratios"] = ratios
    if args.rounds > 1:  # each round's own ratio, neardup and the peer run minutes apart at most
        per: Dict[str, List[float]] = {}
        for r in result["rounds"]:
            for key, v in r["ratios"].items():
                per.setdefault(f"{r['n_docs']}: {key} docs/s", []).append(v)
        result["round_ratios"] = {key: {"each": v, "median": statistics.median(v)} for key, v in per.items()}
        for key, v in result["round_ratios"].items():
            log(f"  {key} by round: {', '.join(f'{x:.2f}' for x in v['each'])} (median {v['median']:.2f}x)")
    nd_1m, nd_250k = rec("neardup", 1_000_000), rec("neardup", 250_000)
    scaling = nd_1m["wall_s"] / nd_250k["wall_s"] if nd_1m and nd_250k else None
    result["scaling"] = {"time_1M_over_time_250k": scaling, "linear": 4.0}

    peer_n = max([n for n in sizes if n <= args.peer_max_size], default=None)
    largest_nd = max([r for r in records if r["tool"] == "neardup" and "error" not in r],
                     key=lambda r: r["n_docs"], default=None)
    measured = {
        "neardup_over_rensa_docs_per_s": ratios.get(f"{peer_n}: neardup/rensa docs/s"),
        "neardup_over_datasketch_docs_per_s": ratios.get(f"{peer_n}: neardup/datasketch docs/s"),
        "neardup_over_rensa_docs_per_s_at_1M": ratios.get("1000000: neardup/rensa docs/s"),
        "neardup_peak_memory_bytes_at_1M": nd_1m["peak_memory_bytes"] if nd_1m else None,
        "neardup_residual_share": (largest_nd or {}).get("quality", {}).get("residual_share"),
        "neardup_false_removal_share": (largest_nd or {}).get("quality", {}).get("false_removal_share"),
        "neardup_time_1M_over_250k": scaling,
    }
    targets = {}
    for key, (op, goal) in TARGETS.items():
        v = measured[key]
        met = None if v is None else {">=": v >= goal, "<": v < goal, "<=": v <= goal}[op]
        targets[key] = {"measured": v, "target": f"{op} {goal}", "met": met}
    result["targets"] = targets
    result["targets_note"] = (f"throughput ratios at {peer_n} documents (the largest size the peers ran); "
                              f"quality at the largest size neardup ran "
                              f"({largest_nd['n_docs'] if largest_nd else None})")
    write_json(args.output, result)

    # Table.
    log("")
    log(f"{'tool':<12} {'docs':>9} {'wall s':>8} {'docs/s':>10} {'MB/s':>7} {'peak mem':>10} "
        f"{'removed':>8} {'residual':>9} {'false rm':>9}")
    for r in records:
        q = r.get("quality", {})
        res = f"{100 * q['residual_share']:.2f}%" if q else "-"
        fr = f"{100 * q['false_removal_share']:.2f}%" if q else "-"
        err = "  ERROR: " + r["error"] if "error" in r else ""
        log(f"{r['tool']:<12} {r['n_docs']:>9,} {r['wall_s']:>8.1f} {fmt_rate(r['docs_per_s']):>10} "
            f"{r['mb_per_s']:>7.1f} {fmt_bytes(r['peak_memory_bytes']):>10} "
            f"{str(r.get('removed_count', '-')):>8} {res:>9} {fr:>9}{err}")
    for k, v in ratios.items():
        log(f"  {k}: {v:.1f}x")
    if scaling:
        log(f"  neardup time(1M)/time(250k): {scaling:.2f}")
    for k, t in targets.items():
        if t["measured"] is not None:
            log(f"  target {k} {t['target']}: measured {t['measured']:.4g} -> {'met' if t['met'] else 'NOT met'}")
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
