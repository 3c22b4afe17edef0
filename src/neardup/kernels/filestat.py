"""What ``os.stat`` tells of many files, in one compiled loop that does not hold Python's lock
(:func:`stat_files`): discovery runs it in a thread over a folder's 100,000 files while its own
thread makes their sources (a loop of ``os.stat`` calls there took 0.2 CPU-s on that thread alone,
the other core idle).
"""

from __future__ import annotations

import numpy as np

from .compile import kernel
from .fileread import _statx
from .folders import folder_state, in_folder, release

__all__ = ["stat_files", "stat_available"]

# struct statx (256 bytes, one layout on every architecture) read as 64-bit words: stx_mask (u32)
# in word 0, stx_mode (u16) at byte 28 (word 3), stx_ino word 4, stx_size word 5, stx_mtime's
# tv_sec word 14 and tv_nsec (u32) at byte 120 (word 15), stx_dev_major and stx_dev_minor (u32)
# at bytes 136 and 140 (word 17)
_STATX_TYPE, _STATX_MODE, _STATX_MTIME, _STATX_INO, _STATX_SIZE = 0x1, 0x2, 0x40, 0x100, 0x200
_WANTED = _STATX_TYPE | _STATX_MODE | _STATX_MTIME | _STATX_INO | _STATX_SIZE


@kernel(nogil=True)
def _stat_files_kernel(names, at, info, mode, size, mtime_ns, dev, ino, folder):
    """``statx`` of file i at the NUL-terminated path ``names[at[i]:]``, by its name in its
    folder (:func:`neardup.kernels.folders.in_folder`: ``folder`` its state, closed at the end),
    links followed (as ``os.stat``): its mode, size, modification time in ns, device (major << 32
    | minor) and inode. Returns the files done: all of them, or the first whose call failed or
    did not give every field."""
    done = _stat_in_folders(names, at, info, mode, size, mtime_ns, dev, ino, folder)
    release(folder)
    return done


@kernel(nogil=True)
def _stat_in_folders(names, at, info, mode, size, mtime_ns, dev, ino, folder):
    for i in range(at.shape[0]):
        where, name = in_folder(names, at[i], folder)
        if _statx(where, names[name:].ctypes.data, np.int32(0), np.uint32(_WANTED),
                  info.ctypes.data) != 0 or (info[0] & _WANTED) != _WANTED:
            return i
        mode[i] = (info[3] >> 32) & 0xFFFF
        ino[i] = info[4]
        size[i] = info[5]
        mtime_ns[i] = info[14] * 1_000_000_000 + (info[15] & 0xFFFFFFFF)
        dev[i] = info[17]
    return at.shape[0]


def stat_available() -> bool:
    """Whether :func:`stat_files` can run here: Linux on a little-endian machine (``statx``'s
    fields read as 64-bit words) with ``statx``, ``open`` and ``close`` in the C library."""
    import ctypes
    import sys
    if not sys.platform.startswith("linux") or sys.byteorder != "little":
        return False
    try:
        libc = ctypes.CDLL(None)
        return all(hasattr(libc, name) for name in ("statx", "open", "close"))
    except OSError:
        return False


def stat_files(names: np.ndarray, at: np.ndarray):
    """The mode, size, mtime_ns, device and inode of each file whose path starts at ``at[i]`` in
    ``names`` (NUL-terminated bytes), as int64 arrays; None where one of them could not be
    stat'ed (the caller asks ``os.stat``, which says why)."""
    n = at.shape[0]
    mode, size, mtime_ns, dev, ino = (np.zeros(n, np.int64) for _ in range(5))
    done = _stat_files_kernel(names, np.ascontiguousarray(at, np.int64), np.zeros(32, np.int64), mode, size,
                              mtime_ns, dev, ino, folder_state())
    return None if done < n else (mode, size, mtime_ns, dev, ino)
