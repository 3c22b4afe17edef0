"""What one kept text file costs the kernel (issue 19: a folder of 100,000 one-document files):
compiled loops over the same N files of the small-files corpus (``bench/small_files.py``),
each in one thread without Python's lock, timed by that thread's CPU seconds (user + sys, the
kernel's work included), the variants alternating, each round into fresh folders:

- ``create``: each destination made empty (``openat`` O_CREAT|O_TRUNC, ``close``), no data;
- ``open_read``: each source opened and read with one ``read`` of its size + 1, closed;
- ``open_statx_read``: the same with a ``statx`` of the descriptor first (as the read stage's
  loop, :mod:`neardup.kernels.fileread`, checks a regular file);
- ``sendfile``: the kept/ writer's copy (:func:`neardup.kernels.filecopy.copy_files`: source and
  destination opened, one ``sendfile`` of the size + 1, both closed);
- ``read_write``: the same copy by one ``read`` into a buffer and one ``write``.

    python bench/small_files_copy.py --dir /tmp/small/corpus --files 30000 --rounds 3

The corpus folder is made as bench/small_files.py makes it where it has none (``--docs``). The
files created are moved to the corpus folder's ``trash`` and deleted at the end, and the time of
the delete recorded as bench/small_files.py records its own (its next run waits 300 s: ext4's
``recently_deleted``). Do not run it in the 5 minutes before a timed run on the same disk.

Results: bench/results/small_files_copy.json (per variant: CPU seconds per round, microseconds a
file at the best round; the load average around each round).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from common import RESULTS_DIR, run_header, write_json
import small_files


def loops():
    """The compiled loops of the variants not in neardup itself (the folder state, ``openat``,
    ``read`` and ``close`` are those of :mod:`neardup.kernels.folders` and
    :mod:`neardup.kernels.fileread`), compiled here each run (not in neardup's kernel cache)."""
    from numba import njit, types

    from neardup.kernels.fileread import _read, _statx, _AT_EMPTY_PATH, _STATX_SIZE, _STATX_TYPE
    from neardup.kernels.folders import _close, _openat, in_folder, release

    _write = types.ExternalFunction("write", types.int64(types.int32, types.intp, types.uint64))

    @njit(nogil=True)
    def create(names, src_at, dst_at, sizes, flags_in, flags_out, folders, buf, info, empty):
        made = 0
        for i in range(dst_at.shape[0]):
            folder, name = in_folder(names, dst_at[i], folders[1])
            fd = _openat(folder, names[name:].ctypes.data, np.int32(flags_out), np.uint32(0o666))
            if fd >= 0:
                made += 1
                _close(fd)
        release(folders[0])
        release(folders[1])
        return made

    @njit(nogil=True)
    def open_read(names, src_at, dst_at, sizes, flags_in, flags_out, folders, buf, info, empty):
        total = 0
        for i in range(src_at.shape[0]):
            folder, name = in_folder(names, src_at[i], folders[0])
            fd = _openat(folder, names[name:].ctypes.data, np.int32(flags_in), np.uint32(0))
            if fd >= 0:
                total += _read(fd, buf.ctypes.data, np.uint64(sizes[i] + 1))
                _close(fd)
        release(folders[0])
        release(folders[1])
        return total

    @njit(nogil=True)
    def open_statx_read(names, src_at, dst_at, sizes, flags_in, flags_out, folders, buf, info, empty):
        total = 0
        for i in range(src_at.shape[0]):
            folder, name = in_folder(names, src_at[i], folders[0])
            fd = _openat(folder, names[name:].ctypes.data, np.int32(flags_in), np.uint32(0))
            if fd >= 0:
                if _statx(fd, empty.ctypes.data, np.int32(_AT_EMPTY_PATH), np.uint32(_STATX_TYPE | _STATX_SIZE),
                          info.ctypes.data) == 0:
                    total += _read(fd, buf.ctypes.data, np.uint64(info[5] + 1))
                _close(fd)
        release(folders[0])
        release(folders[1])
        return total

    @njit(nogil=True)
    def read_write(names, src_at, dst_at, sizes, flags_in, flags_out, folders, buf, info, empty):
        total = 0
        for i in range(src_at.shape[0]):
            folder, name = in_folder(names, src_at[i], folders[0])
            fd_in = _openat(folder, names[name:].ctypes.data, np.int32(flags_in), np.uint32(0))
            folder, name = in_folder(names, dst_at[i], folders[1])
            fd_out = _openat(folder, names[name:].ctypes.data, np.int32(flags_out), np.uint32(0o666))
            if fd_in >= 0 and fd_out >= 0:
                n = _read(fd_in, buf.ctypes.data, np.uint64(sizes[i] + 1))
                if n > 0:
                    total += _write(fd_out, buf.ctypes.data, np.uint64(n))
            if fd_out >= 0:
                _close(fd_out)
            if fd_in >= 0:
                _close(fd_in)
        release(folders[0])
        release(folders[1])
        return total

    return {"create": create, "open_read": open_read, "open_statx_read": open_statx_read, "read_write": read_write}


VARIANTS = ("create", "open_read", "open_statx_read", "sendfile", "read_write")
WRITES = {"create", "sendfile", "read_write"}  # the variants that make files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="the corpus folder (made as bench/small_files.py makes it if absent)")
    ap.add_argument("--docs", type=int, default=100_000, help="files of a corpus made here")
    ap.add_argument("--files", type=int, default=30_000, help="files each variant goes over, from the first")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    header = run_header(sys.argv)
    from neardup.io.formats.text import _OPEN_IN, _OPEN_OUT, _OPEN_READ, _path_blob
    from neardup.kernels import filecopy
    from neardup.kernels.folders import folder_state

    base = Path(a.dir)
    base.mkdir(parents=True, exist_ok=True)
    if not (base / "one.jsonl").exists():
        small_files.make(base, a.docs)
    waited = small_files.settle(base)
    corpus = base / "files"
    srcs = [str(corpus / d / f) for d in sorted(os.listdir(corpus)) for f in sorted(os.listdir(corpus / d))][:a.files]
    sizes = np.array([os.stat(p).st_size for p in srcs], np.int64)
    n = len(srcs)
    compiled = loops()
    buf, info, empty = np.empty(1 << 20, np.uint8), np.zeros(32, np.int64), np.zeros(1, np.uint8)
    trash = base / "trash"

    def once(kind: str, tag: str) -> float:
        out = trash / f"copy-{tag}-{kind}"
        dst = [str(out / Path(p).parent.name / Path(p).name) for p in srcs]
        for folder in sorted({os.path.dirname(p) for p in dst}):
            os.makedirs(folder)
        data, starts = _path_blob(srcs + dst)
        flags_in = _OPEN_READ if kind.startswith("open") else _OPEN_IN
        t0 = time.thread_time()
        if kind == "sendfile":
            done, _ = filecopy.copy_files(data, starts[:n], starts[n:], _OPEN_IN, _OPEN_OUT, 0o666, sizes)
            assert done == n
        else:
            compiled[kind](data, starts[:n], starts[n:], sizes, flags_in, _OPEN_OUT,
                           np.stack([folder_state(), folder_state()]), buf, info, empty)
        return time.thread_time() - t0

    for kind in VARIANTS:  # compiled, and the sources in the page cache
        once(kind, "warm")
    rounds = {kind: [] for kind in VARIANTS}
    loads = []
    for r in range(a.rounds):
        order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
        before = small_files.loadavg()
        for kind in order:
            rounds[kind].append(round(once(kind, str(r)), 4))
        loads.append([before, small_files.loadavg()])
    best = {kind: min(v) for kind, v in rounds.items()}
    result = {**header, "files": n, "corpus": str(base), "waited_for_freed_inodes_s": waited,
              "cpu_s": rounds, "best_cpu_s": best,
              "us_a_file": {kind: round(v / n * 1e6, 2) for kind, v in best.items()}, "load": loads,
              "note": "thread CPU seconds (user + sys) of one compiled loop over the same files, the variants "
                      "alternating; the files a round creates are new (fresh folders), none deleted until the end"}
    small_files.empty_trash(base, small_files.SETTLE_FROM_DOCS)  # the next timed run waits for the freed inodes
    write_json(RESULTS_DIR / "small_files_copy.json", result)
    print({"us_a_file": result["us_a_file"], "best_cpu_s": best})


if __name__ == "__main__":
    main()
