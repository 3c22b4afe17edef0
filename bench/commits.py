"""Two versions of neardup side by side on the same corpus, in one run: is the new one slower?

    git worktree add --detach /tmp/neardup-old OLD_COMMIT
    .venv/bin/python bench/commits.py --old /tmp/neardup-old --sizes 100000,1000000 --repeat 3

Each run is its own subprocess, ``python -m neardup dedup CORPUS --output OUT --quiet`` with
PYTHONPATH pointing at one tree's ``src`` (imports, start-up and the whole pipeline timed), the
two versions alternating (this machine may be shared: alternation spreads any load over both).
Per run: wall time, peak RSS summed over the process tree, and the peak size of the work
directory (polled every 0.2 s). The outputs of the two versions are compared file by file
(stats.json without "seconds"); when they differ, their removals are compared as decisions: the
same removed rows, the same representatives, and how many similarities differ and by how much. The corpus is bench/data/synth_N_s0.jsonl (as bench/pipeline.py).
A 2,000-document run of each version first fills numba's compile cache; it is not timed.

Writes bench/results/commits.json (``--output``) and prints a table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (git_state, tree_bytes, DATA_DIR, REPO_DIR, RESULTS_DIR, WARMUP_ENV, ensure_corpus, fmt_bytes, run_header,  # noqa: E402
                    write_json)
from engines import measure, outputs  # noqa: E402


def run_one(tree: Path, corpus: str, out: Path, engine: str) -> dict:
    work = out.parent / (out.name + "-work")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    peak = [0]
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            peak[0] = max(peak[0], tree_bytes(work))
            time.sleep(0.2)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    cmd = [sys.executable, "-m", "neardup", "dedup", corpus, "--output", str(out), "--quiet", "--engine", engine,
           "--work-dir", str(work)]
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree / "src")
    try:
        r = measure(cmd)
    finally:
        stop.set()
        t.join()
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    r["peak_work_dir_bytes"] = peak[0]
    shutil.rmtree(work, ignore_errors=True)
    if r["returncode"] != 0:
        raise SystemExit(f"{cmd} failed: {r['stderr_tail']}")
    return r


def _removals(folder: Path):
    """(removed rows, representative rows, similarities) in removed.parquet's order; rows from
    the ``row`` column, or from ``NAME:ROW`` ids (older versions)."""
    import pyarrow.parquet as pq
    t = pq.read_table(folder / "removed.parquet").to_pydict()

    def row_of(ids):
        return [int(str(i).rsplit(":", 1)[1]) for i in ids]
    rows = t["row"] if "row" in t else row_of(t["id"])
    reps = row_of(t["representative"]) if all(":" in str(r) for r in t["representative"]) else \
        [int(r) for r in t["representative"]]
    return rows, reps, t["similarity"]


def compare_removals(old: Path, new: Path) -> dict:
    """Whether two outputs remove the same documents for the same representatives, and how far
    their similarities differ (ids are compared as rows: the id column's default changed). Where
    they remove different documents, how many each removes and both do; the similarities are
    compared over the documents both remove (matched by row)."""
    try:
        (ra, pa_, sa), (rb, pb, sb) = _removals(old), _removals(new)
    except (KeyError, ValueError, IndexError) as exc:
        return {"comparable": False, "why": str(exc)}
    by_row = dict(zip(rb, sb))
    both = [r for r in ra if r in by_row]
    sim_a = dict(zip(ra, sa))
    diffs = [abs(sim_a[r] - by_row[r]) for r in both]
    rep_a, rep_b = dict(zip(ra, pa_)), dict(zip(rb, pb))
    return {"comparable": True, "same_removed_rows": ra == rb, "same_representatives": pa_ == pb,
            "removed_old": len(ra), "removed_new": len(rb), "removed_by_both": len(both),
            "same_representative_where_both_remove": sum(rep_a[r] == rep_b[r] for r in both),
            "similarities_that_differ": sum(d > 0 for d in diffs), "similarity_max_abs_diff": max(diffs, default=0.0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="a checkout of the older version (its src/ is used)")
    ap.add_argument("--new", default=str(REPO_DIR), help="the newer version (default: this checkout)")
    ap.add_argument("--sizes", default="100000,1000000", help="corpus sizes (documents), comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each version per size (median reported)")
    ap.add_argument("--engine", default="local", choices=["local", "ray"])
    ap.add_argument("--output", default=str(RESULTS_DIR / "commits.json"))
    args = ap.parse_args(argv)
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    result = run_header(sys.argv)
    result.update(engine=args.engine, trees={k: str(v) for k, v in trees.items()},
                  commits={k: git_state(v)["commit"] for k, v in trees.items()}, sizes={})
    scratch = DATA_DIR / "commits"
    warm = ensure_corpus(2000, log=lambda m: print(m, file=sys.stderr))
    os.environ.update(WARMUP_ENV)  # the warm-ups compile everything (a newer tree's JSONL scanner too)
    for name, tree in trees.items():
        run_one(tree, str(warm["path"]), scratch / f"warm-{name}", args.engine)
    for k in WARMUP_ENV:
        os.environ.pop(k, None)
    for n in [int(x) for x in args.sizes.split(",") if x]:
        corpus = ensure_corpus(n, log=lambda m: print(m, file=sys.stderr))
        runs = {"old": [], "new": []}
        for i in range(args.repeat):
            for name in (("old", "new") if i % 2 == 0 else ("new", "old")):
                print(f"{n:,} docs: {name} run {i + 1}", file=sys.stderr, flush=True)
                runs[name].append(run_one(trees[name], str(corpus["path"]), scratch / f"{name}-{n}", args.engine))
        same = outputs(scratch / f"old-{n}") == outputs(scratch / f"new-{n}")
        entry = {"same_output": same}
        if not same:  # byte-different: the same decisions? (output formats change between versions)
            entry["removals"] = compare_removals(scratch / f"old-{n}", scratch / f"new-{n}")
        for name in runs:
            walls = [r["wall_s"] for r in runs[name]]
            entry[name] = {"wall_s_median": statistics.median(walls), "wall_s_all": walls,
                           "peak_rss_bytes_max": max(r["peak_rss_tree_bytes"] for r in runs[name]),
                           "peak_work_dir_bytes": max(r["peak_work_dir_bytes"] for r in runs[name])}
        entry["new_over_old_wall"] = entry["new"]["wall_s_median"] / entry["old"]["wall_s_median"]
        result["sizes"][str(n)] = entry
        write_json(Path(args.output), result)
    print(f"{'docs':>10} {'version':>8} {'median s':>9} {'all runs':>24} {'peak RSS':>10} {'peak work dir':>14}")
    for n, e in result["sizes"].items():
        for name in ("old", "new"):
            r = e[name]
            print(f"{int(n):>10,} {name:>8} {r['wall_s_median']:>9.1f} "
                  f"{' '.join(f'{w:.1f}' for w in r['wall_s_all']):>24} {fmt_bytes(r['peak_rss_bytes_max']):>10} "
                  f"{fmt_bytes(r['peak_work_dir_bytes']):>14}")
        print(f"{'':>10} new/old wall {e['new_over_old_wall']:.2f}; same output: {e['same_output']}"
              + (f"; removals: {e['removals']}" if "removals" in e else ""))
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
