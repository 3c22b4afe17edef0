"""Byte ranges of one file appended to another by the operating system, many in one call that
does not hold Python's lock (:func:`copy_file_ranges`).

A loop of ``os.copy_file_range`` calls in Python takes the interpreter's lock back after every
range: beside a thread that holds it (the kept/ writer finding the next block's lines) each
range waited for it, and the copy of the 2 GB of kept lines of a 1M-document run (92,000
ranges) took 1.4 s of wall time for 1.2 s of CPU time, where a copy alone took 0.8 s.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
from numba import types

from .compile import kernel
from .folders import _close, _openat, folder_state, in_folder, release

__all__ = ["available", "copy_file_ranges", "copy_files", "files_available", "fill_ranges", "kept_line_ranges",
           "write_all", "rw_available"]

# ssize_t copy_file_range(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
# unsigned int flags) of the C library, the pointers passed as addresses
_copy_file_range = types.ExternalFunction("copy_file_range", types.int64(
    types.int32, types.intp, types.int32, types.intp, types.uint64, types.uint32))


@kernel(nogil=True)
def _copy_ranges_kernel(fd_in, fd_out, starts, ends, offset):
    """Ranges [starts[i], ends[i]) of ``fd_in`` appended to ``fd_out`` at its position, in order;
    (the ranges done, the bytes of the next one done): a call that fails (-1) or reaches the end
    of the input (0) stops the loop there."""
    for i in range(starts.shape[0]):
        offset[0] = starts[i]
        while offset[0] < ends[i]:
            n = _copy_file_range(np.int32(fd_in), offset.ctypes.data, np.int32(fd_out), 0,
                                 np.uint64(ends[i] - offset[0]), np.uint32(0))
            if n <= 0:
                return i, offset[0] - starts[i]
    return starts.shape[0], 0


# ssize_t pread(int fd, void *buf, size_t count, off_t offset) and ssize_t write(int fd, const void
# *buf, size_t count) of the C library, the buffer passed as its address
_pread = types.ExternalFunction("pread", types.int64(types.int32, types.intp, types.uint64, types.int64))
_write = types.ExternalFunction("write", types.int64(types.int32, types.intp, types.uint64))


@kernel(nogil=True)
def fill_ranges(fd_in, buf, starts, ends, state):
    """The bytes of the ranges [starts[i], ends[i]) of ``fd_in``, in order, read (``pread``) into
    ``buf`` one after another until it is full or the ranges end, from where ``state`` says the
    last call stopped (``state[0]`` the range, ``state[1]`` the bytes of it done), which it moves
    on. Returns the bytes put in ``buf`` (0: nothing was left); a read that fails (-1) or finds
    the end of the input (0) stops it there and sets ``state[2]`` to 1, the bytes before it
    returned, for the caller to go on from ``state`` its own way (and learn why)."""
    i = state[0]
    done = state[1]
    n = 0
    cap = buf.shape[0]
    while i < starts.shape[0] and n < cap:
        at = starts[i] + done
        k = _pread(np.int32(fd_in), buf[n:].ctypes.data, np.uint64(min(ends[i] - at, cap - n)), at)
        if k <= 0:
            state[2] = 1
            break
        n += k
        done += k
        if starts[i] + done >= ends[i]:
            i += 1
            done = 0
    state[0] = i
    state[1] = done
    return n


@kernel(nogil=True)
def write_all(fd_out, buf, n, piece):
    """``buf[:n]`` written (``write``: at the position of ``fd_out``) in calls of at most ``piece``
    bytes; returns the bytes written, short of ``n`` where a call failed or wrote nothing."""
    p = 0
    while p < n:
        k = _write(np.int32(fd_out), buf[p:].ctypes.data, np.uint64(min(piece, n - p)))
        if k <= 0:
            return p
        p += k
    return p


@kernel(nogil=True)
def kept_line_ranges(rows, bounds, keep, size, gapless, starts, ends):
    """The byte ranges of the kept rows ``keep`` (sorted) of a file of ``size`` bytes whose
    documents are ``rows`` (sorted) with their lines' ``bounds`` ((start, end) each, end the
    newline's place): each line with its newline (the file's end at most), a line that starts
    where the one before ends joined to it, into ``starts`` / ``ends`` (as long as ``keep`` at
    least). A kept row's line is at its place from ``rows[0]`` where ``gapless`` (rows that go on
    by one), else found by a binary search. Returns the ranges' count."""
    n = 0
    for j in range(keep.shape[0]):
        i = keep[j] - rows[0] if gapless else np.searchsorted(rows, keep[j])
        a = bounds[i, 0]
        e = min(bounds[i, 1] + 1, size)
        if n > 0 and ends[n - 1] == a:
            ends[n - 1] = e
        else:
            starts[n] = a
            ends[n] = e
            n += 1
    return n


def rw_available() -> bool:
    """Whether :func:`fill_ranges` and :func:`write_all` can run here: ``pread`` and ``write``
    in the C library."""
    import ctypes
    try:
        libc = ctypes.CDLL(None)
        return hasattr(libc, "pread") and hasattr(libc, "write")
    except OSError:
        return False


# ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count) of the C library
_sendfile = types.ExternalFunction("sendfile", types.int64(types.int32, types.int32, types.intp, types.uint64))

_SENDFILE_BYTES = 1 << 20


@kernel(nogil=True)
def _copy_files_kernel(names, src_at, dst_at, sizes, flags_in, flags_out, mode, copied, folders):
    """Files copied whole, one after another: file i from the NUL-terminated path at
    ``names[src_at[i]:]`` to the one at ``names[dst_at[i]:]`` (created or truncated), each opened
    by its name in its folder (:func:`neardup.kernels.folders.in_folder`: ``folders[0]`` the
    state of the sources' folder, ``folders[1]`` the destinations', both closed at the end), by
    ``sendfile`` until it copies nothing (the end); where its size is known (``sizes[i]`` >= 0,
    as the walk found it), the first call asks for one byte more than that size, and one that
    copies just its size (less than asked: the end of the file was met) is the only one (a
    second call per file only found the end: 90,000 kept files, 90,000 calls); one that copies
    more (the file grew) or less (it shrank, or the write stopped short) goes on until a call
    copies nothing or fails, as without a size. Returns the files copied whole, and adds
    their bytes to ``copied[0]``; a call that fails (-1: the path, the copy, a full disk) stops
    the loop at that file, its destination maybe made, for the caller to copy it again and learn
    why (its bytes not counted)."""
    done = _copy_in_folders(names, src_at, dst_at, sizes, flags_in, flags_out, mode, copied, folders)
    release(folders[0])
    release(folders[1])
    return done


@kernel(nogil=True)
def _copy_in_folders(names, src_at, dst_at, sizes, flags_in, flags_out, mode, copied, folders):
    offset = np.zeros(1, np.int64)
    for i in range(src_at.shape[0]):
        folder, name = in_folder(names, src_at[i], folders[0])
        fd_in = _openat(folder, names[name:].ctypes.data, np.int32(flags_in), np.uint32(0))
        if fd_in < 0:
            return i
        folder, name = in_folder(names, dst_at[i], folders[1])
        fd_out = _openat(folder, names[name:].ctypes.data, np.int32(flags_out), np.uint32(mode))
        if fd_out < 0:
            _close(fd_in)
            return i
        offset[0] = 0
        ok = True
        size = sizes[i]
        while True:
            n = _sendfile(fd_out, fd_in, offset.ctypes.data, np.uint64(size + 1 if size >= 0 else _SENDFILE_BYTES))
            if n < 0:
                ok = False
            if n <= 0 or n == size:
                break
            size = -1
        if _close(fd_out) != 0:
            ok = False
        _close(fd_in)
        if not ok:
            return i
        copied[0] += offset[0]  # sendfile moved it past what it copied
    return src_at.shape[0]


def files_available() -> bool:
    """Whether :func:`copy_files` can run here: Linux (``sendfile`` between files) with ``open``
    and ``sendfile`` in the C library."""
    import ctypes
    import sys
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        return all(hasattr(libc, name) for name in ("open", "openat", "close", "sendfile"))
    except OSError:
        return False


def copy_files(names: np.ndarray, src_at: np.ndarray, dst_at: np.ndarray, flags_in: int, flags_out: int,
               mode: int = 0o666, sizes: Optional[np.ndarray] = None) -> Tuple[int, int]:
    """Whole files copied by the kernel of the operating system in one compiled loop that does
    not hold Python's lock (see :func:`_copy_files_kernel`): a loop of ``os.open``,
    ``os.sendfile`` and ``os.close`` in Python threads gave the lock up and took it back five
    times a file, and the threads copying 90,000 small files waited for it more than they
    copied. Returns how many files were copied whole, in order (short of all of them at the
    first that failed, for the caller to copy again and learn why), and their bytes. ``sizes``:
    each file's size as the walk found it, -1 where not known (none: all unknown)."""
    copied = np.zeros(1, np.int64)
    sizes = np.full(len(src_at), -1, np.int64) if sizes is None else np.ascontiguousarray(sizes, np.int64)
    done = _copy_files_kernel(names, np.ascontiguousarray(src_at, np.int64), np.ascontiguousarray(dst_at, np.int64), sizes,
                              int(flags_in), int(flags_out), int(mode), copied,
                              np.stack([folder_state(), folder_state()]))
    return int(done), int(copied[0])


def available() -> bool:
    """Whether the C library this process runs with has ``copy_file_range`` (glibc 2.27, musl
    1.1.24 and later): a kernel that calls a function the linker cannot find stops the process."""
    import ctypes
    try:
        return hasattr(ctypes.CDLL(None), "copy_file_range")
    except OSError:
        return False


def copy_file_ranges(fd_in: int, fd_out: int, starts: np.ndarray, ends: np.ndarray):
    """``copy_file_range`` of each range [starts[i], ends[i]) of ``fd_in``, appended to ``fd_out``
    in order (the input's file position untouched), all in one compiled loop without Python's
    lock. Returns (ranges copied whole, bytes of the next one copied): short of all of them where
    a call failed or the input ended, for the caller to go on from there (and learn why)."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    done, part = _copy_ranges_kernel(int(fd_in), int(fd_out), starts, ends, np.zeros(1, np.int64))
    return int(done), int(part)
