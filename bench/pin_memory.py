"""Keeps files in memory for timings: this kind of VM pages out file pages idle for ~60 s.

    .venv/bin/python bench/pin_memory.py bench/data/synth_100000_s0.jsonl bench/data/synth_1000000_s0.jsonl \
        .venv ~/.cache/neardup &

Maps each file (folders walked) read-only with ``MAP_LOCKED | MAP_POPULATE``, prints how many
files and MiB it holds, then sleeps until killed (its memory is released then). Why: on the
development VM a DAMON scheme (``kdamond.0``, ``/sys/kernel/mm/damon/admin``) pages out any region
not accessed for ~60 s, so "input in the page cache, second run" held only for inputs read less
than a minute before, and a run that read its input, the venv's libraries or numba's cache back
from storage was timed as neardup's. Round 52's quiet runs ran with the corpora, the venv, the
numba cache and the system Python held by this script (every run's ``disk_read_bytes`` under 1%
of its input). It uses no CPU while it sleeps; it needs the memory it holds (~4 GB for those).
Linux only; locking more than RLIMIT_MEMLOCK needs CAP_IPC_LOCK (root has it). Each file is one
mapping, and a process holds at most ``vm.max_map_count`` of them (65,530 by default): the 100k
one-document files of ``bench/small_files.py`` need it raised (``sysctl -w
vm.max_map_count=400000``, for the session), else the files past the limit are not held and each
says so.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys

PROT_READ, MAP_SHARED, MAP_POPULATE, MAP_LOCKED = 0x1, 0x01, 0x8000, 0x2000


def _max_maps() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 1 << 30


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths or paths[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if paths else 2
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    failed = ctypes.c_void_p(-1).value
    count = held = 0

    def pin(path: str) -> None:
        nonlocal count, held
        try:
            size = os.path.getsize(path)
            if size == 0 or not os.path.isfile(path):
                return
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            at = libc.mmap(None, size, PROT_READ, MAP_SHARED | MAP_POPULATE | MAP_LOCKED, fd, 0)
        finally:
            os.close(fd)  # the mapping keeps the file
        if at in (None, failed):
            err = ctypes.get_errno()
            hint = ""
            if err == errno.ENOMEM and count >= _max_maps() - 1000:  # a mapping a file: the process's limit
                hint = (f"; {count} files held already and a process maps at most {_max_maps()}: "
                        "raise vm.max_map_count (sysctl) for a folder of many small files")
            print(f"{path}: not held ({os.strerror(err)}{hint})", file=sys.stderr)
            return
        count += 1
        held += size

    for arg in paths:
        if os.path.isdir(arg):
            for root, _, files in os.walk(arg):
                for name in files:
                    pin(os.path.join(root, name))
        else:
            pin(arg)
    print(f"holding {count} files, {held / 2**20:.0f} MiB (kill this process to let go)", flush=True)
    signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
