"""Bytes copied from one local file to another by the operating system's kernel: byte ranges
(:class:`RangeCopier`: ``copy_file_range``, else ``sendfile``; many megabytes of them read by one
thread and written by another, :meth:`RangeCopier.piped`, past the page cache where writing into
it is slow) and whole files (:func:`copy_fd`:
``sendfile``), with plain reads and writes where the kernel cannot."""

from __future__ import annotations

import errno
import functools
import os
import queue
import threading
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from .compiled import compiled_loop


# copy_file_range / sendfile failures that mean "not here" (another file system, an old kernel,
# a sandbox that forbids the call, a file type it does not handle): the next way is tried
_NO_COPY_FILE_RANGE = frozenset(getattr(errno, n) for n in (
    "EXDEV", "ENOSYS", "EINVAL", "EOPNOTSUPP", "ENOTSUP", "EBADF", "EPERM", "ETXTBSY", "EIO")
    if hasattr(errno, n))
_NO_SENDFILE = frozenset(getattr(errno, n) for n in (
    "EINVAL", "ENOSYS", "EOPNOTSUPP", "ENOTSUP", "EBADF", "EPERM", "ENOTSOCK", "EIO")
    if hasattr(errno, n))
_RW_BYTES = 1 << 20
_OS_COPY_FILE_RANGE = getattr(os, "copy_file_range", None)
# neardup.kernels.filecopy.copy_file_ranges, loaded once; None where it cannot be (a C library
# without copy_file_range): the Python loop does the copy (a bad descriptor copies nothing)
_compiled_loop = compiled_loop("filecopy", "copy_file_ranges", "available", -1, -1, [0], [1])
# neardup.kernels.filecopy.fill_ranges and write_all, each loaded once (None: not here)
_compiled_fill = compiled_loop("filecopy", "fill_ranges", "rw_available", -1, np.zeros(0, np.uint8),
                               np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(3, np.int64))
_compiled_write = compiled_loop("filecopy", "write_all", "rw_available", -1, np.zeros(0, np.uint8), 0, 1)
# ranges of this many bytes in all or more are copied by two threads (:meth:`RangeCopier.piped`)
PIPED_BYTES = 16 << 20
_PIPE_BUFFER = 4 << 20   # each of the two buffers the reading thread fills in turn
_WRITE_PIECE = 64 << 10  # a write call's bytes: what copy_file_range writes at a time (its pipe);
# writes of 1-8 MiB cost 3-5x the CPU of 64 KiB ones on this machine's ext4 (the page cache's
# large folios), 64 MiB ones the same
# A buffer whose write into the page cache took more CPU than this a MiB (~4x its usual 0.25 ms),
# twice in a row, sends the rest of the copy past the page cache (``O_DIRECT``): the new pages'
# cost is then not the copy's but the memory's (a virtual machine whose host gave back the
# guest's free memory backs each page again at its first write, ~10x the copy's own CPU)
_SLOW_WRITE_S_PER_MIB = 1e-3
_SLOW_WRITES = 2
# ... and back into the page cache, for good, after _SLOW_WRITES buffers in a row written past
# it more slowly (wall) a MiB than this times the last page-cache write (CPU): a slow disk
_DIRECT_SLOWER = 1.0
_DIRECT_ALIGN = 4096  # O_DIRECT's unit: file offsets, lengths and buffer addresses


# statfs f_type of the file systems on which :meth:`RangeCopier.piped` copies: local disks and
# memory, where ``copy_file_range`` of unaligned ranges is itself a copy through the page cache.
# Elsewhere (NFS 4.2 and SMB copy on the server; FUSE, network and unknown ones) the kernel's own
# call is kept: reading and writing the bytes here would send them over the network twice
PIPED_FILE_SYSTEMS = frozenset({
    0xEF53,      # ext2/3/4
    0x58465342,  # xfs
    0x9123683E,  # btrfs
    0x01021994,  # tmpfs
    0xF2F52010,  # f2fs
    0x2FC12FC1,  # zfs
    0x794C7630,  # overlayfs (a container's root)
})


@functools.lru_cache(maxsize=1)
def _libc():
    """The C library this process runs with (``ctypes``), loaded at the first call only; None
    where it cannot be loaded."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def file_system(fd: int) -> Optional[int]:
    """The ``f_type`` of the file system ``fd`` is on (``fstatfs``), None where it cannot be asked."""
    libc = _libc()
    if libc is None:
        return None
    try:
        import ctypes
        buf = ctypes.create_string_buffer(256)  # struct statfs (120 bytes on 64-bit Linux)
        if libc.fstatfs(ctypes.c_int(fd), buf) != 0:
            return None
        return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF
    except (OSError, AttributeError, ValueError):
        return None


def pipes_here(fd_in: int, fd_out: int) -> bool:
    """Whether both files are on file systems of PIPED_FILE_SYSTEMS (:meth:`RangeCopier.piped`)."""
    return file_system(fd_in) in PIPED_FILE_SYSTEMS and file_system(fd_out) in PIPED_FILE_SYSTEMS


class RangeCopier:
    """Appends byte ranges of one local file to another at the position of ``fd_out``: with
    ``copy_file_range`` (the kernel copies, nothing passes through this process), else
    ``sendfile``, else ``pread`` + ``write``. A way that fails with an error that means "not
    supported here" is not tried again; the range is copied the next way."""

    def __init__(self, fd_in: int, fd_out: int, name: str, way: Optional[str] = None):
        self.fd_in, self.fd_out, self.name = fd_in, fd_out, name
        if way is None:
            way = ("copy_file_range" if hasattr(os, "copy_file_range")
                   else "sendfile" if hasattr(os, "sendfile") and os.uname().sysname == "Linux" else "rw")
        self.way = way
        self._buffers: Optional[Tuple[np.ndarray, np.ndarray]] = None  # :meth:`piped`'s
        self._pipes: Optional[bool] = None  # :func:`pipes_here`, asked once

    def copy(self, starts: Sequence[int], ends: Sequence[int]) -> None:
        """The ranges [starts[i], ends[i]) appended in order (lists or int64 arrays)."""
        cfr = getattr(os, "copy_file_range", None)
        if self.way == "copy_file_range" and cfr is _OS_COPY_FILE_RANGE and len(starts) and \
                ends[-1] - starts[0] >= PIPED_BYTES:
            starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)  # (no copy of arrays)
            if self._pipes is None:
                self._pipes = pipes_here(self.fd_in, self.fd_out)
            if self._pipes and int((ends - starts).sum()) >= PIPED_BYTES:
                starts, ends = self.piped(starts, ends)
                if not len(starts):
                    return
        if self.way == "copy_file_range" and cfr is _OS_COPY_FILE_RANGE and len(starts):
            # the ranges in one compiled loop that does not hold Python's lock (a thread copying
            # beside one that holds it waited for it after every range); from where it stopped
            # (a failure, the end of the input) the loop below goes on, and learns why
            loop = _compiled_loop()
            if loop is not None:
                done, part = loop(self.fd_in, self.fd_out, starts, ends)
                if done == len(starts):
                    return
                starts, ends = list(starts[done:]), list(ends[done:])
                starts[0] += part
        starts, ends = [int(a) for a in starts], [int(b) for b in ends]  # Python's ints for the calls below
        fd_in, fd_out = self.fd_in, self.fd_out
        for a, b in zip(starts, ends):
            while a < b:
                n = 0
                if self.way == "copy_file_range":
                    try:
                        n = cfr(fd_in, fd_out, b - a, a)
                    except OSError as e:
                        if e.errno not in _NO_COPY_FILE_RANGE:
                            raise
                        self.way = "sendfile" if hasattr(os, "sendfile") else "rw"
                        continue
                    if n == 0:  # end of file before the range ends: let the others decide
                        self.way = "sendfile" if hasattr(os, "sendfile") else "rw"
                        continue
                elif self.way == "sendfile":
                    try:
                        n = os.sendfile(fd_out, fd_in, a, b - a)
                    except OSError as e:
                        if e.errno not in _NO_SENDFILE:
                            raise
                        self.way = "rw"
                        continue
                    if n == 0:
                        self.way = "rw"
                        continue
                else:
                    n = self._read_write(a, b)
                a += n

    def piped(self, starts: Sequence[int], ends: Sequence[int]) -> Tuple[List[int], List[int]]:
        """The ranges read (``pread``) into two buffers in turn by this thread and written from
        them (``write``) by another, both in compiled loops without Python's lock: the copy's two
        halves on two cores (``copy_file_range`` does both in one thread: the 2 GB of kept lines
        of a 1M-document run 1.0 CPU-s in one thread, where the writing thread of this takes
        ~0.6 and the reading one ~0.35). The same bytes at the same place: the writer writes
        the buffers in the order they were filled. Returns the ranges left (none when all were
        copied): from a read that failed or found the input's end, for :meth:`copy`'s loops to go
        on with and learn why; where the loops cannot run here, all of them. A write that
        failed is made again here, by ``os.write``, which raises its error. After
        _SLOW_WRITES buffers in a row whose writes into the page cache took over
        _SLOW_WRITE_S_PER_MIB of CPU a MiB, the rest is written past it (:func:`_write_direct`;
        the reader puts each buffer's bytes at their place in a block), the output's position
        moved after them at the end; an error of those writes is raised here. Where the disk is
        the slower way (_SLOW_WRITES buffers in a row whose writes past the page cache took more
        time a MiB than the last write into it had taken CPU), the rest goes through the page
        cache again, for good."""
        fill, write = _compiled_fill(), _compiled_write()
        if fill is None or write is None:
            return list(starts), list(ends)
        s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
        state = np.zeros(3, np.int64)  # the range, its bytes done, whether a read stopped short
        if self._buffers is None or len(self._buffers[0]) != _PIPE_BUFFER:  # kept for the next call
            self._buffers = (_aligned(_PIPE_BUFFER), _aligned(_PIPE_BUFFER))
        buffers = self._buffers
        free: "queue.SimpleQueue[Optional[int]]" = queue.SimpleQueue()
        full: "queue.SimpleQueue[Optional[Tuple[int, int, int]]]" = queue.SimpleQueue()
        short: List[Tuple[int, int, int]] = []  # (buffer, from, to) the writer did not write
        # past the page cache: [the output's offset of the next byte written] once the writer
        # has gone that way (positioned writes from then on), its descriptor, its error
        direct: List[int] = []
        out_direct: List[Optional[int]] = [None]
        failed: List[BaseException] = []
        base = os.lseek(self.fd_out, 0, os.SEEK_CUR) if _direct_possible(self.fd_out) else None

        def writer() -> None:
            slow = 0  # buffers in a row that were slow, in the way they were written
            may_switch = base is not None  # each way is tried once: back to the page cache for good
            paged = 0.0  # CPU-seconds a MiB of the last page-cache write, when the copy switched
            while (item := full.get()) is not None:
                k, a, n = item
                mib = (n - a) / (1 << 20)
                if direct:
                    w = time.perf_counter()
                    try:
                        direct[0] = _write_direct(self.fd_out, out_direct, buffers[k][a:n], direct[0])
                    except BaseException as err:  # raised by the reading thread
                        failed.append(err)
                        free.put(None)
                        return
                    # a disk slower than the page cache's slow writes: back to the page cache
                    slow = slow + 1 if time.perf_counter() - w > mib * paged * _DIRECT_SLOWER else 0
                    if slow >= _SLOW_WRITES:
                        os.lseek(self.fd_out, direct.pop(), os.SEEK_SET)
                        if out_direct[0] is not None:
                            os.close(out_direct[0])
                            out_direct[0] = None
                    free.put(k)
                    continue
                c = time.thread_time()
                done = write(self.fd_out, buffers[k][a:], n - a, _WRITE_PIECE)
                if done < n - a:
                    short.append((k, a + done, n))
                    free.put(None)  # the reader stops
                    return
                cost = time.thread_time() - c
                slow = slow + 1 if cost > mib * _SLOW_WRITE_S_PER_MIB else 0
                if slow >= _SLOW_WRITES and may_switch:
                    may_switch, slow = False, 0
                    out_direct[0] = _open_direct(self.fd_out)
                    if out_direct[0] is not None:
                        paged = cost / mib
                        direct.append(os.lseek(self.fd_out, 0, os.SEEK_CUR))
                free.put(k)

        thread = threading.Thread(target=writer, name="neardup-range-writer", daemon=True)
        thread.start()
        free.put(0)
        free.put(1)
        at = base or 0  # the output's offset of the next byte read
        try:
            while (k := free.get()) is not None:
                pad = at % _DIRECT_ALIGN if direct else 0  # its place in the buffer as in a block
                n = fill(self.fd_in, buffers[k][pad:], s, e, state)
                if n > 0:
                    full.put((k, pad, pad + n))
                    at += n
                if n <= 0 or state[2]:
                    break
        finally:
            full.put(None)
            thread.join()
            if out_direct[0] is not None:
                os.close(out_direct[0])
        if direct:
            os.lseek(self.fd_out, direct[0], os.SEEK_SET)
        if failed:
            raise failed[0]
        while short and (item := full.get()) is not None:  # behind a write that failed, in order
            short.append(item)
        for k, a, n in short:
            view = memoryview(buffers[k])[a:n]
            while view:
                view = view[os.write(self.fd_out, view):]
        i, done = int(state[0]), int(state[1])
        if i >= len(s):
            return [], []
        rest_starts, rest_ends = s[i:].tolist(), e[i:].tolist()
        rest_starts[0] += done
        return rest_starts, rest_ends

    def _read_write(self, a: int, b: int) -> int:
        try:
            data = os.pread(self.fd_in, min(b - a, _RW_BYTES), a)
        except OSError as e:
            raise InputError(f"{self.name}: cannot read file ({e.strerror or e})") from None
        if not data:
            raise InputError(f"{self.name}: the file got shorter while it was being written")
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd_out, view):]
        return len(data)


def _aligned(size: int) -> np.ndarray:
    """``size`` bytes whose first is at an address of a multiple of _DIRECT_ALIGN."""
    raw = np.empty(size + _DIRECT_ALIGN, np.uint8)
    at = -raw.ctypes.data % _DIRECT_ALIGN
    return raw[at:at + size]


def _direct_possible(fd: int) -> bool:
    """Whether the output ``fd`` may be written past the page cache: Linux's ``O_DIRECT``, and
    not opened to append (positioned writes there would append)."""
    if not hasattr(os, "O_DIRECT") or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        import fcntl
        return not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND
    except (ImportError, OSError):
        return False


def _open_direct(fd: int) -> Optional[int]:
    """A second descriptor of the file of ``fd``, for writing past the page cache (``O_DIRECT``);
    None where the file system does not allow it."""
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC)
    except OSError:
        return None


def _pwrite_all(fd: int, data, at: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, at)
        if n == 0:
            raise OSError(errno.EIO, "write wrote nothing")
        view, at = view[n:], at + n


def _write_direct(fd: int, out_direct: List[Optional[int]], data: np.ndarray, at: int) -> int:
    """``data`` written at ``at`` in the file of ``fd``: its whole blocks of _DIRECT_ALIGN bytes
    (where ``data`` sits in memory as in the file) by ``out_direct[0]`` past the page cache, the
    bytes before and after them through ``fd``. A file system that refuses a write past the page
    cache (EINVAL) gets it through ``fd``, and the rest too (``out_direct[0]`` closed, None).
    Returns the offset after ``data``."""
    n = len(data)
    head = min(-at % _DIRECT_ALIGN, n)
    body = (n - head) // _DIRECT_ALIGN * _DIRECT_ALIGN
    if out_direct[0] is None or (data.ctypes.data + head) % _DIRECT_ALIGN:
        head, body = n, 0
    if head:
        _pwrite_all(fd, data[:head], at)
    if body:
        try:
            _pwrite_all(out_direct[0], data[head:head + body], at + head)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            os.close(out_direct[0])
            out_direct[0] = None
            _pwrite_all(fd, data[head:head + body], at + head)
    if head + body < n:
        _pwrite_all(fd, data[head + body:], at + head + body)
    return at + n


class SourceError(Exception):
    """The file copied from could not be read (:func:`copy_fd`); ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def copy_fd(fd_in: int, fd_out: int) -> int:
    """The whole of ``fd_in`` appended to ``fd_out``: ``sendfile`` (in the kernel), else reads
    and writes; a read error is a :class:`SourceError`. Returns the bytes copied. A call asks
    for one byte more than is left of the size ``fstat`` gave: when it copies less, but all of
    that size, the end of the file is met (a small file: one call, not a second one to be told
    so); a shorter copy (a full disk) goes on, and its next call says why."""
    size = os.fstat(fd_in).st_size
    copied = 0
    if hasattr(os, "sendfile"):
        try:
            while True:
                asked = max(size - copied + 1, 1 << 20)
                n = os.sendfile(fd_out, fd_in, copied, asked)
                if n == 0:
                    return copied
                copied += n
                if n < asked and copied >= size:
                    return copied
        except OSError as e:
            if e.errno not in _NO_SENDFILE:
                raise
    while True:
        try:
            data = os.pread(fd_in, 1 << 20, copied)
        except OSError as e:
            raise SourceError(e.strerror or str(e)) from None
        if not data:
            return copied
        view = memoryview(data)
        while view:
            view = view[os.write(fd_out, view):]
        copied += len(data)
