"""Helpers shared by the benchmark scripts: machine facts, measured subprocesses, JSONL, truth.

Nothing here imports neardup's deduplication code: the ground truth and the exact Jaccard
similarities used to grade every tool are computed independently, in plain Python.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DATA_DIR = BENCH_DIR / "data"

WORD_RE = re.compile(r"\w+")
NGRAM = 5

if str(REPO_DIR / "src") not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO_DIR / "src"))


# --------------------------------------------------------------------------- machine facts

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(module: str) -> Optional[str]:
    try:
        from importlib.metadata import version
        return version(module)
    except Exception:
        return None


def _git(*args: str, tree: Path = REPO_DIR) -> Optional[str]:
    try:
        r = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, timeout=10)
    except Exception:
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def git_state(tree: Path = REPO_DIR) -> dict:
    """The commit a checkout is at and whether tracked files differ from it (None where unknown)."""
    status = _git("status", "--porcelain", "--untracked-files=no", tree=tree)
    return {"commit": _git("rev-parse", "HEAD", tree=tree) or None,
            "dirty": bool(status) if status is not None else None}


def machine_info() -> dict:
    """Cores, CPU model, memory, OS, library versions, git commit, load average at the start."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        usable = os.cpu_count()
    mem = None
    try:
        import psutil
        mem = psutil.virtual_memory().total
    except Exception:
        pass
    git = git_state()
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_bytes": mem,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "versions": {name: _version(name) for name in
                     ("neardup", "numpy", "numba", "pyarrow", "datasketch", "rensa", "psutil")},
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "thread_env": {k: os.environ[k] for k in ("NUMBA_NUM_THREADS", "RAYON_NUM_THREADS",
                                                  "OMP_NUM_THREADS") if k in os.environ},
    }


def run_header(argv: Sequence[str]) -> dict:
    return {
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *argv]),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
    }


def write_json(path: Path, obj: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o)}")


# --------------------------------------------------------------------------- measured subprocess

_LAUNCHER = r"""
import json, os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as exc:
        sys.stderr.write("cannot run %s: %s\n" % (sys.argv[2], exc))
    os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(sys.argv[1], "w") as f:
    json.dump({"status": status, "ru_maxrss_kb": ru.ru_maxrss, "wall_s": wall,
               "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "inblock": ru.ru_inblock,
               "majflt": ru.ru_majflt}, f)
"""


def _vm_hwm(pid: int) -> int:
    """Peak resident set size of one process so far (VmHWM, bytes); 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


# Untimed warm-up runs compile everything, the JSONL scanner too (a run compiles it by itself
# only for an input of 1 GiB or more: see neardup.kernels.jsonl.worth_it), so that no timed run
# pays for compiling.
WARMUP_ENV = {"NEARDUP_JSONL_SCANNER": "1"}


def alternating(trees: Sequence, rounds: int, swap: bool = True):
    """(round, tree) of an A/B of ``trees``: every tree once a round, for ``rounds`` rounds, the
    order reversed every other round with ``swap`` (so that neither tree always runs first)."""
    trees = list(trees)
    for r in range(rounds):
        for tree in (trees[::-1] if swap and r % 2 else trees):
            yield r, tree


def tree_runs(trees: Sequence[str], rounds: int, run, prefix: str, *, swap: bool = True, warm: bool = False,
              show=None) -> Dict[str, list]:
    """{tree: [result, ...]} of ``run(tree, out)`` for each tree in :func:`alternating` order,
    ``out`` a folder in a scratch folder of its own (``prefix``), deleted at the end; with
    ``warm`` one untimed run of each tree first (the kernels compiled, the input in the page
    cache); ``show(round, tree, result)`` prints a line after each run."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    runs: Dict[str, list] = {t: [] for t in trees}
    try:
        if warm:
            for t in trees:
                run(t, scratch / "out")
        for i, t in alternating(trees, rounds, swap):
            runs[t].append(run(t, scratch / "out"))
            if show is not None:
                print(f"{i + 1}/{rounds} {t}: {show(runs[t][-1])}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return runs


def probe_run(tree, probe: str, argv: Sequence[str], out: Path, timeout: Optional[float] = None):
    """``python -c PROBE *argv`` with ``PYTHONPATH=tree``, where ``probe`` is a program that runs
    neardup and prints one ``PROBE {json}`` line to stderr; returns (the probe's last such JSON,
    ``out``'s stats.json, the run's wall seconds); a run that fails exits naming the tree."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", probe, *map(str, argv)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(Path(tree).resolve())}, timeout=timeout)
    wall = time.perf_counter() - t0
    lines = [x for x in r.stderr.splitlines() if x.startswith("PROBE ")]
    if r.returncode != 0 or not lines:
        raise SystemExit(f"{tree}: the run failed\n{r.stderr[-3000:]}")
    return json.loads(lines[-1][len("PROBE "):]), json.loads((Path(out) / "stats.json").read_text()), wall


def run_measured(cmd: Sequence[str], *, timeout: Optional[float] = None, poll_s: float = 0.1,
                 env: Optional[dict] = None, cwd: Optional[Path] = None) -> dict:
    """Run ``cmd``; wall time, CPU time, peak memory and the tail of its output.

    The command runs under a tiny launcher (``python -S``) that forks it and reads its resource
    usage with wait4. (Linux carries a process's RSS high-water mark across fork and exec, so a
    child forked straight from this harness would report the harness's own peak as its ru_maxrss;
    forked from the launcher it inherits only the launcher's few MB.)

    Peak memory, three ways, all excluding the launcher:
        peak_rss_tree_bytes   largest sum of resident set sizes over the command and all its
                              descendants, polled every ``poll_s`` s with psutil (can miss
                              spikes shorter than the interval)
        peak_vmhwm_bytes      largest VmHWM (per-process high-water mark, no spike missed)
                              among the processes of the tree, read at each poll
        ru_maxrss_bytes       the kernel's high-water mark of the largest single process (the
                              command or a descendant it waited for), from wait4
    ``peak_memory_bytes`` is the largest of the three.

    ``disk_read_bytes`` (wait4's ru_inblock, 512-byte units) and ``major_faults``: what the command
    read from storage rather than the page cache. A run meant to time input "in the page cache"
    whose disk_read_bytes is a real share of its input timed a disk instead (a VM whose host
    reclaims the page cache within seconds does that; :func:`disk_read_note`).
    """
    import psutil

    fd, info_path = tempfile.mkstemp(prefix="bench-launch-", suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER, info_path, *map(str, cmd)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    out_chunks: Dict[str, List[bytes]] = {"stdout": [], "stderr": []}

    def _drain(stream, key):
        for chunk in iter(lambda: stream.read(65536), b""):
            out_chunks[key].append(chunk)
            if sum(map(len, out_chunks[key])) > 1 << 20:  # keep the last ~1 MB
                out_chunks[key] = out_chunks[key][-8:]

    readers = [threading.Thread(target=_drain, args=(proc.stdout, "stdout"), daemon=True),
               threading.Thread(target=_drain, args=(proc.stderr, "stderr"), daemon=True)]
    for r in readers:
        r.start()
    peak = 0
    hwm = 0
    samples = 0
    timed_out = False
    try:
        launcher = psutil.Process(proc.pid)
    except psutil.Error:
        launcher = None
    while proc.poll() is None:
        if launcher is not None:
            total = 0
            try:
                procs = launcher.children(recursive=True)
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
                hwm = max(hwm, _vm_hwm(p.pid))
            peak = max(peak, total)
            samples += 1
        if timeout is not None and time.perf_counter() - t0 > timeout:
            timed_out = True
            _kill_tree(proc.pid)
            proc.wait()
            break
        try:
            proc.wait(poll_s)
        except subprocess.TimeoutExpired:
            pass
    outer_wall = time.perf_counter() - t0
    for r in readers:
        r.join(timeout=5)
    try:
        with open(info_path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        info = {}
    finally:
        try:
            os.unlink(info_path)
        except OSError:
            pass
    returncode = (os.waitstatus_to_exitcode(info["status"]) if "status" in info else proc.returncode)
    ru_maxrss = info["ru_maxrss_kb"] * 1024 if "ru_maxrss_kb" in info else None
    stdout = b"".join(out_chunks["stdout"]).decode("utf-8", "replace")
    stderr = b"".join(out_chunks["stderr"]).decode("utf-8", "replace")
    return {
        "command": " ".join(shlex.quote(str(a)) for a in cmd),
        "returncode": returncode,
        "timed_out": timed_out,
        "wall_s": info.get("wall_s", outer_wall),
        "cpu_user_s": info.get("user_s"),
        "cpu_sys_s": info.get("sys_s"),
        "peak_rss_tree_bytes": peak,
        "peak_vmhwm_bytes": hwm,
        "ru_maxrss_bytes": ru_maxrss,
        "peak_memory_bytes": max(peak, hwm, ru_maxrss or 0),
        "memory_samples": samples,
        "disk_read_bytes": info["inblock"] * 512 if "inblock" in info else None,
        "major_faults": info.get("majflt"),
        "stdout_tail": stdout[-4000:],
        "stderr_tail": stderr[-4000:],
    }


def disk_read_note(runs: Sequence[dict], input_bytes: int, share: float = 0.01) -> Optional[str]:
    """A warning when a run of ``runs`` (:func:`run_measured` results) read more than ``share``
    of ``input_bytes`` from storage: its time is not a page-cache time; None otherwise."""
    worst = max((r.get("disk_read_bytes") or 0 for r in runs), default=0)
    if input_bytes and worst > share * input_bytes:
        return (f"WARNING: a run read {worst / 2**20:,.0f} MiB from storage (its input or the program's own files), "
                f"{100 * worst / input_bytes:.0f}% of its {input_bytes / 2**20:,.0f} MiB input: "
                "not all of it was in the page cache, so its times are partly a disk's")
    return None


def _kill_tree(pid: int) -> None:
    import psutil
    try:
        parent = psutil.Process(pid)
        children = parent.children(recursive=True)
    except psutil.Error:
        return
    for p in children + [parent]:
        try:
            p.kill()
        except psutil.Error:
            pass


# --------------------------------------------------------------------------- JSONL

def read_jsonl_texts(path: Path, text_field: str = "text", limit: Optional[int] = None
                     ) -> Tuple[List[str], list]:
    """(texts, ids) from a JSONL file, one json.loads per line."""
    texts: List[str] = []
    ids: list = []
    loads = json.loads
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(texts) >= limit:
                break
            if not line.strip():
                continue
            row = loads(line)
            texts.append(row[text_field])
            ids.append(row.get("id", len(ids)))
    return texts, ids


# --------------------------------------------------------------------------- exact Jaccard

def gram_set(text: str, n: int = NGRAM) -> set:
    """Word n-grams (tuples) of lower-cased ``\\w+`` words; the whole text as one gram when shorter."""
    words = WORD_RE.findall(text.lower())
    if len(words) < n:
        return {tuple(words)} if words else set()
    return set(zip(*[words[i:] for i in range(n)]))


def jaccard_sets(a: set, b: set) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


# --------------------------------------------------------------------------- ground truth

def corpus_paths(n_docs: int, seed: int, data_dir: Path = DATA_DIR) -> Tuple[Path, Path]:
    stem = f"synth_{n_docs}_s{seed}"
    return data_dir / f"{stem}.jsonl", data_dir / f"{stem}.truth.npz"


def ensure_corpus(n_docs: int, seed: int = 0, data_dir: Path = DATA_DIR, log=print) -> dict:
    """Generate (or reuse) bench/data/synth_N_sS.jsonl and its truth file; returns facts about it."""
    from neardup.testing.synth import GENERATOR_VERSION, generate_corpus, write_jsonl

    jsonl, truth = corpus_paths(n_docs, seed, data_dir)
    if jsonl.exists() and truth.exists():
        with np.load(truth) as z:
            version = int(z["generator_version"]) if "generator_version" in z.files else 0
            if int(z["n_docs"]) == n_docs and int(z["seed"]) == seed and version == GENERATOR_VERSION:
                log(f"reusing {jsonl}")
                return {"path": str(jsonl), "truth": str(truth), "n_docs": n_docs, "seed": seed,
                        "generator_version": version, "bytes": jsonl.stat().st_size, "generated": False,
                        "text_bytes": int(z["text_bytes"])}
    data_dir.mkdir(parents=True, exist_ok=True)
    log(f"generating {n_docs} documents (seed {seed}) ...")
    t0 = time.perf_counter()
    corpus = generate_corpus(n_docs, seed=seed)
    gen_s = time.perf_counter() - t0
    text_bytes = sum(len(t.encode("utf-8")) for t in corpus.texts)
    write_jsonl(jsonl, corpus.texts)
    np.savez(truth, cluster_of=corpus.cluster_of, target_jaccard=corpus.target_jaccard,
             design_jaccard=corpus.design_jaccard, n_docs=n_docs, seed=seed, text_bytes=text_bytes,
             generator_version=GENERATOR_VERSION)
    log(f"  generated in {gen_s:.1f} s, written to {jsonl} ({jsonl.stat().st_size / 1e6:.0f} MB)")
    return {"path": str(jsonl), "truth": str(truth), "n_docs": n_docs, "seed": seed,
            "generator_version": GENERATOR_VERSION, "bytes": jsonl.stat().st_size, "generated": True,
            "generate_s": gen_s,
            "text_bytes": text_bytes}


def load_truth(truth_path: Path) -> dict:
    with np.load(truth_path) as z:
        return {k: z[k] for k in z.files}


class TruthPairs:
    """Exact word-5-gram Jaccard of every pair of documents inside each planted cluster.

    Documents of different clusters share no 5-gram by construction (see neardup.testing.synth), so these
    are all the pairs with any similarity. Computed once per corpus, cluster by cluster (only a
    few shingle sets alive at a time), and shared by the grading of every tool.
    """

    def __init__(self, texts: Sequence[str], cluster_of: np.ndarray):
        from neardup.testing.synth import clusters_of
        t0 = time.perf_counter()
        a_list: List[int] = []
        b_list: List[int] = []
        j_list: List[float] = []
        for members in clusters_of(np.asarray(cluster_of), 2):
            ms = members.tolist()
            sets = [gram_set(texts[i]) for i in ms]
            for x in range(len(ms)):
                for y in range(x + 1, len(ms)):
                    a_list.append(ms[x])
                    b_list.append(ms[y])
                    j_list.append(jaccard_sets(sets[x], sets[y]))
        self.n = len(texts)
        self.a = np.asarray(a_list, np.int64)
        self.b = np.asarray(b_list, np.int64)
        self.j = np.asarray(j_list, np.float64)
        self.cluster_of = np.asarray(cluster_of)
        self._lookup = {(x, y): j for x, y, j in zip(a_list, b_list, j_list)}
        self.seconds = time.perf_counter() - t0

    def jaccard(self, texts: Sequence[str], x: int, y: int) -> Tuple[float, bool]:
        """(exact J of documents x and y, whether the pair lies inside a planted cluster)."""
        key = (x, y) if x < y else (y, x)
        j = self._lookup.get(key)
        if j is not None:
            return j, True
        if x == y:
            return 1.0, True
        if not (0 <= x < self.n and 0 <= y < self.n):
            return 0.0, False
        return jaccard_sets(gram_set(texts[x]), gram_set(texts[y])), False

    def ideal_removed(self, threshold: float) -> int:
        """Documents minus connected components of the pairs with J >= threshold."""
        keep = self.j >= threshold
        parent = np.arange(self.n).tolist()

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        merged = 0
        for x, y in zip(self.a[keep].tolist(), self.b[keep].tolist()):
            rx, ry = find(x), find(y)
            if rx != ry:
                parent[max(rx, ry)] = min(rx, ry)
                merged += 1
        return merged


def grade(truth: TruthPairs, texts: Sequence[str], removed: np.ndarray, representative: np.ndarray,
          *, threshold: float = 0.8, false_below: float = 0.75) -> dict:
    """Grade one tool's removals against the planted clusters, with exact word-5-gram Jaccard.

    residual: among pairs inside a planted cluster whose exact Jaccard is >= threshold (the true
        near-duplicate pairs), the share whose two documents were both kept.
    false removals: among removed documents, the share whose exact Jaccard with the representative
        the tool names for it is < false_below.
    ideal_removed: how many documents an exact tool would remove (documents minus connected
        components of the true pairs), for scale.
    """
    removed = np.asarray(removed, np.int64)
    representative = np.asarray(representative, np.int64)
    kept = np.ones(truth.n, bool)
    kept[removed[(removed >= 0) & (removed < truth.n)]] = False
    true = truth.j >= threshold
    residual = true & kept[truth.a] & kept[truth.b]
    sims = np.empty(len(removed))
    outside = 0
    for k, (x, y) in enumerate(zip(removed.tolist(), representative.tolist())):
        sims[k], inside = truth.jaccard(texts, x, y)
        outside += not inside
    n_true = int(true.sum())
    n_removed = len(removed)
    false = int((sims < false_below).sum())
    return {
        "threshold": threshold,
        "true_pairs": n_true,
        "residual_pairs": int(residual.sum()),
        "residual_share": float(residual.sum()) / n_true if n_true else 0.0,
        "removed": n_removed,
        "ideal_removed": truth.ideal_removed(threshold),
        "false_removal_below": false_below,
        "false_removals": false,
        "false_removal_share": false / n_removed if n_removed else 0.0,
        "removed_below_threshold": int((sims < threshold).sum()),
        "removed_with_rep_outside_cluster": outside,
        "removed_similarity_quantiles": (np.quantile(sims, [0, 0.01, 0.5, 0.99, 1]).round(4).tolist()
                                         if n_removed else None),
    }


def quality(texts: Sequence[str], cluster_of: np.ndarray, removed: np.ndarray,
            representative: np.ndarray, *, threshold: float = 0.8, false_below: float = 0.75) -> dict:
    """:func:`grade` with a :class:`TruthPairs` built on the spot (for one-off use)."""
    return grade(TruthPairs(texts, cluster_of), texts, removed, representative,
                 threshold=threshold, false_below=false_below)


def union_find_removed(n: int, pairs: Iterable[Tuple[int, int]]) -> Tuple[np.ndarray, np.ndarray]:
    """Connected components of candidate pairs; keep the first document (lowest index) of each.

    Returns (removed indices ascending, their representative = the kept first of the component).
    """
    parent = np.arange(n, dtype=np.int64).tolist()

    def find(x):
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            if ra < rb:
                parent[rb] = ra
            else:
                parent[ra] = rb
    roots = np.fromiter((find(i) for i in range(n)), np.int64, n)
    removed = np.flatnonzero(roots != np.arange(n))
    return removed, roots[removed]


def fmt_rate(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}"


def fmt_bytes(x: Optional[float]) -> str:
    if not x:
        return "-"
    return f"{x / 2**20:,.0f} MiB"


# --------------------------------------------------------------------------- all pairs above a threshold

def similar_pairs(texts: Sequence[str], threshold: float, n: int = NGRAM
                  ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, List[set]]:
    """Every pair (a < b) of ``texts`` with exact word-n-gram Jaccard >= ``threshold``, by the usual
    word definition (:func:`gram_set`), over the whole corpus, with no planted truth needed.

    An exact similarity join with the prefix filter: grams are ranked rarest first; two sets with
    J >= t must share one of the first |A| - ceil(t |A|) + 1 grams of each, so only documents
    sharing a prefix gram are compared (frequent boilerplate grams sort last and are never
    looked up). Returns (a, b, J, gram id sets).
    """
    import math
    from collections import Counter

    ids: Dict[tuple, int] = {}
    sets = []
    for text in texts:
        sets.append({ids.setdefault(g, len(ids)) for g in gram_set(text, n)})
    freq = Counter()
    for s in sets:
        freq.update(s)
    index: Dict[int, List[int]] = {}
    a_list, b_list, j_list = [], [], []
    sizes = [len(s) for s in sets]
    order = sorted(range(len(sets)), key=lambda d: (sizes[d], d))  # shorter first: a probe meets only shorter or equal
    for d in order:
        s = sets[d]
        if not s:
            continue
        ranked = sorted(s, key=lambda g: (freq[g], g))
        prefix = ranked[:len(s) - math.ceil(threshold * len(s) - 1e-9) + 1]
        seen = set()
        for g in prefix:
            for other in index.get(g, ()):
                if other in seen:
                    continue
                seen.add(other)
                if sizes[other] < threshold * len(s) - 1e-9:
                    continue
                j = jaccard_sets(s, sets[other])
                if j >= threshold:
                    a_list.append(min(d, other))
                    b_list.append(max(d, other))
                    j_list.append(j)
        for g in prefix:
            index.setdefault(g, []).append(d)
    return (np.asarray(a_list, np.int64), np.asarray(b_list, np.int64), np.asarray(j_list, np.float64), sets)


def summarise_runs(corpus, runs: dict, keys, out=None) -> dict:
    """A per-tree A/B script's result: its runs (tree -> list of dicts) and, per tree, the least
    of each of ``keys``; printed, and written to ``out`` when given."""
    result = {"corpus": corpus, "runs": runs,
              "min": {t: {k: min(r[k] for r in rs) for k in keys} for t, rs in runs.items()}}
    print(json.dumps(result["min"], indent=1))
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
    return result


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (a file that vanishes while it walks: not counted)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total
