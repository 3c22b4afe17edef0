"""Every folder neardup writes (work dir, output, staging), behind one seam.

A :class:`Folder` is a local directory or an object-store prefix; which one is decided once,
here, from the path, and nothing above this module asks again. The local side keeps its speed
(``os`` calls, renames); the remote side goes through :mod:`neardup.io.fs` (fsspec).

**Ownership.** neardup writes, replaces and deletes only what it can prove it owns. A folder it
made carries a marker, ``.neardup``, a small JSON object naming what the folder is (``kind``:
``work-dir``, ``output``) and its format version. :meth:`Folder.claim` accepts a folder that
does not exist, an empty one, or one whose marker names the same kind; anything else (a file, a
project folder, an output claimed as a work dir) is refused in one line and never emptied. The
lock file ``.neardup.lock`` is never deleted by neardup, so that two runs on one folder always
contend for the same lock (a lock file removed by a cleanup would let a waiting run and a
newcomer hold "the" lock at once).

**Reading.** :meth:`Folder.local_view` gives a local directory to read a folder from: the
folder itself when it is local, a temporary copy of the files asked for when it is remote (for a
reader that needs local files, such as the report's); errors raised while it is read name the
folder, never the copy.

**Publishing whole.** A run writes its result into a staging folder beside the old result and
:meth:`Folder.publish` moves it in: the old ``stats.json`` (the file whose presence says that a
result is complete) goes first, the new one comes last, so no folder ever looks complete and is
not, whatever kills the run in between.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from typing import Iterator, List, Optional, Sequence

from ..errors import ConfigError, InputError, NeardupError
from . import fs

MARKER = ".neardup"
LOCK = ".neardup.lock"
_KINDS = {"output": "a neardup output folder", "work-dir": "a neardup work dir"}
# what a folder may hold and still count as empty: its own lock file (kept on purpose)
_IGNORED_WHEN_EMPTY = (LOCK,)


class LockedError(NeardupError):
    """Another run holds the folder's lock."""


class Folder:
    """One folder, local or remote. ``path`` is absolute for a local folder, the URL (without a
    trailing ``/``) for a remote one. Use :func:`Folder.of` to make one."""

    def __init__(self, path: str, shown: Optional[str] = None):
        self.path = path
        self.shown = shown if shown is not None else path  # as the user typed it, for messages

    @staticmethod
    def of(path) -> "Folder":
        path = os.fspath(path)
        if fs.is_url(path):
            return RemoteFolder(str(path).rstrip("/"), str(path))
        return LocalFolder(os.path.abspath(fs.local_path(path)), str(path))

    # -- what every folder offers ------------------------------------------------------------

    is_remote = False

    def __str__(self) -> str:
        return fs.redact(self.shown)

    def join(self, *parts: str) -> str:
        return fs.join(self.path, *parts)

    def contains(self, other: "Folder") -> bool:
        """Whether ``other`` lies inside this folder (not this folder itself)."""
        sep = "/" if self.is_remote else os.sep
        return other.path.startswith(self.path.rstrip(sep) + sep)

    def child(self, *parts: str) -> "Folder":
        return type(self)(self.join(*parts))

    def exists(self, name: Optional[str] = None) -> bool:
        return fs.exists(self.join(name) if name else self.path)

    def is_file(self) -> bool:
        return fs.isfile(self.path)

    def names(self) -> List[str]:
        """The entries of the folder (files and subfolders), sorted; none when it is not there."""
        if not fs.isdir(self.path):
            return []
        return [name for name, _ in fs.listdir(self.path)]

    def read_json(self, name: str):
        """The JSON value of a file of the folder; None when it is missing or not JSON."""
        try:
            return json.loads(fs.read_bytes(self.join(name)))
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        except NeardupError:  # a store that cannot say (network, credentials): not there
            return None

    def write_json(self, name: str, value) -> None:
        """One file of the folder, written whole (a temporary name and a rename; one object put)."""
        fs.write_bytes(self.join(name), (json.dumps(value, indent=1, sort_keys=True) + "\n").encode())

    def makedirs(self) -> None:
        fs.makedirs(self.path)

    def remove(self, name: str) -> None:
        """One entry (file or folder) of this folder; nothing when it is not there."""
        fs.remove_tree(self.join(name))

    def move_in(self, source: str, name: str) -> None:
        """Moves the file or folder ``source`` (of the same storage) to ``name`` in this folder."""
        raise NotImplementedError

    def lock(self):
        """A context in which this process alone uses the folder (see the module docstring)."""
        return contextlib.nullcontext()

    # -- reading ---------------------------------------------------------------------------------

    def require_folder(self) -> None:
        """Refuses, in one line (InputError), a folder to read that is not one: a local path that
        is missing or a file. A prefix of a store always is one (maybe empty: what it lacks shows
        when its files are read), so this asks nothing of the store."""

    def local_view(self, names: Sequence[str], sizes_only: Sequence[str] = ()):
        """A context giving a local directory to read this folder from (see the module
        docstring): the folder itself, by the name it was given, when it is local; else a
        temporary folder holding those of the files ``names`` (names of files of this folder)
        that it has, and under each subfolder of ``sizes_only`` an empty file of the same name
        and size for each of its files (for a reader that only counts and sizes them; one listing,
        no download), removed on exit. A NeardupError raised in the block names this folder in
        place of the copy."""
        raise NotImplementedError

    # -- ownership -------------------------------------------------------------------------------

    def marker(self) -> Optional[dict]:
        m = self.read_json(MARKER)
        return m if isinstance(m, dict) and isinstance(m.get("kind"), str) else None

    def foreign_names(self, ours: Sequence[str] = ()) -> List[str]:
        """The entries that make the folder not empty, less ``ours``."""
        skip = set(_IGNORED_WHEN_EMPTY) | {MARKER} | set(ours)
        return [n for n in self.names() if n not in skip]

    def check_claim(self, kind: str, role: str) -> Optional[dict]:
        """Whether :meth:`claim` would accept this folder, without writing anything: its marker
        (None for a new or empty folder); a file, a folder of another kind, or a folder that is
        not empty and carries no marker is refused in one line (``role`` names the option)."""
        if self.is_file():
            raise ConfigError(f"{role} {self}: is a file, not a folder; choose a new or empty folder")
        marker = self.marker()
        if marker is None:
            foreign = self.foreign_names()
            if foreign:
                shown = ", ".join(fs.redact(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
                raise ConfigError(f"{role} {self}: holds files neardup did not write ({shown}); neardup only "
                                  f"writes into a new or empty folder, or one it made before: choose another")
        elif marker["kind"] != kind:
            raise ConfigError(f"{role} {self}: is {_KINDS.get(marker['kind'], 'a neardup ' + marker['kind'])}, not "
                              f"{_KINDS.get(kind, kind)}; choose another folder")
        return marker

    def claim(self, kind: str, role: str, version: int, **fields) -> dict:
        """Makes this folder ``kind`` (``work-dir``, ``output``), or checks that it already is
        one (see :meth:`check_claim`); returns its marker."""
        marker = self.check_claim(kind, role)
        if marker is None:
            marker = {"kind": kind, "format": version, **fields}
            self.makedirs()
            self.write_json(MARKER, marker)
        return marker

    def set_marker(self, marker: dict) -> None:
        self.write_json(MARKER, marker)

    def empty(self) -> None:
        """Removes everything in this (owned) folder but its marker and lock file."""
        for name in self.names():
            if name not in (MARKER, LOCK):
                self.remove(name)

    def publish(self, staging: "Folder", names: Sequence[str], complete: str) -> None:
        """Replaces the result in this folder by the one in ``staging``: ``complete`` (the file
        that says the result is whole) is removed first and moved in last; each of ``names`` is
        removed here and moved in from ``staging`` where it has one. Then ``staging`` goes."""
        self.remove(complete)
        present = set(staging.names())
        for name in names:
            if name == complete:
                continue
            self.remove(name)
            if name in present:
                self.move_in(staging.join(name), name)
        if complete in present:
            self.move_in(staging.join(complete), complete)
        staging.remove_all()

    def remove_all(self) -> None:
        fs.remove_tree(self.path)


class LocalFolder(Folder):
    """A directory on this machine."""

    def require_folder(self) -> None:
        if not os.path.isdir(self.path):
            raise InputError(f"{self}: not a folder")

    @contextlib.contextmanager
    def local_view(self, names: Sequence[str], sizes_only: Sequence[str] = ()) -> Iterator[str]:
        yield fs.local_path(self.shown)

    def move_in(self, source: str, name: str) -> None:
        os.replace(source, self.join(name))

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        import fcntl

        self.makedirs()
        path = self.join(LOCK)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                raise LockedError(f"{self}: another neardup run is using this folder; wait for it to end, "
                                  f"or choose another folder") from None
            yield
        finally:
            os.close(fd)  # closing releases the lock; the file stays (see the module docstring)


class RemoteFolder(Folder):
    """A prefix in an object store (or any fsspec filesystem). There is no lock: a store offers
    none that every client honours, so one run at a time is the user's to arrange (README)."""

    is_remote = True

    def move_in(self, source: str, name: str) -> None:
        fs.move(source, self.join(name))

    @contextlib.contextmanager
    def local_view(self, names: Sequence[str], sizes_only: Sequence[str] = ()) -> Iterator[str]:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="neardup-copy-") as tmp:
            with fs.remote_errors(str(self)):
                for name in names:
                    try:
                        data = fs.read_bytes(self.join(name))
                    except FileNotFoundError:
                        continue
                    with open(os.path.join(tmp, name), "wb") as fh:
                        fh.write(data)
                for sub in sizes_only:
                    for parts, size in fs.file_sizes(self.join(sub)):
                        path = os.path.join(tmp, sub, *parts)
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        with open(path, "wb") as fh:
                            fh.truncate(size)  # sparse: no disk space taken
            try:
                yield tmp
            except NeardupError as exc:
                raise type(exc)(str(exc).replace(tmp, fs.redact(self.path))) from None


def overlapping(path: Folder, inputs: Sequence[str], files: Sequence[str]) -> Optional[str]:
    """The first input that ``path`` would clash with, or None: ``path`` is an input file, holds
    one of the ``files`` read, or lies inside one of the ``inputs`` as given (a folder)."""
    folders: dict = {}  # a folder's real path, once per folder (a run may read 100,000 files)

    def form(p: str) -> str:  # a folder's form for a prefix test: a URL as typed, a local path resolved
        if fs.is_url(p):
            return str(p).rstrip("/") + "/"
        local = fs.local_path(p)
        if os.path.islink(local):
            return os.path.realpath(local).rstrip(os.sep) + os.sep
        head, tail = os.path.split(local)
        if tail in ("", ".", ".."):
            return os.path.realpath(local).rstrip(os.sep) + os.sep
        real = folders.get(head)
        if real is None:
            real = folders[head] = os.path.realpath(head or ".")
        return os.path.join(real, tail).rstrip(os.sep) + os.sep

    mine = form(path.path)
    for f in files:
        if form(f).startswith(mine):
            return f
    for inp in inputs:
        if fs.has_magic(inp):
            continue  # a glob: the files it matched are checked above
        if mine.startswith(form(inp)):
            return inp
    return None


def refuse_overlap(role: str, path: Folder, inputs: Sequence[str], files: Sequence[str]) -> None:
    clash = overlapping(path, inputs, files)
    if clash is not None:
        raise ConfigError(f"{role} {path}: is, holds or lies inside the input {fs.redact(clash)}; choose a "
                          f"folder outside the inputs")


__all__ = ["Folder", "LocalFolder", "RemoteFolder", "LockedError", "MARKER", "LOCK", "overlapping",
           "refuse_overlap"]
