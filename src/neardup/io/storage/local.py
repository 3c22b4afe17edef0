"""Files on this machine: :class:`LocalFiles`, plain ``os`` calls (local files keep their speed
and need nothing installed).

A file written here appears under its name only once complete: a new temporary file in the same
folder (made with ``O_EXCL``, so never someone else's), renamed when the writer is done, removed
when it fails. A lock is an exclusive ``flock`` on a lock file that is never removed, so that two
writers always contend for the same file.
"""

from __future__ import annotations

import contextlib
import errno
import glob as _glob
import os
import shutil
from typing import IO, Iterator, List, Tuple

from ...errors import InputError, NeardupError
from .paths import local_path, redact


class LockedError(NeardupError):
    """Another process holds the lock (and the caller asked not to wait)."""


def new_temp(folder: str, name: str) -> Tuple[int, str]:
    """A new file (made by this call: O_EXCL, so never someone else's) with a temporary name in
    ``folder``: a dot, ``name``, the process id, random letters, ``.tmp``; (fd open for
    writing, path)."""
    import secrets

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{name[:180]}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise OSError(errno.EEXIST, "no free temporary name", folder)  # pragma: no cover


class _AtomicLocal:
    def __init__(self, path: str):
        self.path = local_path(path)

    def __enter__(self) -> IO[bytes]:
        parent = os.path.dirname(self.path) or "."
        os.makedirs(parent, exist_ok=True)
        fd, self.tmp = new_temp(parent, os.path.basename(self.path))
        self.f = os.fdopen(fd, "wb")
        return self.f

    def __exit__(self, exc_type, exc, tb) -> None:
        closing = None
        try:
            self.f.close()
        except OSError as e:  # the last buffered bytes did not fit: the file is not whole
            closing = e
        if exc_type is None and closing is None:
            os.replace(self.tmp, self.path)
            return
        with contextlib.suppress(OSError):
            os.remove(self.tmp)
        if isinstance(exc, OSError):
            naming(exc, self.path)  # raised on by the with statement, now with the path
        elif exc_type is None:
            raise naming(closing, self.path)


def naming(exc: OSError, path: str) -> OSError:
    """``exc`` with ``path`` as its file name when it has none: a write's OSError (a full disk)
    carries no path, and the one line printed for it must say where it was writing."""
    if exc.filename is None:
        exc.filename = path
    return exc


def _ancestors(path: str) -> List[str]:
    """``path`` and each folder above it, deepest first."""
    out = [path]
    while os.path.dirname(out[-1]) != out[-1]:
        out.append(os.path.dirname(out[-1]))
    return out


class LocalFiles:
    """The file operations of :mod:`.fs` on local paths (see there for what each does)."""

    is_remote = False

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def isdir(self, path: str) -> bool:
        return os.path.isdir(local_path(path))

    def isfile(self, path: str) -> bool:
        return os.path.isfile(local_path(path))

    def stat(self, path: str) -> Tuple[int, int]:
        try:
            st = os.stat(local_path(path))
        except OSError as e:
            raise InputError(f"cannot read {path} ({e.strerror or e})") from None
        return int(st.st_size), int(st.st_mtime_ns)

    def listdir(self, path: str) -> List[Tuple[str, bool]]:
        out = []
        with os.scandir(local_path(path)) as it:
            for e in it:
                try:
                    out.append((e.name, e.is_dir()))
                except OSError:
                    out.append((e.name, False))
        return sorted(out)

    def walk_files(self, path: str, skip=None) -> List[Tuple[Tuple[str, ...], str]]:
        found: List[Tuple[Tuple[str, ...], str]] = []
        for root, dirs, files in os.walk(local_path(path)):
            rel = os.path.relpath(root, local_path(path))
            parts = () if rel == "." else tuple(rel.split(os.sep))
            if skip is not None:
                dirs[:] = [d for d in dirs if not skip(d)]
            for f in files:
                if skip is None or not skip(f):
                    found.append((parts + (f,), os.path.join(root, f)))
        found.sort()
        return found

    def file_sizes(self, path: str) -> List[Tuple[Tuple[str, ...], int]]:
        out = []
        for parts, full in self.walk_files(path):
            try:
                out.append((parts, os.stat(full).st_size))
            except OSError:
                pass
        return out

    def glob_entries(self, pattern: str) -> List[Tuple[str, bool]]:
        return [(m, os.path.isdir(m)) for m in sorted(_glob.glob(local_path(pattern), recursive=True))]

    def makedirs(self, path: str) -> None:
        p = local_path(path)
        try:
            os.makedirs(p, exist_ok=True)
        except (FileExistsError, FileNotFoundError) as e:
            # a link to a missing place on the way (a disk not mounted), a file system that makes
            # no folders (/proc): the machine's problem, in one line, not a traceback
            link = next((a for a in _ancestors(p) if os.path.islink(a) and not os.path.exists(a)), None)
            why = f"{link} is a link to {os.readlink(link)}, which does not exist" if link else e.strerror
            raise NeardupError(f"{redact(path)}: cannot make this folder ({redact(why)})") from None

    def remove_tree(self, path: str) -> None:
        p = local_path(path)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.remove(p)

    def remove(self, path: str) -> None:
        try:
            os.remove(local_path(path))
        except FileNotFoundError:
            pass

    def move(self, source: str, target: str) -> None:
        os.replace(local_path(source), local_path(target))

    def open_input(self, path: str) -> IO[bytes]:
        return open(local_path(path), "rb")

    def atomic_write(self, path: str):
        return _AtomicLocal(path)

    def read_bytes(self, path: str) -> bytes:
        with self.open_input(path) as f:
            return f.read()

    @contextlib.contextmanager
    def durable_write(self, path: str) -> Iterator[IO[bytes]]:
        """A binary file written in place at ``path`` (created, or emptied), flushed and fsynced
        when the block ends without an exception, closed either way. Not atomic: for a file that
        is renamed once complete (a new index segment's, its manifest's temporary)."""
        f = open(local_path(path), "wb")
        try:
            yield f
            f.flush()
            os.fsync(f.fileno())
        except OSError as e:
            raise naming(e, local_path(path))
        finally:
            f.close()

    def sync_folder(self, path: str) -> None:
        """Makes the entries of the folder ``path`` durable (an fsync of the folder itself), after
        files were made, renamed or removed in it."""
        fd = os.open(local_path(path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_ranges(self, path: str, starts: List[int], ends: List[int]) -> List[bytes]:
        out = []
        with open(local_path(path), "rb") as f:
            for a, b in zip(starts, ends):
                f.seek(a)
                out.append(f.read(b - a))
        return out

    def check_reachable(self, path: str) -> None:
        """A local path: nothing to check."""

    @contextlib.contextmanager
    def lock(self, path: str, wait: bool, what: str) -> Iterator[None]:
        """An exclusive lock on the file ``path`` (made when missing, never removed), held for
        the block: waited for, or (``wait=False``) a :class:`LockedError` at once when another
        process holds it (``what`` says in the message what is busy)."""
        import fcntl

        fd = os.open(local_path(path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if wait or e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                raise LockedError(f"{redact(what)}: another neardup run is using this folder; wait for it to end, "
                                  f"or choose another folder") from None
            yield
        finally:
            os.close(fd)  # closing releases the lock; the file stays
