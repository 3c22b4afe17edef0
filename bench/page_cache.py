"""What reading a file from storage costs the kernel, by how its pages are treated (issue 32: the
10M run's system time; ``neardup.io.page_cache``): each file given is read once per way, from
storage (its pages given back first with ``POSIX_FADV_DONTNEED``), the ways alternating:

- ``plain``: read() of 1 MB at a time, the pages left in the page cache (what a run did before);
- ``drop``: the same reads, the pages given back as the reader passes them, 2 MB at a time
  (``neardup.io.page_cache.DropBehind``: what a run does now with a file not cached);
- ``direct``: ``O_DIRECT`` reads (no page cache at all), for reference;
- ``cached``: read() of a file whose pages are all in the page cache (what a second run of a
  corpus that fits in memory reads).

Per way: wall, user and system CPU-seconds of this process a GB (``getrusage``), medians.

    .venv/bin/python bench/page_cache.py bench/data/scale_10m/part-0[0-3].jsonl.zst --rounds 2
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS_DIR, run_header, write_json  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from neardup.io.page_cache import DropBehind  # noqa: E402

CHUNK = 1 << 20


def _evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read(path: str, way: str) -> int:
    n = 0
    if way == "direct":
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT wants
        try:
            while True:
                got = os.readv(fd, [buf])
                n += got
                if got < CHUNK:
                    return n
        finally:
            os.close(fd)
    drop = DropBehind.of(path) if way == "drop" else None
    if way == "drop" and drop is None:
        raise SystemExit(f"{path}: no drop-behind here (cached already, or no mincore)")
    fd = os.open(path, os.O_RDONLY)
    buf = bytearray(CHUNK)
    try:
        while True:
            got = os.readv(fd, [buf])
            n += got
            if drop is not None:
                drop.advance(n)
            if not got:
                return n
    finally:
        os.close(fd)
        if drop is not None:
            drop.close()


def measure(path: str, way: str) -> dict:
    if way == "cached":
        _read(path, "plain")
    else:
        _evict(path)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    n = _read(path, way)
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    gb = n / 1e9
    return {"file": path, "way": way, "bytes": n, "wall_s_per_gb": (t1 - t0) / gb,
            "user_s_per_gb": (r1.ru_utime - r0.ru_utime) / gb, "sys_s_per_gb": (r1.ru_stime - r0.ru_stime) / gb,
            "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ways", default="plain,drop,direct,cached")
    ap.add_argument("--output", default=str(RESULTS_DIR / "page_cache.json"))
    args = ap.parse_args()
    ways = args.ways.split(",")
    runs = []
    for r in range(args.rounds):
        for f in args.files:
            for way in (ways if r % 2 == 0 else ways[::-1]):
                m = measure(f, way)
                runs.append(m)
                print(f"{way:7s} {Path(f).name}: {m['sys_s_per_gb']:.3f} sys-s/GB, {m['wall_s_per_gb']:.3f} wall-s/GB")
    summary = {}
    for way in ways:
        mine = [m for m in runs if m["way"] == way]
        summary[way] = {k: round(statistics.median(m[k] for m in mine), 4)
                        for k in ("wall_s_per_gb", "user_s_per_gb", "sys_s_per_gb")}
        print(f"{way:7s} median: {summary[way]}")
    for f in args.files:  # left as found by the cached way's last read: given back
        _evict(f)
    write_json(Path(args.output), {**run_header(sys.argv), "runs": runs, "summary": summary})


if __name__ == "__main__":
    main()
