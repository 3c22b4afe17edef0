"""What a source is: which file to read, in which format, and under which name its kept records
go (:class:`Source`; what the user typed becomes a list of them in :mod:`neardup.io.discovery`);
:func:`table_source` wraps an in-memory table the same way;
:func:`estimate_documents` says about how many documents they hold (for a progress bar).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import ConfigError, InputError
from .storage import fs as _fs

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
    relpath: where its kept records go under ``kept/`` (see :func:`neardup.io.discovery.discover`), with the same
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


_new = object.__new__


def make_source(path: str, name: str, relpath: str, format: str, compression: Optional[str], walked: bool) -> Source:
    """``Source(path, name, relpath, format, compression, walked=walked)`` (a file's: ``table``
    None), made without the ``__init__`` of a frozen dataclass, which sets each field through
    ``object.__setattr__`` (discover makes one a file: 100,000 of them took twice as long): the
    same fields in the same order, an equal object."""
    src = _new(Source)
    src.__dict__.update(path=path, name=name, relpath=relpath, format=format, compression=compression, table=None,
                        walked=walked)
    return src


INPUT_FORMATS = ("auto", "text", "signatures", "rpv2-minhash")
SIGNATURE_FORMATS = ("signatures", "rpv2-minhash")  # Parquet files read as signatures (no texts)


class Sources(list):
    """What :func:`neardup.io.discovery.discover` found: the :class:`Source` list, and ``links``, what it did with
    symbolic links: ``read_once`` (a link to a file of the input set, which is read once under
    its own name), ``not_followed`` (links leading out of the input set, left out unless
    ``follow_symlinks``), and ``hard_links`` (further paths of a file already found, left out)."""

    def __init__(self, items=(), links: Optional[Dict[str, int]] = None,
                 file_stats: Optional[Dict[str, Tuple[int, int]]] = None):
        super().__init__(items)
        self.links = {"read_once": 0, "not_followed": 0, "hard_links": 0, **(links or {})}
        self._file_stats = file_stats if file_stats is not None else {}
        self._stats_later: Optional[Tuple[List[str], List[int], List[int]]] = None
        # (paths, JSON, sizes, mtimes): the JSON of ``[path, path, size, mtime_ns]`` of each of
        # the files ``paths`` (discover's, made beside its sources; None: not made), which the run's
        # identity takes where the sources are those files, each named by its path
        self.inputs_json: Optional[Tuple[List[str], str, List[int], List[int]]] = None
        # the paths of the files (discover's, in its order) where each was found by a walk with no
        # symbolic link on its way, itself none (the check of the output folder against the
        # inputs lists no folder for its links then); None: not known
        self.unlinked: Optional[List[str]] = None

    @property
    def file_stats(self) -> Dict[str, Tuple[int, int]]:
        """{path: (size, mtime_ns)} of the local files, as discover's stat found them (the run's
        identity takes them from here rather than asking each file again, where it has not
        their JSON: ``inputs_json``)."""
        if self._stats_later is not None:
            paths, sizes, mtimes = self._stats_later
            self._file_stats.update(zip(paths, zip(sizes, mtimes)))
            self._stats_later = None
        return self._file_stats

    def stats_of(self, paths: List[str], sizes: List[int], mtimes: List[int]) -> None:
        """The size and mtime_ns of each of the files ``paths``, which :attr:`file_stats` takes
        in when first read: a dict of 100,000 paths is 0.02-0.03 CPU-s that a run over a folder
        of files (which has ``inputs_json``) does not spend."""
        self._stats_later = (paths, sizes, mtimes)


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
    if fmt in SIGNATURE_FORMATS:
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


def marked_relpath(src: Source) -> str:
    """The name under ``marked/`` (``--mark``) for ``src``: a text file's as JSON Lines (``a.py``
    -> ``a.py.jsonl``), any other file's as it stands."""
    return output_relpath(src, "jsonl" if src.format == "text" else "same")


def output_relpaths(sources: Sequence[Source], output_format: str, mark: bool = False) -> List[str]:
    """:func:`output_relpath` (``mark``: :func:`marked_relpath`) of every source; InputError when
    two sources would be written to the same name (``a.json`` and ``a.jsonl`` both become
    ``a.jsonl`` with ``jsonl`` output; a text file ``a.py`` marked beside an input ``a.py.jsonl``)."""
    names = [marked_relpath(s) if mark else output_relpath(s, output_format) for s in sources]
    clash = _first_clash(names)
    if clash is not None:
        i, j = clash
        where = (f"the same name in marked/ {names[i]!r} (a text file is marked as JSON Lines)" if mark else
                 f"the same output name {names[i]!r} (output format {output_format})")
        raise InputError(f"two inputs would be written to {where}: {sources[i].name} and {sources[j].name}")
    return names


# --------------------------------------------------------------------------- names


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
    """Indices of every relpath that collides with another one. None collides (the usual case),
    told from sets, without a dict of lists: distinct keys, none of them one of the folders of
    another (the folders of each distinct folder named once: 100,000 files, ~0.03 CPU-s less)."""
    keys = list(map(str.casefold, relpaths))
    unique = set(keys)
    if len(unique) == len(keys):
        folders = set()
        for head in {k.rpartition("/")[0] for k in keys if "/" in k}:
            parts = head.split("/")
            folders.update("/".join(parts[:k]) for k in range(1, len(parts) + 1))
        if unique.isdisjoint(folders):
            return set()
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
