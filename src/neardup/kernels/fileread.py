"""Small files read whole into one buffer, one after another, in one compiled loop that does not
hold Python's lock (:func:`read_files`).

The pool of threads that read a folder of 100,000 one-document files ran a loop of ``os.open``,
``os.fstat``, ``os.read`` and ``os.close`` in Python: each call gave the interpreter's lock up and
took it back, and the threads waited for it beside the one that gathers the files into batches.
"""

from __future__ import annotations

import numpy as np
from numba import types

from .compile import kernel
from .folders import _close, _openat, folder_state, in_folder, release

__all__ = ["read_files", "reading_available"]

# ssize_t read(int fd, void *buf, size_t count) and int statx(int dirfd, const char *path, int
# flags, unsigned int mask, struct statx *buf) of the C library (Linux), the pointers passed as
# addresses. struct statx has one layout on every architecture: stx_mask (u32) at byte 0,
# stx_mode (u16) at byte 28, stx_size (u64) at byte 40; 256 bytes in all.
_read = types.ExternalFunction("read", types.int64(types.int32, types.intp, types.uint64))
_statx = types.ExternalFunction("statx", types.int32(types.int32, types.intp, types.int32, types.uint32,
                                                     types.intp))
_AT_EMPTY_PATH = 0x1000  # statx of the descriptor itself (the path "")
_STATX_TYPE, _STATX_SIZE = 0x1, 0x200
_S_IFMT, _S_IFREG = 0o170000, 0o100000
_B = 66  # "B": the first byte of a bz2 stream's magic bytes ("BZh"), the only ASCII one


@kernel(nogil=True)
def _read_files_kernel(names, at, flags, out, ends, clean, info, empty, folder):
    """Files read whole, one after another, into ``out``: file i from the NUL-terminated path at
    ``names[at[i]:]``, opened with ``flags`` by its name in its folder
    (:func:`neardup.kernels.folders.in_folder`: ``folder`` its state, closed at the end), checked
    as :func:`neardup.io.opening.open_regular` does (a regular file: ``statx`` of the descriptor;
    ``info`` its 256 bytes, ``empty`` a NUL byte, the empty path), then read with one ``read``
    call of its size + 1 bytes where the bytes of the file before end: kept when the call reads
    its size (all of it: fewer than asked), ``ends[i]`` then where they end. A file not kept
    (``ends[i]`` where the file before's bytes end), for the caller to read: one that does not
    open, is not a regular file, is empty, does not fit in what is left of ``out``, or whose read
    gives other than its size. ``clean[i]``: the bytes kept are ASCII without a NUL byte and do
    not start with ``B`` (no compressed kind's magic bytes can start them). Returns the bytes kept."""
    pos = 0
    for i in range(at.shape[0]):
        ends[i] = pos
        where, name = in_folder(names, at[i], folder)
        fd = _openat(where, names[name:].ctypes.data, np.int32(flags), np.uint32(0))
        if fd < 0:
            continue
        if _statx(fd, empty.ctypes.data, np.int32(_AT_EMPTY_PATH), np.uint32(_STATX_TYPE | _STATX_SIZE),
                  info.ctypes.data) == 0 and (info[0] & (_STATX_TYPE | _STATX_SIZE)) == (_STATX_TYPE | _STATX_SIZE):
            mode = (info[3] >> 32) & 0xFFFF
            size = info[5]
            if (mode & _S_IFMT) == _S_IFREG and 0 < size and pos + size < out.shape[0]:
                n = _read(fd, out[pos:].ctypes.data, np.uint64(size + 1))
                if n == size:
                    ok = out[pos] != _B
                    for j in range(pos, pos + n):
                        if out[j] == 0 or out[j] >= 128:
                            ok = False
                            break
                    clean[i] = ok
                    pos += n
                    ends[i] = pos
        _close(fd)
    release(folder)
    return pos


def reading_available() -> bool:
    """Whether :func:`read_files` can run here: Linux on a little-endian machine (``statx``'s
    fields read as 64-bit words), with ``open``, ``statx``, ``read`` and ``close`` in the C
    library."""
    import ctypes
    import sys
    if not sys.platform.startswith("linux") or sys.byteorder != "little":
        return False
    try:
        libc = ctypes.CDLL(None)
        return all(hasattr(libc, name) for name in ("open", "openat", "statx", "read", "close"))
    except OSError:
        return False


def read_files(names: np.ndarray, at: np.ndarray, flags: int, capacity: int):
    """Files read whole, one after another, into one buffer of ``capacity`` bytes by one compiled
    loop without Python's lock (see :func:`_read_files_kernel`): ``(data, ends, clean)``, file i's
    bytes being ``data[ends[i - 1]:ends[i]]`` (from 0 for the first) where it was read whole,
    none where it was not (for the caller to read it)."""
    n = len(at)
    out = np.empty(capacity, np.uint8)
    ends = np.zeros(n, np.int64)
    clean = np.zeros(n, np.bool_)
    used = _read_files_kernel(names, np.ascontiguousarray(at, np.int64), int(flags), out, ends, clean,
                              np.zeros(32, np.int64), np.zeros(1, np.uint8), folder_state())
    return out[:used], ends, clean
