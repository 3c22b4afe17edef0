"""Discovery: what the user typed (files, folders, globs, URLs) -> the list of
:class:`~neardup.io.sources.Source` to read, in a stable order, each with its format and the
name its kept records get under ``kept/``.

A folder is walked (hidden entries and ``__pycache__`` skipped), symbolic links are followed or
not as asked, a file reached twice is read once, and names that would clash in ``kept/`` are
refused in one line (:func:`discover`).
"""

from __future__ import annotations

import errno
import gc
import glob
import operator
import os
import stat
import threading
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..errors import ConfigError, InputError
from .compiled import compiled_loop
from .sources import _SHOW, INPUT_FORMATS, Source, Sources, _first_clash, _clashing, _strip_name, detect_format
from .storage import fs as _fs, paths as _paths


def _posix(p: str) -> str:
    return p.replace(os.sep, "/") if os.sep != "/" else p


def _is_magic(p: str) -> bool:
    return glob.has_magic(p)


def _skip_name(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def _inside(path: str, roots: Sequence[str]) -> bool:
    """Whether the real path ``path`` is one of ``roots`` (real paths) or lies inside one."""
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _walked_anyway(target: str, folders: Sequence[str]) -> bool:
    """Whether the real path ``target`` is walked as part of one of the folder inputs
    ``folders`` (real paths): inside one, and not below a hidden entry or ``__pycache__``."""
    for f in folders:
        if target == f:
            return True
        prefix = f.rstrip(os.sep) + os.sep
        if target.startswith(prefix) and not any(_skip_name(p) for p in target[len(prefix):].split(os.sep)):
            return True
    return False


def _walk_folder(folder: str, roots: Sequence[str] = (), follow_symlinks: bool = True,
                 links: Optional[Dict[str, int]] = None,
                 folders: Sequence[str] = (), prefix: str = "") -> List[_Found]:
    """Regular files under ``folder`` as walked :class:`_Found` (``name``: ``prefix`` and the
    path relative to ``folder``), hidden entries and ``__pycache__`` skipped, sorted by path
    components; ``via_link``: a symbolic link is on the way. A link to a folder that one of
    ``folders`` (the real paths of the folder inputs) walks anyway is not followed (counted in
    ``links["read_once"]``); any other link (to a file or a folder) whose target lies outside
    ``roots`` (the real paths of the input set) is followed only with ``follow_symlinks``, else
    counted in ``links["not_followed"]``; a folder is walked once (a link cycle ends). The walk
    goes depth first through each folder's entries sorted by name: the order of the path
    components itself (of two files, the one whose first differing component sorts first is met
    first, whatever lies below), so nothing is sorted afterwards."""
    if links is None:
        links = {"read_once": 0, "not_followed": 0}
    found: List[_Found] = []
    seen_dirs = set()

    def walk(path: str, rel: str, via_link: bool) -> None:
        try:
            st = os.stat(path)
        except OSError as e:
            raise InputError(f"cannot read folder {_SHOW(_posix(path))} ({e.strerror or e})") from None
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:  # a link cycle
            return
        seen_dirs.add(key)
        try:
            entries = sorted(os.scandir(path), key=_name)
        except OSError as e:
            raise InputError(f"cannot read folder {_SHOW(_posix(path))} ({e.strerror or e})") from None
        for entry in entries:
            name = entry.name
            if _skip_name(name):
                continue
            try:
                is_dir = entry.is_dir()  # follows links; False for a broken one
                is_file = entry.is_file()
                is_link = entry.is_symlink()
            except OSError as e:  # a link loop, no permission: not a broken link, a problem
                raise InputError(f"cannot read {_SHOW(_posix(entry.path))} ({e.strerror or e})") from None
            if is_link and (is_dir or is_file):
                target = os.path.realpath(entry.path)
                if is_dir and _walked_anyway(target, folders):
                    links["read_once"] += 1  # its files are read by their own paths
                    continue
                if not follow_symlinks and not _inside(target, roots):
                    links["not_followed"] += 1
                    continue
            if is_dir:
                walk(entry.path, rel + name + "/", via_link or is_link)
            elif is_file:  # made as a tuple, without the named tuple's __new__ (a Python call a file)
                found.append(_new_tuple(_Found, (entry.path, rel + name, True, via_link or is_link, False)))
            # other things (sockets, named pipes, devices, broken links) are not documents

    walk(folder, prefix, False)
    return found


_name = operator.attrgetter("name")
_new_tuple = tuple.__new__


def _join_name(base: str, rel: str) -> str:
    base = _posix(base)
    if base in (".", "./"):
        return rel
    return base.rstrip("/") + "/" + rel if base.rstrip("/") else "/" + rel


def discover(inputs: Sequence[str], *, input_format: str = "auto", follow_symlinks: bool = False) -> Sources:
    """The files to read, in order.

    Each input is a file, a folder (walked recursively in sorted path order, skipping hidden
    entries and ``__pycache__``) or a glob (``glob.glob(recursive=True)``, sorted; a folder it
    matches is walked like a folder input, except for ``**`` globs, which already match the
    files inside). With ``input_format="auto"`` the format comes from the extensions
    (:func:`detect_format`): ``.jsonl .json`` are JSON Lines, ``.parquet .pq`` Parquet, ``.csv
    .tsv`` tables with a header line (each optionally ``.gz .zst .zstd .bz2 .xz``), anything else
    one text document per file (decompressed when its content is compressed); with
    ``input_format="text"`` every file is one text document.

    Symbolic links met in a walk: one whose target lies outside the input set (the real paths of
    the inputs) is followed only with ``follow_symlinks``; a file reached both through a link and
    by its own path (or through two links) is read once, under the name reached without a link
    (the first in order otherwise), counted in the result's ``links``. Hard links (one file under
    two paths) are decided alike: read once under the first path, counted in ``links["hard_links"]``.
    The same path reached twice (overlapping inputs) is an InputError.

    ``relpath`` (the name under ``kept/``) is the file's path relative to the longest common
    folder of the inputs' folders (a folder input's own folder, a file's parent folder, a glob's
    folder before its first wildcard); when two sources would collide, each of them falls back
    to its ``name`` (leading ``/`` and ``..`` parts removed); a collision left after that is an
    InputError, like a missing path, a glob that matches nothing, a folder without files or a
    file reached twice.
    """
    enabled = gc.isenabled()  # 100,000 files make ~10 objects each, none a cycle: the collector
    gc.disable()               # would go over them again and again as they are made (a third of the time)
    try:
        out = _discover(inputs, input_format, follow_symlinks)
        if len(out) >= _STAT_BESIDE_FROM and _last_work():
            gc.freeze()  # see _last_work
        return out
    finally:
        if enabled:
            gc.enable()


def _last_work() -> bool:
    """Whether the sources found stay for the rest of the process (the ``neardup`` program:
    :func:`neardup.progress.last_work`), which :func:`discover` then moves out of the garbage
    collector's sight (``gc.freeze``, as the program froze its start-up objects): the first
    collection once the collector is back walked every one of a folder's sources (100,000
    files: ~0.05 CPU-s on the main thread, in the step after discover; 0.067 against 0.005
    CPU-s for choose_id_column just after it in one process). A library call's objects stay
    in sight (the caller's garbage is not frozen with them)."""
    from ..progress import last_work
    return last_work()


def _discover(inputs: Sequence[str], input_format: str, follow_symlinks: bool) -> Sources:
    if input_format not in INPUT_FORMATS:
        raise ConfigError(f"input_format must be one of {', '.join(INPUT_FORMATS)}; got {input_format!r}")
    if isinstance(inputs, (str, bytes, os.PathLike)):
        inputs = [inputs]  # type: ignore[list-item]
    inputs = [os.fsdecode(os.fspath(i)) for i in inputs]
    if not inputs:
        raise InputError("no input given")

    roots = _real_roots(inputs)
    folders = [os.path.realpath(local) for local in (_fs.os_path(i) for i in inputs if i)
               if local is not None and os.path.isdir(local)]
    links = {"read_once": 0, "not_followed": 0, "hard_links": 0}
    found: List[_Found] = []
    bases: List[str] = []
    for inp in inputs:
        if inp == "":
            raise InputError("no such file or folder: '' (an empty input path)")
        local = _fs.os_path(inp)
        if local is None:
            files, base = _discover_url(inp)
            found.extend(files)
            bases.append(base)
            continue
        _discover_local(local, found, roots, follow_symlinks, links, folders)
        bases.append(_local_base(local))

    file_stats: Dict[str, Tuple[int, int]] = {}
    paths = list(map(_path_of, found))
    stats = _StatsBeside(found, paths)  # each file's stat in a compiled loop, beside the sources made here
    if stats.thread is None:  # few files, a remote one or a path not ASCII: one by one, the sources made once
        return _sources(_once(found, links, file_stats), bases, input_format, links, file_stats)
    try:
        out = _sources(found, bases, input_format, links, file_stats, paths)
        refused: Optional[InputError] = None
    except InputError as e:  # two names clash: unless a file's stat says something first (below)
        out, refused = None, e
    if not stats.each_once():  # a link, a hard link, an unreadable file: one by one
        return _sources(_once(found, links, file_stats), bases, input_format, links, file_stats)
    if refused is not None:
        raise refused
    out.stats_of(stats.paths, stats.sizes, stats.mtimes)  # its file_stats, made when read (see Sources)
    if stats.json is not None:  # the run's identity takes the inputs' JSON made beside (see Sources)
        out.inputs_json = (stats.paths, stats.json, stats.sizes, stats.mtimes)
    if False not in map(_walked_of, found) and True not in map(_via_link_of, found):
        out.unlinked = stats.paths  # each found by a walk, no symbolic link on its way (see Sources)
    return out


# of a _Found
_path_of, _walked_of, _via_link_of = operator.itemgetter(0), operator.itemgetter(2), operator.itemgetter(3)


def _sources(found: List[_Found], bases: List[str], input_format: str, links: Dict[str, int],
             file_stats: Dict[str, Tuple[int, int]], paths: Optional[List[str]] = None) -> Sources:
    """The sources of the files ``found`` (each once; ``paths``: their paths, where the caller
    has them), their names under ``kept/`` relative to the common folder of ``bases``; names
    that would clash refused (an InputError)."""
    root = _common_folder(bases)
    if paths is None:
        paths = list(map(_path_of, found))
    names = _shown([f.name for f in found])
    relpaths = _shown(_relatives(paths, root))
    clashing = _clashing(relpaths)
    for i in sorted(clashing):
        relpaths[i] = _strip_name(_without_scheme(names[i])) or relpaths[i]
    clash = _first_clash(relpaths) if clashing else None  # none of them collide: none is the first
    if clash is not None:
        i, j = clash
        raise InputError(
            f"two inputs would be written to the same output name {relpaths[i]!r}: "
            f"{names[i]} and {names[j]}"
        )

    formats = _formats(paths) if input_format == "auto" else [(input_format, None)] * len(paths)
    out = Sources(links=links, file_stats=file_stats)
    new, update, append = _new_object, dict.update, out.append
    for f, path, name, rel, (fmt, comp) in zip(found, paths, names, relpaths, formats):
        src = new(Source)  # make_source inline: one Python call less a file
        update(src.__dict__, path=path, name=name, relpath=rel, format=fmt, compression=comp, table=None,
               walked=f.walked)
        append(src)
    return out


_new_object = object.__new__


def _shown(texts: List[str]) -> List[str]:
    """:func:`~neardup.io.sources.display_name` of each of ``texts`` (a new list): the list
    itself when every one is plain (ASCII, no URL: what display_name leaves as it is), told
    once for all of them (a folder of 100,000 files: not one call a file)."""
    joined = "\0".join(texts)  # "://" cannot span two of them
    if joined.isascii() and "://" not in joined:
        return texts
    return [_SHOW(t) for t in texts]


def _formats(paths: List[str]) -> List[Tuple[str, Optional[str]]]:
    """:func:`detect_format` of each path's file name (:func:`_basename`), asked once an ending:
    a name's format depends only on its part from its second last dot on (see detect_format,
    :func:`_ending`), which that part's own format is, where lower-casing keeps each character in
    its place (ASCII: else each path is asked on its own). A folder of 100,000 files holds few
    endings, most often one: told for all of them at once (:func:`_one_ending`), else one by one."""
    joined = "\0".join(paths)
    if os.sep != "/" or not joined.isascii() or "://" in joined:
        return [detect_format(_basename(p)) for p in paths]
    one = _one_ending(joined, len(paths))
    if one is not None:
        return [detect_format(one)] * len(paths)
    known: Dict[str, Tuple[str, Optional[str]]] = {}
    out = []
    append = out.append
    for p in paths:
        ending = _ending(p[p.rfind("/") + 1:])
        fmt = known.get(ending)
        if fmt is None:
            fmt = known[ending] = detect_format(ending)
        append(fmt)
    return out


def _ending(base: str) -> str:
    """The part of the file name ``base`` that its format depends on: from its second last dot
    on (its last where it has one dot), or the whole name where it has no dot but a leading one."""
    last = base.rfind(".")
    if last <= 0:  # no dot, or only a leading one: the name's format is its own
        return base
    before = base.rfind(".", 0, last)
    return base[before if before >= 0 else last:]


_ENDING_WINDOW = 32  # the bytes before each path's end where _one_ending looks for its file name's ending


def _one_ending(joined: str, n: int) -> Optional[str]:
    """The :func:`_ending` of every one of the ``n`` paths of ``joined`` (ASCII, joined by NULs,
    ``/`` between parts) where it is the first path's ending E for all, told over their last
    _ENDING_WINDOW bytes as rows of a numpy array (a folder of 100,000 files: ~10 ms, not 44 in
    a loop): each path ends with E and, where E holds one dot (``.txt``), no dot lies between
    the path's last ``/`` and E (``a.b.txt``'s ending is ``.b.txt``); E of two dots
    (``.jsonl.gz``) is the ending of any name that ends with it. None where an ending differs,
    where E holds no dot at its start (``README``: each asked on its own) or where a file
    name's start lies before the window."""
    path = joined[:joined.find("\0")] if n > 1 else joined
    first = _ending(path[path.rfind("/") + 1:])
    w, k = _ENDING_WINDOW, len(first)
    if not first.startswith(".") or k > w:
        return None
    blob = np.frombuffer(joined.encode("ascii"), np.uint8)
    ends = np.flatnonzero(blob == 0)
    if len(ends) != n - 1:  # a NUL inside a path
        return None
    padded = np.concatenate([np.zeros(w, np.uint8), blob])  # a NUL before the first path too
    rows = np.lib.stride_tricks.sliding_window_view(padded, w)[np.append(ends, len(blob))]  # bytes before each end
    if not np.all(rows[:, w - k:] == np.frombuffer(first.encode(), np.uint8)):
        return None
    if first.count(".") == 2:
        return first
    undecided, bounded = np.ones(n, bool), np.zeros(n, bool)  # the byte met first before E: "/" or NUL
    for c in range(w - k - 1, -1, -1):  # from E back, column by column
        byte = rows[:, c]
        sep = (byte == ord("/")) | (byte == 0)
        bounded |= undecided & sep
        undecided &= ~(sep | (byte == ord(".")))
        if not undecided.any():
            break
    return first if bounded.all() else None


# neardup.kernels.filestat.stat_files where it runs (Linux, numba), else None: os.stat a file
_compiled_stat = compiled_loop("filestat", "stat_files", "stat_available",
                               np.frombuffer(b"\0", np.uint8), np.zeros(0, np.int64))
# neardup.kernels.inputsjson.inputs_json: the JSON of the inputs of a run's identity
_compiled_json = compiled_loop("inputsjson", "inputs_json", "json_available", np.frombuffer(b"\0", np.uint8),
                               np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
_STAT_BESIDE_FROM = 10_000  # files found from which their stats are taken in a thread (below: its load costs more)


class _StatsBeside:
    """The stat of every file found (all local, ASCII paths: a folder's files), by the compiled
    loop of :func:`neardup.kernels.filestat.stat_files` in a thread of its own, which does not
    hold Python's lock: the sources are made meanwhile, on the caller's thread, as if each file
    were found once (the usual folder), and :meth:`each_once` says whether they were (told in
    that thread too: its sort of the inodes holds no lock). The same thread then makes the JSON
    of the files' ``[path, path, size, mtime_ns]`` rows
    (:func:`neardup.kernels.inputsjson.inputs_json`: ``json``, None where a path needs escaping),
    which is the JSON of the run's identity's inputs where each file's name is its path (100,000
    files: 0.09 CPU-s less on the caller's thread, :func:`neardup.stages.identity.run_identity`)."""

    def __init__(self, found: List[_Found], paths: List[str]):
        self.paths = paths  # of found
        self.stats = None
        self.once = False
        self.thread = None
        self.json: Optional[str] = None
        self.sizes: List[int] = []
        self.mtimes: List[int] = []
        if len(found) < _STAT_BESIDE_FROM or any(f.remote for f in found):
            return
        joined = "\0".join(self.paths) + "\0"
        if not joined.isascii():  # a byte a character
            return
        self.blob = np.frombuffer(joined.encode(), np.uint8)
        ends = np.flatnonzero(self.blob == 0)  # one a path, when no path holds a NUL
        if len(ends) != len(self.paths):
            return
        self.at = np.zeros(len(self.paths), np.int64)
        np.add(ends[:-1], 1, out=self.at[1:])  # each path's start: the byte after the NUL before it
        self.thread = threading.Thread(target=self._stat, name="neardup-stat", daemon=True)
        self.thread.start()

    def _stat(self) -> None:
        stat_files = _compiled_stat()
        if stat_files is not None:
            self.stats = stat_files(self.blob, self.at)
            self.once = self.stats is not None and _regular_once(*self.stats)  # None: a file not stat'ed
        make_json = _compiled_json() if self.stats is not None else None
        if make_json is not None:
            try:
                made = make_json(self.blob, self.at, self.stats[1], self.stats[2])
                self.json = made.tobytes().decode("ascii") if len(made) else None
            except Exception:  # noqa: BLE001 (the identity encodes its rows one by one)
                self.json = None

    def each_once(self) -> bool:
        """Whether every file was stat'ed, is a regular file, and is reached once (no two of one
        device and inode); if so, ``sizes`` and ``mtimes`` hold each one's size and mtime_ns,
        as :func:`_once` would record them."""
        if self.thread is None:
            return False
        self.thread.join()
        if not self.once:
            return False
        self.sizes, self.mtimes = self.stats[1].tolist(), self.stats[2].tolist()
        return True


def _regular_once(mode: np.ndarray, size: np.ndarray, mtime_ns: np.ndarray, dev: np.ndarray,
                  ino: np.ndarray) -> bool:
    """Whether the files of these stats (:func:`neardup.kernels.filestat.stat_files`) are each a
    regular file, no two of them one (the same device and inode): the inodes sorted alone
    first, which tell it where they all differ (the usual folder), else with their devices."""
    if not np.all((mode & 0o170000) == stat.S_IFREG):  # S_IFMT(mode) of each
        return False
    by_ino = np.sort(ino)
    if not np.any(by_ino[1:] == by_ino[:-1]):
        return True
    order = np.lexsort((ino, dev))
    return not np.any((dev[order][1:] == dev[order][:-1]) & (ino[order][1:] == ino[order][:-1]))


def _basename(path: str) -> str:
    """:func:`neardup.io.storage.fs.basename`; a local POSIX path's at once."""
    if os.sep == "/" and "://" not in path:
        return path.rpartition("/")[2]
    return _fs.basename(path)


class _Found(NamedTuple):
    """A file found (a tuple: one is made a file of a folder of 100,000, and a frozen dataclass
    took 2.5 times as long to make)."""

    path: str            # to open
    name: str            # as shown
    walked: bool = False  # found by a walk or a glob
    via_link: bool = False  # a symbolic link on the way (in a walk)
    remote: bool = False


def _real_roots(inputs: Sequence[str]) -> List[str]:
    """The real paths of the local inputs (a glob: its folder before the first wildcard): where
    a symbolic link may lead and still be inside the input set."""
    out = []
    for inp in inputs:
        local = _fs.os_path(inp) if inp else None
        if local is not None:
            out.append(os.path.realpath(_glob_folder(local) if _is_magic(local) and not os.path.exists(local)
                                        else local))
    return out


def _glob_folder(pattern: str) -> str:
    """The folder of a glob pattern before its first wildcard (``.`` when it starts with one)."""
    parts = _posix(pattern).split("/")
    fixed = next(k for k, part in enumerate(parts) if _is_magic(part))
    head = "/".join(parts[:fixed])
    return head if head or not pattern.startswith("/") else "/"


def _local_base(inp: str) -> str:
    """The folder an input's files are laid out from under ``kept/`` (absolute)."""
    if os.path.isdir(inp):
        return os.path.abspath(inp)
    if not os.path.exists(inp) and _is_magic(inp):
        return os.path.abspath(_glob_folder(inp) or ".")
    return os.path.dirname(os.path.abspath(inp))


_common_folder = _paths.common_folder
_relative = _paths.relative_to


def _relatives(paths: Sequence[str], root: Optional[str]) -> List[str]:
    """:func:`_relative` of each of ``paths``, made once a folder (a folder of 100,000 files: not
    one ``abspath`` a file, nor one comparison with ``root``): a plain NAME in folder HEAD is
    ``HEAD/NAME``'s relative form as the folder's (:func:`_below`) plus NAME (files of a folder
    come one after another, or back: each folder's made once, kept in ``heads``)."""
    if os.sep != "/" or root is None:
        return [_relative(p, root) for p in paths]
    prefix = root.rstrip("/") + "/"
    heads: Dict[str, Optional[str]] = {}
    out = []
    for p in paths:
        head, _, name = p.rpartition("/")
        try:
            below = heads[head]
        except KeyError:
            below = heads[head] = _below(head, p, prefix)
        out.append(below + name if below is not None and name not in ("", ".", "..") else _relative(p, root))
    return out


def _below(head: str, path: str, prefix: str) -> Optional[str]:
    """What :func:`_relative` makes of the folder ``head`` of ``path`` (``HEAD/NAME``, NAME plain)
    relative to the folder ``prefix`` (ended by ``/``), ``/`` at its end, for any plain NAME:
    ``abspath(HEAD/NAME)`` is ``abspath(HEAD) + "/" + NAME`` when that folder is not the root;
    None where that rule does not hold or the folder is not inside (each path on its own). Of
    the paths of one folder, each is a URL or none ("://" cannot span a NAME, which holds no ``/``)."""
    if not head or ("://" in path and _paths.os_path(path) is None):
        return None
    base = os.path.abspath(head)
    if base.endswith("/"):  # "/" or "//": abspath keeps what the plain join would not
        return None
    base += "/"
    return base[len(prefix):] if base.startswith(prefix) else None


def _once(found: List[_Found], links: Dict[str, int],
          file_stats: Optional[Dict[str, Tuple[int, int]]] = None) -> List[_Found]:
    """``found`` with each file once: of the entries that reach one file, the one without a
    symbolic link on the way (else the first) stays, in its place. Two entries without a link
    are hard links when their paths differ (the first stays, counted in ``links["hard_links"]``:
    a system folder holds such files, and reading one twice would only find it a duplicate of
    itself), else the same path named twice (overlapping inputs), an InputError. ``file_stats``
    receives each local path's (size, mtime_ns)."""
    keys: List[Any] = []
    first: Dict[Any, int] = {}
    twice = False  # a file reached twice: found less the others
    stat_of, regular = os.stat, stat.S_ISREG
    for i, f in enumerate(found):
        path = f.path
        if f.remote:
            key: Any = ("url", path.rstrip("/"))
        else:
            try:
                st = stat_of(path)
            except OSError as e:
                raise InputError(f"cannot read {_SHOW(f.name)} ({e.strerror or e})") from None
            if not regular(st.st_mode):
                raise InputError(f"not a regular file: {_SHOW(f.name)}")
            key = (st.st_dev, st.st_ino)
            if file_stats is not None:
                file_stats[path] = (st.st_size, st.st_mtime_ns)
        keys.append(key)
        j = first.setdefault(key, i)
        if j == i:
            continue
        twice = True
        other = found[j]
        if not (f.via_link or other.via_link):
            if f.remote or os.path.realpath(path) == os.path.realpath(other.path):  # one path named twice
                if other.name == f.name:
                    raise InputError(f"same file reached twice: {_SHOW(f.name)}")
                raise InputError(f"same file reached twice: {_SHOW(other.name)} and {_SHOW(f.name)}")
            links["hard_links"] += 1  # two names of one file: the first is read
            continue
        links["read_once"] += 1
        if other.via_link and not f.via_link:
            first[key] = i
    return [f for i, f in enumerate(found) if first[keys[i]] == i] if twice else found


_without_scheme = _paths.without_credentials


def _discover_url(inp: str) -> Tuple[List[_Found], str]:
    """The files an URL input names: the rules of local inputs (a file, a folder walked in
    sorted order without hidden entries and ``__pycache__``, or a glob) over the store's
    listing, the name being the URL itself; and the input's folder (see :func:`discover`)."""
    url = inp
    if _fs.has_magic(url):
        entries = _fs.glob_entries(url)
        recursive = "**" in url
        out: List[_Found] = []
        fixed = next(k for k, part in enumerate(url.split("/")) if _is_magic(part))
        hidden_ok = "/." in url
        for m, is_dir in entries:
            below = m.split("/")[fixed:]
            if "__pycache__" in below and "__pycache__" not in url.split("/"):
                continue
            if not hidden_ok and any(x.startswith(".") for x in below):
                continue
            if is_dir:
                if not recursive:
                    out.extend(_Found(p, _join_name(m, rel), walked=True, remote=True) for p, rel in _walk_url(m))
            else:
                out.append(_Found(m, m, walked=True, remote=True))
        if not out:
            _fs.check_reachable(url)
            what = "nothing" if not entries else "no files"
            raise InputError(f"no such file or folder: {_SHOW(url)} (the pattern matches {what})")
        return out, "/".join(url.split("/")[:fixed])
    if _fs.isfile(url):
        return [_Found(url, url, remote=True)], url.rstrip("/").rpartition("/")[0]
    if _fs.isdir(url):
        files = _walk_url(url)
        if not files:
            raise InputError(f"folder has no files: {_SHOW(url)}")
        return [_Found(p, _join_name(url, rel), walked=True, remote=True) for p, rel in files], url.rstrip("/")
    _fs.check_reachable(url)
    raise InputError(f"no such file or folder: {_SHOW(url)}")


def _walk_url(folder: str) -> List[Tuple[str, str]]:
    return [(path, "/".join(parts)) for parts, path in _fs.walk_files(folder, skip=_skip_name)]


def _discover_local(inp: str, found: List[_Found], roots: Sequence[str], follow_symlinks: bool,
                    links: Dict[str, int], folders: Sequence[str]) -> None:
    """Append the files of a local input to ``found`` (see :func:`_walk_folder` for ``roots``,
    ``follow_symlinks``, ``links`` and ``folders``)."""
    def walk(folder: str) -> None:  # _join_name(folder, rel) is _join_name(folder, "") + rel
        found.extend(_walk_folder(folder, roots, follow_symlinks, links, folders, _join_name(folder, "")))

    if os.path.isdir(inp):
        n_before, left_out = len(found), links["not_followed"]
        walk(inp)
        if len(found) == n_before:
            left_out = links["not_followed"] - left_out
            hint = (f" ({left_out} symbolic link{'s' if left_out > 1 else ''} leading out of the inputs not "
                    f"followed; --follow-symlinks follows them)") if left_out else ""
            raise InputError(f"folder has no files: {_SHOW(_posix(inp))}{hint}")
    elif os.path.exists(inp):
        found.append(_Found(inp, _posix(inp)))
    elif _is_magic(inp):
        matches = sorted(glob.glob(inp, recursive=True))
        recursive = "**" in inp
        n_before = len(found)
        for m in matches:
            rel_parts = _posix(m).split("/")
            if "__pycache__" in rel_parts and "__pycache__" not in _posix(inp).split("/"):
                continue
            if os.path.isdir(m):
                if not recursive:
                    walk(m)
            elif os.path.isfile(m):
                is_link = os.path.islink(m)
                if is_link and not follow_symlinks and not _inside(os.path.realpath(m), roots):
                    links["not_followed"] += 1
                    continue
                found.append(_Found(m, _posix(m), walked=True, via_link=is_link))
        if len(found) == n_before:
            what = "nothing" if not matches else "no files"
            raise InputError(f"no such file or folder: {_SHOW(_posix(inp))} (the pattern matches {what})")
    else:
        shown = _SHOW(_posix(inp))
        try:
            os.stat(inp)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTDIR):  # a link loop, no permission
                raise InputError(f"cannot read {shown} ({e.strerror or e})") from None
        if os.path.islink(inp):
            raise InputError(f"no such file or folder: {shown} (a broken symbolic link)")
        raise InputError(f"no such file or folder: {shown}")
