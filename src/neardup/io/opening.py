"""Opening an input file for reading. A local file is checked first (:func:`check_local_file`:
a folder, a named pipe or a device would block or never end); a file that cannot be read (no
permission, an I/O error, the store) is an error whatever ``on_error`` says
(:func:`cannot_read`), since skipping it would give a result without the whole input."""

from __future__ import annotations

import os
import stat

from ..errors import InputError
from .batch import ReadContext, cannot_read, one_line  # cannot_read: here for its callers
from .sources import Source
from .storage import fs as _fs


def raise_if_environment(ctx: ReadContext, e: BaseException) -> None:
    """Raise :func:`cannot_read` for an error of the operating system (it has an errno); other
    errors of a reader are the file's content, reported as such."""
    if isinstance(e, OSError) and e.errno is not None:
        raise cannot_read(ctx.src, e) from None


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def check_local_file(src: Source) -> None:
    """An InputError naming ``src`` when it is a local path that cannot be opened for reading or
    is not a regular file (a folder, a named pipe or a device, which would block or never end).
    The check opens without blocking (a named pipe with no writer does not wait). Nothing is
    checked for a URL or an in-memory table."""
    if src.format == "table" or _fs.os_path(src.path) is None:
        return
    fd, _ = open_regular(src)
    os.close(fd)


def open_regular(src: Source):
    """``(fd, size)`` of the local file ``src``, opened without blocking and checked to be a
    regular file; an InputError naming it otherwise (the descriptor then closed)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(_fs.local_path(src.path), flags)
    except OSError as e:
        raise cannot_read(src, e) from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise cannot_read(src, e) from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        raise InputError(_fs.redact(f"{src.name}: not a regular file ({kind})"))
    return fd, st.st_size
