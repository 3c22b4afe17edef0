"""Bytes copied from one local file to another by the operating system's kernel, nothing passing
through this process: byte ranges (:class:`RangeCopier`: ``copy_file_range``, else ``sendfile``)
and whole files (:func:`copy_fd`: ``sendfile``), with plain reads and writes where the kernel
cannot."""

from __future__ import annotations

import errno
import os
from typing import List, Optional

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

    def copy(self, starts: List[int], ends: List[int]) -> None:
        cfr = getattr(os, "copy_file_range", None)
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
