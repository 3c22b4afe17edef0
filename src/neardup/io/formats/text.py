"""Text files, one document a file: their reader (a compressed one decompressed, known by its
magic bytes; a file found by a walk that is binary, not UTF-8 or compressed and unreadable is
skipped, not an error), and the writer of a kept one (copied whole, or as a record
``{"id": NAME, "text": CONTENT}``), with the copy of many kept files at once by a pool of threads."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ...kernels.arrays import arrow
from ..storage.local import naming
from ..batch import BINARY, COMPRESSED_UNREADABLE, NOT_UTF8, Batch, ReadContext
from ..compiled import compiled_loop
from ..compressed import Unreadable, decompress, kind_of
from ..kernel_copy import SourceError, copy_fd
from ..opening import cannot_read, open_regular
from ..sources import Source
from ..storage import fs as _fs


def read_text(ctx: ReadContext) -> Iterator[Batch]:
    """One document, the whole file (see :func:`text_document`)."""
    src = ctx.src
    try:
        with _fs.open_input(src.path) as f:
            data = f.read()
    except OSError as e:
        raise cannot_read(src, e) from None
    yield from text_document(ctx, data)


def text_document(ctx: ReadContext, data: bytes) -> Iterator[Batch]:
    """The document of a text file whose bytes are ``data``, decompressed first when they start
    with the magic bytes of gzip, zstd, bz2 or xz, whatever the file's name
    (:mod:`neardup.io.compressed`: ``man1/ls.1.gz`` is the text of a man page). A file found by a
    walk that is binary (a NUL byte), not UTF-8 or compressed and unreadable is skipped
    (``Batch.skipped``): a folder of code holds images and compiled files; a file named on its
    own is an error (or a rejected entry)."""
    src = ctx.src
    kind = kind_of(data)
    if kind is not None:
        try:
            data = decompress(data, kind)
        except Unreadable as e:
            if _is_text(data):  # "BZh9..." is a text as well as the start of a bz2 stream
                kind = None
            elif src.walked:
                yield from ctx.skipped(f"{COMPRESSED_UNREADABLE} ({e})")
            else:
                yield from ctx.problem(f"{COMPRESSED_UNREADABLE} ({e})")
            if kind is not None:
                return
    inside = f" of its {kind} data" if kind else ""
    nul = data.find(b"\0")
    if nul >= 0:
        if src.walked:
            yield from ctx.skipped(f"{BINARY} (a NUL byte at byte {nul}{inside})")
        else:  # named: the user asked for it, and its shingles would be a binary's (or UTF-16's) bytes
            hint = "" if kind else " (UTF-16 text must be converted to UTF-8)"
            yield from ctx.problem(f"a {BINARY}, not text (a NUL byte at byte {nul}{inside}){hint}")
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if src.walked:
            yield from ctx.skipped(f"{NOT_UTF8} (invalid UTF-8 at byte {e.start}{inside})")
            return
        yield from ctx.problem(f"invalid UTF-8 at byte {e.start}{inside}")
        return
    yield Batch(
        source_index=ctx.source_index,
        rows=np.zeros(1, dtype=np.int64),
        text=arrow([text], type=pa.large_string()),
        ids=arrow([src.relpath], type=pa.string()) if ctx.id_column is not None else None,
        scores=np.full(1, np.nan) if ctx.score_column is not None else None,
        rejected=[],
    )


def plain_text(data: bytes) -> bool:
    """Whether the bytes ``data`` of a text file are plain UTF-8 text (not compressed, no NUL
    byte), taken as they are as its document by :func:`text_document`: not compressed as
    :func:`~neardup.io.compressed.kind_of` knows it, and :func:`_is_text`."""
    if kind_of(data) is not None:
        return False
    if data.isascii():  # most files: UTF-8 as they are, no str made to tell (a NUL is ASCII)
        return b"\0" not in data
    return _is_text(data)


def files_batch(sources: List[Source], data, lengths: np.ndarray, which: np.ndarray, options: dict) -> Batch:
    """One batch of the text files ``sources[i]`` for ``i`` in ``which`` whose bytes are ``data``
    (a bytes-like object), one file after another, ``lengths`` bytes each, each plain text
    (:func:`plain_text`): one document a file, as :func:`text_document` makes it (``options``
    those of :func:`neardup.io.read_source`), and ``Batch.sources`` naming each row's file."""
    n = len(lengths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    text = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(
        memoryview(data).toreadonly())])  # read-only, as any Arrow array's texts: the kernels' compiled type
    return Batch(
        source_index=int(which[0]),
        rows=np.zeros(n, dtype=np.int64),
        text=text,
        ids=arrow([sources[i].relpath for i in which], type=pa.string())
        if options.get("id_column") is not None else None,
        scores=np.full(n, np.nan) if options.get("score_column") is not None else None,
        rejected=[],
        sources=np.asarray(which, dtype=np.int32),
    )


def _is_text(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 text without a NUL byte (no gzip, zstd or xz header is)."""
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_HEAD = 1 << 16  # what read_local_file reads first of a large file


def read_local_file(src: Source) -> bytes:
    """The bytes of a local file (of a large binary one, its first _HEAD bytes, which hold its
    first NUL: all text_document needs to skip it), read with one open: checked to be a regular file first, as
    :func:`~neardup.io.opening.check_local_file` does (opened without blocking)."""
    fd, size = open_regular(src)
    try:
        parts = []
        want = max(size, 0) + 1  # one more than its size: the end is seen at once
        got = 0
        if size > _HEAD:  # a NUL in a large file's first bytes, not compressed: a binary file (a disk
            head = os.read(fd, _HEAD)  # image, a model's weights), its first NUL there: the rest unread
            if b"\0" in head and kind_of(head) is None:
                return head
            parts.append(head)
            got = len(head)
        while True:
            chunk = os.read(fd, max(want, 1 << 16))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
            if got >= want - 1 and len(chunk) < max(want, 1 << 16):
                break  # all of its size, and less than asked: the end (no empty read to tell it)
        return parts[0] if len(parts) == 1 else b"".join(parts)
    except OSError as e:
        raise cannot_read(src, e) from None
    finally:
        os.close(fd)


class FilesRead(NamedTuple):
    """What :func:`read_local_files` read of a list of files: ``others``, by their place in the
    list, the files that are not plain text (:func:`plain_text`) or were read one by one: the
    bytes of each, or the error reading it raised; ``data`` the bytes of the files read by the
    compiled loop, one after another, file i's ``data[ends[i - 1]:ends[i]]`` (from 0 for the
    first) for each file not in ``others``: those of files one after another that are not in
    ``others`` lie one after another in ``data``."""

    data: np.ndarray
    ends: np.ndarray
    others: Dict[int, Any]


_TASK_BYTES = 4 << 20  # the buffer of one call of the compiled loop (a file that does not fit: one by one)
_OPEN_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)  # as open_regular
# neardup.kernels.fileread.read_files where it runs (Linux, numba), else None: files read one by one;
# warmed with the types of the real calls (names read-only, as _path_blob gives them): compiled once
_compiled_reader = compiled_loop("fileread", "read_files", "reading_available",
                                 np.frombuffer(b"\0", np.uint8), np.zeros(0, np.int64), _OPEN_READ, 0)


def read_local_files(files: List[Source]) -> FilesRead:
    """The local text files ``files`` read (see :class:`FilesRead`): by the compiled loop of
    :func:`neardup.kernels.fileread.read_files` where it runs (each file checked to be a regular
    file and read with one ``read`` call, without Python's lock, up to _TASK_BYTES in all); the
    others, and those it did not read whole, by :func:`read_local_file`, which raises what went
    wrong, naming the file. An error is given back in ``others``, not raised (the caller raises
    it in the file's turn)."""
    n = len(files)
    data, ends = np.zeros(0, np.uint8), np.zeros(n, np.int64)
    clean = np.zeros(n, np.bool_)
    read_files = _compiled_reader() if n else None
    if read_files is not None:
        blob = _path_blob([_fs.local_path(src.path) for src in files])
        if blob is not None:  # else a NUL inside a path: read_local_file says so
            data, ends, clean = read_files(blob[0], blob[1], _OPEN_READ, _TASK_BYTES)
    others: Dict[int, Any] = {}
    for i in np.flatnonzero(~clean).tolist():
        start = int(ends[i - 1]) if i else 0
        if ends[i] > start:  # read whole: plain or not as the rule says
            content = data[start:ends[i]].tobytes()
            if not plain_text(content):
                others[i] = content
            continue
        try:
            others[i] = read_local_file(files[i])
        except Exception as e:  # noqa: BLE001  (raised by the consumer in the file's turn)
            others[i] = e
    return FilesRead(data, ends, others)


def write_kept_text(src: Source, keep: np.ndarray, out_path: str, target: str) -> int:
    """A text file whose ``keep`` is ``[0]`` written to ``out_path`` as ``target`` (nothing is
    written for ``[]``): ``text`` copies it as it is, ``jsonl`` / ``parquet`` write the record
    ``{"id": ID, "text": content}``, ID the file's id by the one rule of every command (its path
    below the inputs' common folder, :func:`neardup.io.columns.positional_ids`, as
    removed.parquet names it), never the path as typed. Returns how many records were written."""
    if len(keep) and (len(keep) > 1 or keep[0] != 0):
        raise ValueError(f"keep_rows of a text file can only be [0] or empty, got {keep[:5].tolist()}")
    if len(keep) == 0:
        return 0
    if target == "text":
        with _fs.atomic_write(out_path) as out:
            try:
                with _fs.open_input(src.path) as fi:
                    while True:
                        chunk = fi.read(1 << 20)
                        if not chunk:
                            break
                        out.write(chunk)
            except OSError as e:
                raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
        return 1
    content = _read_text_file(src)
    with _fs.atomic_write(out_path) as out:
        if target == "jsonl":
            line = json.dumps({"id": src.relpath, "text": content}, ensure_ascii=False) + "\n"
            out.write(line.encode("utf-8"))
        else:
            import pyarrow.parquet as pq

            table = pa.table({"id": arrow([src.relpath], pa.string()),
                              "text": arrow([content], pa.string())})
            pq.write_table(table, out)
    return 1


def _read_text_file(src: Source) -> str:
    try:
        with _fs.open_input(src.path) as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
    kind = kind_of(data)
    if kind is not None:  # as read: decompressed whatever its name
        try:
            data = decompress(data, kind)
        except Unreadable as e:
            if not _is_text(data):
                raise InputError(f"{src.name}: {COMPRESSED_UNREADABLE} ({e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{src.name}: invalid UTF-8 at byte {e.start}") from None


_COPIES_A_TASK = 256  # files a thread of the copy pool copies at least: a thread per few files cost more
_OPEN_IN = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_OPEN_OUT = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)  # open(dst, "wb")
# neardup.kernels.filecopy.copy_files where it runs (Linux, numba), else None: files copied one by one;
# warmed with the types of the real calls (names read-only, as _path_blob gives them): compiled once
_compiled_copier = compiled_loop("filecopy", "copy_files", "files_available",
                                 np.frombuffer(b"\0", np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64), 0, 0)


def _copy_file(src: Source, dst: str) -> int:
    """The local text file ``src`` copied whole to the new local file ``dst`` (plain copies:
    never a link, a kept file shares no inode with an input); returns its bytes."""
    try:
        fd = os.open(_fs.local_path(src.path), _OPEN_IN)
    except OSError as e:
        raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
    try:
        fo = os.open(dst, _OPEN_OUT, 0o666)
        try:
            return copy_fd(fd, fo)
        except SourceError as e:
            raise InputError(f"{src.name}: cannot read file ({e.reason})") from None
        except OSError as e:  # the copy's writes (a full disk) name no path: the one line must
            raise naming(e, dst)
        finally:
            os.close(fo)
    finally:
        os.close(fd)


def _copy_files(items: List[Tuple[Source, str]], sizes: Optional[List[int]]) -> int:
    """``items`` copied in order (see :func:`_copy_file`): by the compiled loop of
    :func:`neardup.kernels.filecopy.copy_files` where it can (``sizes``: each file's size as the
    run found it, see :func:`_copy_compiled`); from a file it could not copy on,
    one by one here (which raises what went wrong, naming the file, or copies it the way the
    file system allows: the compiled loop is not tried again for each file). Returns their bytes."""
    copy_files = _compiled_copier()
    k, copied = _copy_compiled(copy_files, items, sizes) if copy_files is not None else (0, 0)
    for src, dst in items[k:]:
        copied += _copy_file(src, dst)
    return copied


def _copy_compiled(copy_files, items: List[Tuple[Source, str]], sizes: Optional[List[int]]) -> Tuple[int, int]:
    """How many of ``items`` (from the first) the compiled loop ``copy_files`` copied whole (all
    of them, or up to the first that failed, or whose path holds a NUL byte, which no path can),
    and their bytes: each file's size as ``sizes`` has it (-1 where not known; None: none
    known) spares the loop
    the call that finds its end (a file that changed size since is copied whole all the same)."""
    n = len(items)
    blob = _path_blob([_fs.local_path(src.path) for src, _ in items] + [dst for _, dst in items])
    if blob is None:  # a NUL inside a path: os.open refuses it, and says so
        return 0, 0
    data, starts = blob
    return copy_files(data, starts[:n], starts[n:], _OPEN_IN, _OPEN_OUT, 0o666,
                      None if sizes is None else np.array(sizes, np.int64))


def _path_blob(paths: List[str]):
    """The paths as the compiled loops take them: ``(bytes, starts)``, their file-system bytes
    one after another, each ended by a NUL (uint8), and where each starts; None where a path
    holds a NUL itself (no file has such a path)."""
    joined = "\0".join(paths) + "\0"
    if joined.isascii():  # a byte a character: the paths encoded at once
        blob, lengths = joined.encode(), [len(p) for p in paths]
    else:
        encoded = [os.fsencode(p) for p in paths]
        blob, lengths = b"\0".join(encoded) + b"\0", [len(p) for p in encoded]
    if blob.count(b"\0") != len(paths):
        return None
    starts = np.zeros(len(paths), np.int64)
    np.cumsum(np.array(lengths[:-1], np.int64) + 1, out=starts[1:])
    return np.frombuffer(blob, np.uint8), starts


def copy_local_text_files(copies: List[Tuple[Source, str]], workers: int = 8,
                          sizes: Optional[List[int]] = None) -> int:
    """Local text files copied whole to local paths (``(source, destination)``) by a pool of
    threads (the kernel copies each file: ``sendfile``, in a compiled loop without Python's
    lock where it can; ``sizes``: each file's size as the run found it, -1 where
    not known, in the order of ``copies``), their folders made once each (see
    :func:`neardup.io.writer.copy_text_files`); the first file that fails, in order, raises.
    Each thread copies one span of the list, in order: the spans start in different folders, so
    that the threads seldom wait for one another's lock on a folder they all add files to (256
    files a task in turn had all of them in one folder); a span ends at its first failure.
    Returns the bytes copied."""
    if not copies:
        return 0
    if os.sep == "/":  # dirname(HEAD/NAME) depends on HEAD alone: one call a folder, not one a file
        folders = {os.path.dirname(head + "/x") for head in {dst.rpartition("/")[0] for _, dst in copies}}
    else:
        folders = {os.path.dirname(dst) for _, dst in copies}
    for folder in sorted(folders):
        os.makedirs(folder, exist_ok=True)
    n = len(copies)
    spans = min(workers, -(-n // _COPIES_A_TASK))
    if spans <= 1:
        return _copy_files(copies, sizes)
    bounds = [n * k // spans for k in range(spans + 1)]
    with ThreadPoolExecutor(max_workers=spans, thread_name_prefix="neardup-copy") as pool:
        done = [pool.submit(_copy_files, copies[a:b], None if sizes is None else sizes[a:b]) for a, b in zip(bounds, bounds[1:])]
        return sum(future.result() for future in done)
