"""Issue 28: one large JSONL file read whole (one read task) and cut into byte ranges (a task
each, neardup.io.splits), under the local and the Ray engine: the wall time of each run (a whole
``neardup dedup`` process), the most ranges being read at once (temporary block files present
together in the work dir's read/), and whether the outputs are the same bytes (stats.json apart
from its seconds).

    python bench/split_read.py bench/data/synth_1000000_s0.jsonl --out /tmp/split_bench

The whole-file runs set NEARDUP_SPLIT_BYTES above the file's size; the split runs use the
default range (64 MiB) unless --split-bytes says otherwise. The output folders are removed at the
end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path


def outputs(folder: Path) -> dict:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and ".neardup" not in p.name:
            rel = str(p.relative_to(folder))
            if rel == "stats.json":
                d = json.loads(p.read_text())
                d.pop("seconds")
                out[rel] = d
            else:
                out[rel] = p.read_bytes()
    return out


def watch(read_dir: Path, stop: threading.Event, seen: dict) -> None:
    """The most temporary block Arrow files present at once in ``read_dir``."""
    while not stop.is_set():
        try:
            names = [n for n in os.listdir(read_dir) if n.startswith(".block-") and ".arrow." in n]
        except OSError:
            names = []
        seen["max"] = max(seen["max"], len(names))
        time.sleep(0.05)


def one_run(path: str, out: Path, engine: str, split: int) -> dict:
    target, work = out / f"{engine}-{split}", out / f"work-{engine}-{split}"
    for p in (target, work):
        shutil.rmtree(p, ignore_errors=True)
    env = dict(os.environ, NEARDUP_SPLIT_BYTES=str(split))
    seen = {"max": 0}
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(work / "read", stop, seen), daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    ran = subprocess.run([sys.executable, "-m", "neardup", "dedup", path, "-o", str(target), "--engine", engine,
                          "--work-dir", str(work)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    stop.set()
    watcher.join()
    if ran.returncode != 0:
        raise SystemExit(f"{engine} split={split}: exit {ran.returncode}: {ran.stderr[-2000:]}")
    stats = json.loads((target / "stats.json").read_text())
    return {"engine": engine, "split_bytes": split, "wall_s": round(wall, 1), "most_ranges_at_once": seen["max"],
            "read_s": stats["seconds"].get("read"), "folder": target}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("--out", default="/tmp/split_bench")
    ap.add_argument("--split-bytes", type=int, default=64 << 20)
    ap.add_argument("--engines", default="local,ray")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    size = os.path.getsize(args.input)
    print(f"{args.input}: {size / 1e9:.2f} GB; ranges of {args.split_bytes >> 20} MiB: "
          f"{-(-size // args.split_bytes)}", flush=True)
    rows = []
    for engine in args.engines.split(","):
        for split in (size + 1, args.split_bytes):
            r = one_run(args.input, out, engine, split)
            rows.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "folder"}), flush=True)
    reference = outputs(rows[0]["folder"])
    for r in rows[1:]:
        other = outputs(r["folder"])
        differ = sorted(set(reference) ^ set(other)) + [k for k in reference if k in other and reference[k] != other[k]]
        print(f"{r['engine']} split={r['split_bytes']}: "
              f"{'same bytes as ' + rows[0]['engine'] + ' whole' if not differ else 'DIFFERS: ' + str(differ)}")
    if not args.keep:
        for p in out.iterdir():
            shutil.rmtree(p, ignore_errors=True)


if __name__ == "__main__":
    main()
