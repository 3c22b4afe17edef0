"""Every folder neardup reads and writes as its own (output, staging, work dir, an index's
folder), behind one object: :class:`Folder`.

A Folder is a local directory or an object-store prefix; which one is decided once, when it is
made (:meth:`Folder.of`), and nothing above this room asks again. A stage, a writer, the report
and the index hold a Folder and name files *in* it: atomic writes, JSON, Arrow and Parquet
tables, ranged reads, listings, locks. The local side keeps its speed (``os`` calls, renames,
memory maps); the remote side goes through fsspec (:mod:`.remote`). A Folder is small and
picklable (its path): a Ray task gets the work dir's Folder and writes its own part files into
it.

**Ownership.** neardup writes, replaces and deletes only what it can prove it owns. A folder it
made carries a marker, ``.neardup``, a small JSON object naming what the folder is (``kind``:
``work-dir``, ``output``) and its format version. :meth:`Folder.claim` accepts a folder that
does not exist, an empty one, or one whose marker names the same kind; anything else (a file, a
project folder, an output claimed as a work dir) is refused in one line and never emptied. The
lock file ``.neardup.lock`` is never deleted by neardup, so that two runs on one folder always
contend for the same lock (a lock file removed by a cleanup would let a waiting run and a
newcomer hold "the" lock at once). One lock model serves runs and indexes (:meth:`Folder.lock`):
a run refuses a folder another run holds, an index writer waits for the one before it.

**Reading.** :meth:`Folder.local_view` gives a local directory to read a folder from: the
folder itself when it is local, a temporary copy of the files asked for when it is remote (for a
reader that needs local files, such as the report's); errors raised while it is read name the
folder, never the copy.

**Publishing whole.** A run writes its result into a staging folder beside the old result and
:meth:`Folder.publish` moves it in: the old ``stats.json`` (the file whose presence says that a
result is complete) goes first, the new one is written last, so no folder ever looks complete
and is not, whatever kills the run in between.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import OrderedDict
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ...errors import ConfigError, InputError, NeardupError
from . import fs, ranges, tables
from .local import LockedError
from .paths import has_magic, os_path, prefix_form, prefix_form_groups, redact

MARKER = ".neardup"
LOCK = ".neardup.lock"
OLD = ".old"  # in a staging folder: the result a publish replaced (Folder.publish), until the folder goes
_KINDS = {"output": "a neardup output folder", "work-dir": "a neardup work dir"}
# what a folder may hold and still count as empty: its own lock file (kept on purpose)
_IGNORED_WHEN_EMPTY = (LOCK,)


def json_bytes(value, indent: Optional[int] = 1) -> bytes:
    """The one way neardup writes JSON: sorted keys, ``indent`` (None: one line), a final newline."""
    return (json.dumps(value, indent=indent, sort_keys=True) + "\n").encode()


class Folder:
    """One folder, local or remote. ``path`` is absolute for a local folder, the URL (without a
    trailing ``/``) for a remote one; ``shown`` is the path as the user typed it (messages show it
    redacted: ``str(folder)``). Use :meth:`Folder.of` to make one."""

    def __init__(self, path: str, shown: Optional[str] = None):
        self.path = path
        self.shown = shown if shown is not None else path
        self._files = fs.files_of(path)

    @staticmethod
    def of(path) -> "Folder":
        if isinstance(path, Folder):
            return path
        path = os.fspath(path)
        local = os_path(path)
        if local is None:
            return Folder(str(path).rstrip("/"), str(path))
        return Folder(os.path.abspath(local), str(path))

    def __getstate__(self):
        return {"path": self.path, "shown": self.shown}

    def __setstate__(self, state):
        self.__init__(state["path"], state["shown"])

    def __str__(self) -> str:
        return redact(self.shown)

    def __repr__(self) -> str:
        return f"Folder({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Folder) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    # -- where it is ----------------------------------------------------------------------------

    @property
    def os_path(self) -> Optional[str]:
        """The local directory (for os calls and memory maps), or None for a store's prefix."""
        return None if self._files.is_remote else self.path

    def join(self, *parts: str) -> str:
        """The full path of a name in this folder (``a``, or ``sub``, ``a``)."""
        return fs.join(self.path, *parts)

    def child(self, *parts: str) -> "Folder":
        return Folder(self.join(*parts))

    def contains(self, other: "Folder") -> bool:
        """Whether ``other`` lies inside this folder (not this folder itself)."""
        sep = "/" if self._files.is_remote else os.sep
        return other.path.startswith(self.path.rstrip(sep) + sep)

    # -- what is in it -----------------------------------------------------------------------

    def exists(self, name: Optional[str] = None) -> bool:
        return self._files.exists(self.join(name) if name else self.path)

    def is_file(self) -> bool:
        return self._files.isfile(self.path)

    def is_dir(self, name: Optional[str] = None) -> bool:
        return self._files.isdir(self.join(name) if name else self.path)

    def names(self, sub: Optional[str] = None) -> List[str]:
        """The entries (files and folders) of this folder or of its subfolder ``sub``, sorted;
        none when it is not there."""
        path = self.join(sub) if sub else self.path
        if not self._files.isdir(path):  # an object store has no empty folders
            return []
        return [name for name, _ in self._files.listdir(path)]

    def file_names(self, sub: Optional[str] = None) -> List[str]:
        """The files (not folders) of this folder or of its subfolder ``sub``, sorted."""
        path = self.join(sub) if sub else self.path
        if not self._files.isdir(path):
            return []
        return [name for name, is_dir in self._files.listdir(path) if not is_dir]

    def files_under(self, sub: str) -> List[str]:
        """Every file under the subfolder ``sub``, as a path inside it (``a/b.jsonl``), sorted;
        nothing when it is not there (one listing of the store for a URL)."""
        return ["/".join(parts) for parts, _ in self._files.file_sizes(self.join(sub))]

    def size(self, name: str) -> int:
        return self._files.stat(self.join(name))[0]

    # -- bytes ---------------------------------------------------------------------------------

    def atomic_write(self, name: str):
        """A binary file that appears as ``name`` only when the block ends without an exception."""
        return self._files.atomic_write(self.join(name))

    def write_bytes(self, name: str, data: bytes) -> None:
        with self.atomic_write(name) as f:
            f.write(data)

    def read_bytes(self, name: str) -> bytes:
        return self._files.read_bytes(self.join(name))

    def durable_write(self, name: str):
        """A context giving the binary file ``name`` written in place, flushed and fsynced to
        disk when the block ends without an exception (:meth:`.local.LocalFiles.durable_write`).
        Not atomic: for a file that takes its final name by :meth:`move_in` once complete (an
        index's segments and manifest); :meth:`atomic_write` is the usual way. A local folder only."""
        self._local_only("a durable write")
        return self._files.durable_write(self.join(name))

    def sync(self, sub: Optional[str] = None) -> None:
        """Makes the entries of this folder (or of its subfolder ``sub``) durable: an fsync of the
        folder, after files were made, renamed or removed in it. A local folder only."""
        self._local_only("a sync")
        self._files.sync_folder(self.join(sub) if sub else self.path)

    def _local_only(self, what: str) -> None:
        if self._files.is_remote:
            raise NotImplementedError(f"{self}: {what} is for a local folder")

    def open_input(self, name: str):
        return self._files.open_input(self.join(name))

    # -- JSON ------------------------------------------------------------------------------------

    def write_json(self, name: str, value, indent: Optional[int] = 1) -> None:
        """One file of the folder, written whole (:func:`json_bytes`)."""
        self.write_bytes(name, json_bytes(value, indent))

    def load_json(self, name: str):
        """The JSON value of a file of the folder: FileNotFoundError when it is not there, any
        other problem reading it (a disk's, a store's) one line naming it (InputError), a file
        that is not JSON a ValueError."""
        path = self.join(name)
        try:
            raw = self._files.read_bytes(path)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise InputError(f"{redact(path)}: {exc}") from None
        return json.loads(raw)

    def read_json(self, name: str):
        """The JSON value of a file of the folder; None when it is missing or not JSON, or the
        store cannot say (network, credentials)."""
        try:
            return self.load_json(name)
        except (OSError, ValueError, NeardupError):
            return None

    # -- tables and ranges ------------------------------------------------------------------------

    def write_parquet(self, name: str, table: pa.Table) -> None:
        tables.write_parquet(table, self.join(name))

    def write_arrow(self, name: str, table: pa.Table) -> None:
        """``table`` as an uncompressed Arrow IPC file (a work file read back by neardup alone:
        no encoding to pay on either side), in record batches of at most ``tables.ROW_GROUP``
        rows, so that a reader streams it (:func:`.tables.iter_batches`)."""
        tables.write_arrow(table, self.join(name), max_chunksize=tables.ROW_GROUP)

    def parquet_rows(self, name: str, schema: pa.Schema) -> tables.ParquetRows:
        """A Parquet file written as rows stream in (:class:`.tables.ParquetRows`)."""
        return tables.ParquetRows(self.join(name), schema)

    def read_table(self, name: str, columns: Optional[List[str]] = None) -> pa.Table:
        return tables.read_table(self.join(name), columns)

    def stitch_parquet(self, name: str, schema: pa.Schema, parts: "Folder", part_names: Sequence[str],
                       convert: Optional[Callable[[pa.Table], pa.Table]] = None) -> int:
        """The Parquet file ``name`` made of the rows of the files ``part_names`` (Parquet or Arrow IPC) of the
        folder ``parts``, in that order, streamed (:func:`.tables.stitch_parquet`: the same bytes
        as the rows written at once, memory bounded by a few row groups). Returns the rows."""
        return tables.stitch_parquet(self.join(name), schema, [parts.join(p) for p in part_names], convert)

    def read_rows(self, name: str, starts, ends, dtype):
        """Items ``[starts[i], ends[i])`` of a raw array file, as CSR (:func:`.ranges.read_rows`)."""
        return ranges.read_rows(self.join(name), starts, ends, dtype)

    def arrow_columns(self, name: str, columns: List[str], cache: Optional["OrderedDict"] = None,
                      keep: int = 8) -> pa.Table:
        """Some columns of an Arrow IPC file (:func:`.ranges.arrow_columns`)."""
        return ranges.arrow_columns(self.join(name), columns, cache, keep)

    def map_array(self, name: str, dtype) -> np.ndarray:
        """A local file's bytes as a read-only array (memory-mapped; empty for an empty file)."""
        with open(self.join(name), "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return np.zeros(0, dtype)
            return np.memmap(f, dtype=dtype, mode="r")

    # -- changes -------------------------------------------------------------------------------

    def makedirs(self, sub: Optional[str] = None) -> None:
        self._files.makedirs(self.join(sub) if sub else self.path)

    def remove(self, name: str) -> None:
        """One entry (file or folder) of this folder; nothing when it is not there."""
        self._files.remove_tree(self.join(name))

    def remove_all(self) -> None:
        self._files.remove_tree(self.path)

    def move_in(self, source: str, name: str) -> None:
        """Moves the file or folder ``source`` (of the same storage) to ``name`` in this folder."""
        self._files.move(source, self.join(name))

    def lock(self, name: str = LOCK, *, wait: bool = False):
        """A context in which this process alone writes the folder: an exclusive lock on the
        file ``name`` (made when missing, never removed). A run does not wait (``wait=False``: a
        :class:`LockedError` at once when another run holds it); an index writer waits for the
        one before it. A store has no lock that every client honours: one writer at a time is
        the user's to arrange there (README), and nothing is taken."""
        self.makedirs()
        return self._files.lock(self.join(name), wait, str(self))

    # -- reading -------------------------------------------------------------------------------

    def require_folder(self) -> None:
        """Refuses, in one line (InputError), a folder to read that is not one: a local path that
        is missing or a file. A prefix of a store always is one (maybe empty: what it lacks shows
        when its files are read), so this asks nothing of the store."""
        if not self._files.is_remote and not os.path.isdir(self.path):
            raise InputError(f"{self}: not a folder")

    @contextlib.contextmanager
    def local_view(self, names: Sequence[str], sizes_only: Sequence[str] = ()) -> Iterator[str]:
        """A context giving a local directory to read this folder from: the folder itself, by
        the name it was given, when it is local; else a temporary folder holding those of the
        files ``names`` (names of files of this folder) that it has, and under each subfolder of
        ``sizes_only`` an empty file of the same name and size for each of its files (for a
        reader that only counts and sizes them; one listing, no download), removed on exit. A
        NeardupError raised in the block names this folder in place of the copy."""
        if not self._files.is_remote:
            yield fs.local_path(self.shown)
            return
        import tempfile

        with tempfile.TemporaryDirectory(prefix="neardup-copy-") as tmp:
            with fs.remote_errors(self.shown):  # the URL as given: translate redacts the whole message
                for name in names:
                    try:
                        data = self.read_bytes(name)
                    except FileNotFoundError:
                        continue
                    with open(os.path.join(tmp, name), "wb") as fh:
                        fh.write(data)
                for sub in sizes_only:
                    for parts, size in self._files.file_sizes(self.join(sub)):
                        path = os.path.join(tmp, sub, *parts)
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        with open(path, "wb") as fh:
                            fh.truncate(size)  # sparse: no disk space taken
            try:
                yield tmp
            except NeardupError as exc:
                raise type(exc)(str(exc).replace(tmp, redact(self.path))) from None

    def check_reachable(self) -> None:
        """Fails early, in one line, when the store of a remote folder cannot be reached, has no
        credentials or no such bucket; a local folder: nothing to check."""
        self._files.check_reachable(self.path)

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
                shown = ", ".join(redact(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
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

    def publish(self, staging: "Folder", names: Sequence[str], complete: str, content: Callable[[], bytes]) -> None:
        """Replaces the result in this folder by the one in ``staging``: ``complete`` (the file
        that says the result is whole) is removed first; each other of ``names`` is put out of
        the way here and moved in from ``staging`` where it has one; then ``content()`` gives the
        bytes of ``complete``, written once (into ``staging``) and moved in last. A kill at any
        step leaves either the old result whole or no ``complete`` file. The old result is moved
        into ``staging``'s folder :data:`OLD` (a rename: its bytes are not unlinked on the way,
        10-20 ms of the file system's time for the 0.2 GB kept/ of a 100k run); in a store, where
        a move is a copy, it is removed. ``staging``, with the old result, is the caller's to
        remove (:meth:`remove_all`; a run does it beside its work dir's removal)."""
        self.remove(complete)
        present = set(staging.names())
        here = set(self.names())
        old = None if self._files.is_remote else staging.child(OLD)
        for name in names:
            if name == complete:
                continue
            if old is None:
                self.remove(name)
            elif name in here:
                old.makedirs()
                old.move_in(self.join(name), name)
            if name in present:
                self.move_in(staging.join(name), name)
        staging.write_bytes(complete, content())
        self.move_in(staging.join(complete), complete)


def overlapping(path: Folder, inputs: Sequence[str], files: Sequence[str]) -> Optional[str]:
    """The first input that ``path`` would clash with, or None: ``path`` is an input file, holds
    one of the ``files`` read, or lies inside one of the ``inputs`` as given (a folder)."""
    return _Overlap(inputs, files).clash(path)


class _Overlap:
    """The inputs and files of a run in the form :func:`overlapping` compares (each file's
    resolved once, for every folder checked against them: a run may read 100,000 files; the
    files grouped by folder, so that a check asks each folder, not each file)."""

    def __init__(self, inputs: Sequence[str], files: Sequence[str], unlinked: Optional[Sequence[str]] = None):
        self.folders: dict = {}  # a folder's real path, once per folder
        self.inputs = inputs
        self.files = files
        self.forms: Optional[tuple] = None
        # no file is a symbolic link: ``unlinked`` (discover's word) holds these very files
        self.no_links = unlinked is not None and len(unlinked) == len(files) and list(files) == list(unlinked)

    def clash(self, path: Folder) -> Optional[str]:
        folders = self.folders
        mine = prefix_form(path.path, folders)
        if self.forms is None:
            self.forms = prefix_form_groups(self.files, folders, no_links=self.no_links)
        groups, others = self.forms
        first = None  # the first file whose form starts with mine: a file of it, or it itself
        for folder, (i, names) in groups.items():
            if folder.startswith(mine):  # each file of the folder: the folder's first
                hit: Optional[int] = i
            elif mine.startswith(folder):  # a file of the folder is mine (a name holds no separator)
                hit = names.get(mine[len(folder):-1])
            else:
                continue
            if hit is not None and (first is None or hit < first):
                first = hit
        for i, form in others:
            if (first is None or i < first) and form.startswith(mine):
                first = i
                break
        if first is not None:
            return self.files[first]
        for inp in self.inputs:
            if has_magic(inp):
                continue  # a glob: the files it matched are checked above
            if mine.startswith(prefix_form(inp, folders)):
                return inp
        return None


def refuse_overlap(role: str, path: Folder, inputs: Sequence[str], files: Sequence[str]) -> None:
    refuse_overlaps([(role, path)], inputs, files)


def refuse_overlaps(checks: Sequence[Tuple[str, Folder]], inputs: Sequence[str], files: Sequence[str],
                    unlinked: Optional[Sequence[str]] = None) -> None:
    """:func:`refuse_overlap` of each ``(role, folder)`` in order, the files resolved once.
    ``unlinked``: paths known to be no symbolic links (discover's ``Sources.unlinked``); where
    they are ``files``, no folder of them is listed for its links (100,000 files: 0.05 CPU-s)."""
    overlap = _Overlap(inputs, files, unlinked)
    for role, path in checks:
        clash = overlap.clash(path)
        if clash is not None:
            raise ConfigError(f"{role} {path}: is, holds or lies inside the input {redact(clash)}; choose a "
                              f"folder outside the inputs")


__all__ = ["Folder", "LockedError", "MARKER", "LOCK", "json_bytes", "overlapping", "refuse_overlap", "refuse_overlaps"]
