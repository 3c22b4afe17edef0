"""Peak memory of the driver of ``neardup dedup --engine ray`` against the documents (and the
member rows: one per document of a cluster of two or more) of the corpus.

    .venv/bin/python bench/driver_memory.py                        # 1M and 3M documents (the default)
    .venv/bin/python bench/driver_memory.py --sizes 100k,300k      # a smoke run

Issue 28: the driver must not hold anything per document; the member rows are sorted and written
by Ray's tasks (docs/scaling.md, "The driver"), so the driver's peak should stay flat when the
corpus triples (the target: < 15 % growth from 1M to 3M). Needs a quiet machine: other work on it
moves the numbers.

The corpus of each size is :func:`neardup.testing.synth.generate_corpus` (``--dup-fraction`` of
near-duplicates, ``--doc-words`` a document, seed 0), written once under bench/data/ as
``--files`` JSONL files. Each size is one ``python -c WRAPPER neardup dedup DIR --engine ray``
subprocess (a local Ray instance of ``--workers`` CPUs, started by the run, as a user without a
cluster gets); the wrapper runs the CLI in its own process and writes, at exit, the driver's
VmHWM (the kernel's high-water mark of this process alone: Ray's raylet, object store and workers
are other processes and are not counted; VmHWM is reset by exec, unlike ru_maxrss). The bench
also polls the driver's RSS with psutil (``driver_polled_peak_bytes``, a cross-check). An untimed
run at the smallest size compiles the kernels first. Reported per size: documents, members,
removed, clusters (stats.json), the driver's peak, and at the end the growth of the peak between
the smallest and the largest size. Writes bench/results/driver_memory.json (``--output``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA_DIR, RESULTS_DIR, run_header, write_json  # noqa: E402

WRAPPER = r"""
import json, sys
out, argv = sys.argv[1], sys.argv[2:]
def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None
rc = 1
trace = None
if argv[0] == "--trace":  # where the driver's peak comes from (slows the driver)
    argv = argv[1:]
    import threading, time, tracemalloc, traceback
    tracemalloc.start(8)
    main_thread = threading.main_thread()
    trace = {"peak_rss": 0}
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    def rollup():
        with open("/proc/self/smaps_rollup") as f:
            return {l.split(":")[0]: int(l.split()[1]) * 1024 for l in f if l.split()[-1] == "kB"}
    def poll():
        while True:
            r = rss()
            if r > trace["peak_rss"] + (8 << 20):
                frame = sys._current_frames().get(main_thread.ident)
                stack = [f"{fs.filename.split('/src/')[-1]}:{fs.lineno} {fs.name}"
                         for fs in traceback.extract_stack(frame)[-12:]] if frame else []
                trace.update(peak_rss=r, traced=tracemalloc.get_traced_memory()[0], stack=stack,
                             smaps=rollup(), at=time.time())
                trace["top"] = [f"{st.traceback.format()[-1].strip()} {st.size >> 20} MiB" for st in
                                tracemalloc.take_snapshot().statistics("traceback")[:8]]
            time.sleep(0.1)
    threading.Thread(target=poll, daemon=True).start()
try:
    from neardup.cli import main
    rc = main(argv)
finally:
    with open(out, "w") as f:
        json.dump({"returncode": rc, "driver_vmhwm_bytes": hwm(), "trace": trace}, f)
sys.exit(rc)
"""


def count(text: str) -> int:
    units = {"k": 10 ** 3, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def corpus(n: int, args) -> Path:
    """The corpus of ``n`` documents as ``args.files`` JSONL files (made once)."""
    from neardup.testing.synth import generate_corpus, write_jsonl
    folder = DATA_DIR / f"driver_{n}_w{args.doc_words}_d{args.dup_fraction:g}_f{args.files}"
    done = folder.with_name(folder.name + ".done")  # beside the folder: inside, it would be an input
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    texts = generate_corpus(n, dup_fraction=args.dup_fraction, doc_words=args.doc_words, seed=0).texts
    step = -(-n // args.files)
    for i, a in enumerate(range(0, n, step)):
        write_jsonl(folder / f"part-{i:03d}.jsonl", texts[a:a + step], ids=list(range(a, min(n, a + step))))
    done.write_text("")
    return folder


def measure(folder: Path, args, env: dict) -> dict:
    """One ``neardup dedup --engine ray`` run: the driver's peak (VmHWM, and polled RSS)."""
    import psutil
    out = Path(tempfile.mkdtemp(prefix="driver-memory-"))
    fd, info = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [sys.executable, "-c", WRAPPER, info, *(["--trace"] if args.trace else []), "dedup", str(folder), "--output", str(out / "out"),
           "--engine", "ray", "--quiet"] + (["--workers", str(args.workers)] if args.workers else [])
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    polled = 0
    try:
        p = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                polled = max(polled, p.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.1)
    except psutil.Error:
        pass
    err = proc.stderr.read().decode(errors="replace")
    proc.wait()
    wall = time.perf_counter() - t0
    with open(info) as f:
        result = json.load(f)
    os.unlink(info)
    if proc.returncode:
        raise SystemExit(f"neardup failed ({proc.returncode}): {err[-2000:]}")
    stats = json.loads((out / "out" / "stats.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    counts = stats["counts"]
    return {"documents": counts["input"], "removed": counts["removed"], "clusters": counts["clusters"],
            "members": counts["removed"] + counts["clusters"], "wall_s": round(wall, 2),
            "driver_peak_bytes": result["driver_vmhwm_bytes"], "driver_polled_peak_bytes": polled,
            **({"trace": result["trace"]} if args.trace else {})}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1M,3M", help="documents of each run, smallest first (default 1M,3M)")
    p.add_argument("--doc-words", type=int, default=80)
    p.add_argument("--dup-fraction", type=float, default=0.4)
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--workers", type=int, default=None, help="the local Ray instance's CPUs (default: all)")
    p.add_argument("--pythonpath", default=str(Path(__file__).resolve().parents[1] / "src"),
                   help="the neardup to measure (default: this tree's src)")
    p.add_argument("--trace", action="store_true",
                   help="record where the driver was at its peak: its stack, tracemalloc's top sites, smaps_rollup")
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed run at the smallest size")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "driver_memory.json")
    args = p.parse_args(argv)
    sizes = [count(s) for s in args.sizes.split(",")]
    env = dict(os.environ, PYTHONPATH=args.pythonpath)
    sys.path.insert(0, args.pythonpath)
    folders = [corpus(n, args) for n in sizes]
    if not args.no_warmup:
        measure(folders[0], args, env)  # compiles the kernels (and warms the page cache)
    result = {**run_header(sys.argv), "pythonpath": args.pythonpath, "doc_words": args.doc_words,
              "dup_fraction": args.dup_fraction, "files": args.files, "workers": args.workers, "runs": []}
    for n, folder in zip(sizes, folders):
        r = measure(folder, args, env)
        result["runs"].append(r)
        print(f"{n:>10,} documents  {r['members']:>9,} members  driver peak {r['driver_peak_bytes'] / 2**20:8.1f} MiB"
              f"  (polled {r['driver_polled_peak_bytes'] / 2**20:.1f} MiB)  {r['wall_s']:.0f} s", flush=True)
    first, last = result["runs"][0], result["runs"][-1]
    result["driver_peak_growth"] = round(last["driver_peak_bytes"] / first["driver_peak_bytes"] - 1, 4)
    result["members_growth"] = round(last["members"] / max(1, first["members"]) - 1, 4)
    print(f"driver peak {result['driver_peak_growth']:+.1%} for {result['members_growth']:+.1%} members")
    write_json(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
