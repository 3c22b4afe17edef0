"""Finding the input: which files to read, in which format, and under which names.

:func:`discover` turns what the user typed (files, folders, globs) into a list of
:class:`Source`; :func:`table_source` wraps an in-memory table the same way;
:func:`estimate_documents` says about how many documents they hold (for a progress bar).
"""

from __future__ import annotations

import errno
import functools
import gc
import glob
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import ConfigError, InputError
from .storage import fs as _fs, paths as _paths

# The compressed kinds, by the name's last suffix (the content's magic bytes decide for a text
# file: :mod:`neardup.io.compressed`). Longest first: ".zstd" must win over ".zst".
_COMPRESSIONS: Tuple[Tuple[str, str], ...] = (
    (".zstd", "zstd"), (".zst", "zstd"), (".gz", "gzip"), (".bz2", "bz2"), (".xz", "xz"))
COMPRESSED_SUFFIXES = tuple(suffix for suffix, _ in _COMPRESSIONS)
# The data formats by the suffix before any compression suffix.
_DATA_SUFFIXES: Dict[str, Tuple[str, ...]] = {
    "jsonl": (".jsonl", ".json"), "parquet": (".parquet", ".pq"), "csv": (".csv",), "tsv": (".tsv",)}
OUTPUT_FORMATS = ("same", "jsonl", "parquet")


@dataclass(frozen=True)
class Source:
    """One input file (or one in-memory table).

    path: the path to open (``"<table>"`` for an in-memory table), as given.
    name: the path as the user would type it, POSIX separators: the input as given, plus the
        path inside it for a folder; shown as :func:`display_name` makes it (no credentials, no
        bytes that are not UTF-8). Used in document ids ``NAME:ROW``, messages, stats.json,
        removed.parquet and rejected.parquet.
    relpath: where its kept records go under ``kept/`` (see :func:`discover`), with the same
        care as ``name``.
    format: ``jsonl``, ``parquet``, ``csv``, ``tsv``, ``text`` (one document per file) or ``table``.
    compression: ``None``, ``gzip``, ``zstd``, ``bz2`` or ``xz``, as the name says (a text
        file's content decides when it is read: its magic bytes).
    table: the ``pyarrow.Table`` of a ``table`` source.
    walked: found by walking a folder or by a glob, not named: a text file of a walk that is
        binary (a NUL byte) or not UTF-8 is skipped (counted), where a named one is an error.
    """

    path: str
    name: str
    relpath: str
    format: str
    compression: Optional[str] = None
    table: Any = field(default=None, compare=False, hash=False, repr=False)
    walked: bool = False


INPUT_FORMATS = ("auto", "text", "signatures", "rpv2-minhash")


class Sources(list):
    """What :func:`discover` found: the :class:`Source` list, and ``links``, what it did with
    symbolic links: ``read_once`` (a link to a file of the input set, which is read once under
    its own name), ``not_followed`` (links leading out of the input set, left out unless
    ``follow_symlinks``), and ``hard_links`` (further paths of a file already found, left out)."""

    def __init__(self, items=(), links: Optional[Dict[str, int]] = None,
                 file_stats: Optional[Dict[str, Tuple[int, int]]] = None):
        super().__init__(items)
        self.links = {"read_once": 0, "not_followed": 0, "hard_links": 0, **(links or {})}
        # {path: (size, mtime_ns)} of the local files, as discover's stat found them (the run's
        # identity takes them from here rather than asking each file again)
        self.file_stats = file_stats if file_stats is not None else {}


def display_name(path: Any) -> str:
    """A path or URL as neardup shows and stores it: the credentials of a URL hidden
    (:func:`neardup.io.storage.fs.redact`), and the bytes of a file name that are not UTF-8 (which Python
    reads as lone surrogates) written ``\\xNN``, so that the name can be printed, put in JSON and
    in Parquet. A plain name stays as it is."""
    p = str(path)
    if p.isascii() and "://" not in p:  # a plain local name (most are): nothing to escape or hide
        return p
    try:
        p.encode("utf-8")
    except UnicodeEncodeError:
        try:
            p = p.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that is no escaped byte
            p = p.encode("utf-8", "backslashreplace").decode("utf-8")
    return _fs.redact(p)


_SHOW = display_name


def _compression_of(low: str) -> Tuple[Optional[str], int]:
    """The compression a lower-case file name says (``.gz``, ``.zst``, ``.zstd``, ``.bz2``,
    ``.xz``) and the length of its suffix; ``(None, 0)`` for none."""
    for suffix, compression in _COMPRESSIONS:
        if low.endswith(suffix):
            return compression, len(suffix)
    return None, 0


def detect_format(filename: str) -> Tuple[str, Optional[str]]:
    """``(format, compression)`` for a file name, from its extensions (case-insensitive): the
    compression from the last one (``.gz .zst .zstd .bz2 .xz``), the format from the one
    before it (``.jsonl .json``, ``.csv``, ``.tsv``, ``.parquet .pq``; a compressed Parquet
    file is no Parquet file, read as text, skipped as binary); anything else is text
    (``man1/ls.1.gz``, ``notes.txt.zst``), whose compression its content decides when read."""
    # every suffix looked at is one dot and letters: the name from its second last dot on decides
    # (".jsonl.gz", ".txt"), and a folder of 100,000 files holds few kinds of ending
    low = filename.lower()
    last = low.rfind(".")
    if last < 0:
        return "text", None
    before = low.rfind(".", 0, last)
    return _format_of_ending(low[before if before >= 0 else last:])



@functools.lru_cache(maxsize=4096)
def _format_of_ending(low: str) -> Tuple[str, Optional[str]]:
    compression, cut = _compression_of(low)
    base = low[: len(low) - cut]
    for fmt, suffixes in _DATA_SUFFIXES.items():
        if base.endswith(suffixes) and not (fmt == "parquet" and compression):
            return fmt, compression
    return "text", compression


def _data_suffix_len(relpath: str, fmt: str) -> int:
    """Length of the data extension of ``relpath`` with its compression suffix (0 for text
    files, whose extension is kept)."""
    if fmt in ("signatures", "rpv2-minhash"):  # Parquet files read as signatures
        fmt = "parquet"
    if fmt not in _DATA_SUFFIXES:
        return 0
    low = relpath.lower()
    _, cut = _compression_of(low)
    base = low[: len(low) - cut]
    for suffix in _DATA_SUFFIXES[fmt]:
        if base.endswith(suffix):
            return cut + len(suffix)
    return 0


def output_relpath(src: Source, output_format: str) -> str:
    """The name under ``kept/`` for the records kept from ``src``.

    ``same`` keeps ``src.relpath``; ``jsonl`` / ``parquet`` replace the data extension
    (``.jsonl.gz`` -> ``.jsonl``: the compression is dropped). A text file has no data
    extension, so its name gets the new one appended (``a.py`` -> ``a.py.jsonl``): two text
    files ``a.py`` and ``a.txt`` cannot collide.
    """
    if output_format not in OUTPUT_FORMATS:
        raise ConfigError(
            f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}"
        )
    if output_format == "same":
        return src.relpath
    cut = _data_suffix_len(src.relpath, src.format)
    stem = src.relpath[: len(src.relpath) - cut] if cut else src.relpath
    return stem + "." + output_format


def output_relpaths(sources: Sequence[Source], output_format: str) -> List[str]:
    """:func:`output_relpath` of every source; InputError when two sources would be written to
    the same name (``a.json`` and ``a.jsonl`` both become ``a.jsonl`` with ``jsonl`` output)."""
    names = [output_relpath(s, output_format) for s in sources]
    clash = _first_clash(names)
    if clash is not None:
        i, j = clash
        raise InputError(
            f"two inputs would be written to the same output name {names[i]!r} "
            f"(output format {output_format}): {sources[i].name} and {sources[j].name}"
        )
    return names


# --------------------------------------------------------------------------- discovery


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
                 folders: Sequence[str] = ()) -> List[Tuple[str, str, bool]]:
    """Regular files under ``folder`` as ``(path, relpath, via_link)``, hidden entries and
    ``__pycache__`` skipped, sorted by path components; ``via_link``: a symbolic link is on the
    way. A link to a folder that one of ``folders`` (the real paths of the folder inputs) walks
    anyway is not followed (counted in ``links["read_once"]``); any other link (to a file or a
    folder) whose target lies outside ``roots`` (the real paths of the input set) is followed
    only with ``follow_symlinks``, else counted in ``links["not_followed"]``; a folder is walked
    once (a link cycle ends)."""
    if links is None:
        links = {"read_once": 0, "not_followed": 0}
    found: List[Tuple[Tuple[str, ...], str, bool]] = []
    seen_dirs = set()

    def walk(path: str, parts: Tuple[str, ...], via_link: bool) -> None:
        try:
            st = os.stat(path)
        except OSError as e:
            raise InputError(f"cannot read folder {_SHOW(_posix(path))} ({e.strerror or e})") from None
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:  # a link cycle
            return
        seen_dirs.add(key)
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as e:
            raise InputError(f"cannot read folder {_SHOW(_posix(path))} ({e.strerror or e})") from None
        for entry in entries:
            if _skip_name(entry.name):
                continue
            sub = parts + (entry.name,)
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
                walk(entry.path, sub, via_link or is_link)
            elif is_file:
                found.append((sub, entry.path, via_link or is_link))
            # other things (sockets, named pipes, devices, broken links) are not documents

    walk(folder, (), False)
    found.sort(key=lambda t: t[0])
    return [(path, "/".join(parts), via_link) for parts, path, via_link in found]


def _join_name(base: str, rel: str) -> str:
    base = _posix(base)
    if base in (".", "./"):
        return rel
    return base.rstrip("/") + "/" + rel if base.rstrip("/") else "/" + rel


def _strip_name(name: str) -> str:
    """``name`` made relative: no leading ``/``, no ``.`` or ``..`` parts."""
    parts = [p for p in name.split("/") if p not in ("", ".", "..")]
    return "/".join(parts)


def _first_clash(relpaths: Sequence[str]) -> Optional[Tuple[int, int]]:
    """First pair of output names that would collide: equal (ignoring case, since kept/ may be
    on a case-insensitive file system) or one being a folder of the other."""
    seen: Dict[str, int] = {}
    for i, r in enumerate(relpaths):
        key = r.casefold()
        if key in seen:
            return seen[key], i
        seen[key] = i
    dirs: Dict[str, int] = {}
    done = set()  # folders whose own folders are in dirs already (files of one folder come together)
    for i, r in enumerate(relpaths):
        head, sep, _ = r.casefold().rpartition("/")
        if (head, sep) in done:
            continue
        done.add((head, sep))
        parts = head.split("/") if sep else []
        for k in range(1, len(parts) + 1):
            dirs.setdefault("/".join(parts[:k]), i)
    for i, r in enumerate(relpaths):
        j = dirs.get(r.casefold())
        if j is not None:
            return min(i, j), max(i, j)
    return None


def _clashing(relpaths: Sequence[str]) -> set:
    """Indices of every relpath that collides with another one."""
    out = set()
    by_key: Dict[str, List[int]] = {}
    for i, r in enumerate(relpaths):
        by_key.setdefault(r.casefold(), []).append(i)
    for idx in by_key.values():
        if len(idx) > 1:
            out.update(idx)
    named: Dict[str, List[int]] = {}  # a folder: the relpaths that name one of its folders (or itself)
    for i, r in enumerate(relpaths):
        head, sep, _ = r.casefold().rpartition("/")
        hits = named.get((head, sep))
        if hits is None:
            parts = head.split("/") if sep else []
            hits = named[head, sep] = [j for k in range(1, len(parts) + 1)
                                  for j in by_key.get("/".join(parts[:k]), ())]
        if hits:
            out.add(i)
            out.update(hits)
    return out


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
        return _discover(inputs, input_format, follow_symlinks)
    finally:
        if enabled:
            gc.enable()


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
    found = _once(found, links, file_stats)
    root = _common_folder(bases)
    names = [_SHOW(f.name) for f in found]
    relpaths = [_SHOW(rel) for rel in _relatives([f.path for f in found], root)]
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

    out = Sources(links=links, file_stats=file_stats)
    for f, name, rel in zip(found, names, relpaths):
        fmt, comp = detect_format(_basename(f.path)) if input_format == "auto" else (input_format, None)
        out.append(Source(path=f.path, name=name, relpath=rel, format=fmt, compression=comp, walked=f.walked))
    return out


def _basename(path: str) -> str:
    """:func:`neardup.io.storage.fs.basename`; a local POSIX path's at once."""
    if os.sep == "/" and "://" not in path:
        return path.rpartition("/")[2]
    return _fs.basename(path)


@dataclass(frozen=True)
class _Found:
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
    """:func:`_relative` of each of ``paths``, the absolute form of each folder made once (a
    folder of 100,000 files: not one ``abspath`` a file). ``abspath(HEAD/NAME)`` is
    ``abspath(HEAD) + "/" + NAME`` for a plain NAME when that folder is not the root."""
    if os.sep != "/" or root is None:
        return [_relative(p, root) for p in paths]
    prefix = root.rstrip("/") + "/"
    heads: Dict[str, Optional[str]] = {}
    out = []
    for p in paths:
        head, sep, name = p.rpartition("/")
        full = None
        if head and name not in ("", ".", "..") and ("://" not in p or _paths.os_path(p) is not None):
            base = heads.get(head)
            if base is None:
                base = heads[head] = os.path.abspath(head)
            if not base.endswith("/"):  # "/" or "//": abspath keeps what the plain join would not
                full = base + "/" + name
        if full is not None and full.startswith(prefix):
            out.append(full[len(prefix):])
        else:
            out.append(_relative(p, root))
    return out


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
    for i, f in enumerate(found):
        if f.remote:
            key: Any = ("url", f.path.rstrip("/"))
        else:
            try:
                st = os.stat(f.path)
            except OSError as e:
                raise InputError(f"cannot read {_SHOW(f.name)} ({e.strerror or e})") from None
            if not stat.S_ISREG(st.st_mode):
                raise InputError(f"not a regular file: {_SHOW(f.name)}")
            key = (st.st_dev, st.st_ino)
            if file_stats is not None:
                file_stats[f.path] = (st.st_size, st.st_mtime_ns)
        keys.append(key)
        j = first.get(key)
        if j is None:
            first[key] = i
            continue
        other = found[j]
        if not (f.via_link or other.via_link):
            if f.remote or os.path.realpath(f.path) == os.path.realpath(other.path):  # one path named twice
                if other.name == f.name:
                    raise InputError(f"same file reached twice: {_SHOW(f.name)}")
                raise InputError(f"same file reached twice: {_SHOW(other.name)} and {_SHOW(f.name)}")
            links["hard_links"] += 1  # two names of one file: the first is read
            continue
        links["read_once"] += 1
        if other.via_link and not f.via_link:
            first[key] = i
    return [f for i, f in enumerate(found) if first[keys[i]] == i]


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
    def walk(folder: str) -> None:
        prefix = _join_name(folder, "")  # _join_name(folder, rel) is prefix + rel: made once a folder
        for p, rel, via_link in _walk_folder(folder, roots, follow_symlinks, links, folders):
            found.append(_Found(p, prefix + rel, True, via_link))

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


# --------------------------------------------------------------------------- in-memory tables


def _as_arrow_table(table: Any):
    import pyarrow as pa

    if isinstance(table, pa.Table):
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.Table.from_batches([table])
    module = type(table).__module__ or ""
    if module.startswith("pandas"):
        import pandas as pd  # noqa: F401  (lazy: only for pandas input)

        return pa.Table.from_pandas(table, preserve_index=False)
    if module.startswith("datasets"):
        # a Hugging Face datasets.Dataset: its Arrow table, with any selection applied
        ds = table
        if getattr(ds, "_indices", None) is not None:
            ds = ds.flatten_indices()
        inner = ds.data
        return getattr(inner, "table", inner)
    raise TypeError(
        "table_source needs a pyarrow.Table, pyarrow.RecordBatch, pandas.DataFrame or "
        f"datasets.Dataset, got {type(table).__name__}"
    )


def table_source(table: Any, name: str = "<table>") -> Source:
    """Wrap an in-memory table (pyarrow, pandas or Hugging Face datasets) as a Source."""
    tbl = _as_arrow_table(table)
    name = display_name(name)
    return Source(path="<table>", name=name, relpath=_strip_name(name) or name, format="table",
                  compression=None, table=tbl)


# --------------------------------------------------------------------------- size


def estimate_documents(sources: Sequence[Source]) -> Optional[int]:
    """About how many documents the sources hold, for the progress bar's ETA (cheap: Parquet row
    counts from the footer, one per text file, and for uncompressed JSONL the file size over the
    mean line length of its first MiB); None when a compressed file makes it a guess."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    total = 0
    for src in sources:
        if src.format not in ("text", "table") and _fs.os_path(src.path) is None:
            return None  # a request per file only for a progress bar's ETA: not worth it
        try:
            if src.format == "text":
                total += 1
            elif src.format == "table":
                total += src.table.num_rows
            elif src.format == "parquet":
                total += pq.ParquetFile(src.path).metadata.num_rows
            elif src.compression is None:
                size = os.path.getsize(src.path)
                with open(src.path, "rb") as f:
                    head = f.read(1 << 20)
                lines = head.count(b"\n") or 1
                total += int(round(size / (len(head) / lines))) if head else 0
            else:
                return None
        except (OSError, ValueError, pa.ArrowException):
            return None
    return total
