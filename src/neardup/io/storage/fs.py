"""One set of file operations for local paths and URLs (``s3://``, ``gs://``, ``hf://``, any
fsspec protocol).

Every function takes a path as the user typed it and hands it to the files of its kind
(:func:`files_of`: :class:`~.local.LocalFiles`, plain ``os`` calls; or
:class:`~.remote.RemoteFiles`, fsspec), the one place where local and remote part ways. Paths come
back in the form they were given: URLs stay URLs, so a name built here can be passed to any other
function here.

Writes are atomic per file: :func:`atomic_write` makes a local file appear under its name only
once complete (a temporary name and a rename), and an object in a store only when its upload
completes (a failed write aborts the upload).

A remote problem is one line, never a traceback (:mod:`.remote`). Opening or reading a file that
cannot be read raises OSError, remote or local alike (a missing object is ``FileNotFoundError``),
so that readers report both the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Callable, ContextManager, List, Optional, Protocol, Tuple

from .local import LocalFiles, LockedError, new_temp
from .paths import (any_remote, basename, dirname, has_magic, is_url, join, local_path, os_path, protocol,
                    redact, userinfo_span)
from .remote import RemoteFiles, remote_errors



class Files(Protocol):
    """The file operations of one kind of storage, on full paths of that kind: what
    :class:`~.local.LocalFiles` (``os``) and :class:`~.remote.RemoteFiles` (fsspec) both
    offer; the functions below and :class:`~.folder.Folder` ask nothing else of them."""

    is_remote: bool

    def exists(self, path: str) -> bool: ...
    def isdir(self, path: str) -> bool: ...
    def isfile(self, path: str) -> bool: ...
    def stat(self, path: str) -> Tuple[int, int]: ...
    def listdir(self, path: str) -> List[Tuple[str, bool]]: ...
    def walk_files(self, path: str, skip: Optional[Callable[[str], bool]] = None) -> List[Tuple[Tuple[str, ...], str]]: ...
    def file_sizes(self, path: str) -> List[Tuple[Tuple[str, ...], int]]: ...
    def glob_entries(self, pattern: str) -> List[Tuple[str, bool]]: ...
    def makedirs(self, path: str) -> None: ...
    def remove_tree(self, path: str) -> None: ...
    def remove(self, path: str) -> None: ...
    def move(self, source: str, target: str) -> None: ...
    def open_input(self, path: str) -> IO[bytes]: ...
    def atomic_write(self, path: str) -> ContextManager[IO[bytes]]: ...
    def read_bytes(self, path: str) -> bytes: ...
    def read_ranges(self, path: str, starts: List[int], ends: List[int]) -> List[bytes]: ...
    def check_reachable(self, path: str) -> None: ...
    def lock(self, path: str, wait: bool, what: str) -> ContextManager[None]: ...


_LOCAL = LocalFiles()
_REMOTE = RemoteFiles()


def files_of(path) -> Files:
    """The files ``path`` is one of: local (``os``) or in a store (fsspec)."""
    return _REMOTE if is_url(path) else _LOCAL


@dataclass(frozen=True)
class FileInfo:
    """size in bytes and modification time in nanoseconds (0 where the store has none); a
    fingerprint of an input for a run's resume check."""

    size: int
    mtime_ns: int


def exists(path: str) -> bool:
    return files_of(path).exists(path)


def isdir(path: str) -> bool:
    return files_of(path).isdir(path)


def isfile(path: str) -> bool:
    return files_of(path).isfile(path)


def info(path: str) -> FileInfo:
    """Size and modification time of a file; InputError when it is not there."""
    return FileInfo(*files_of(path).stat(path))


def infos(paths) -> dict:
    """``{path: FileInfo}`` of many files: local ones by ``stat``, remote ones asked for together
    (one request each: thousands of files one after another would take minutes)."""
    paths = list(paths)
    remote = [p for p in paths if files_of(p).is_remote]
    out = {p: info(p) for p in paths if not files_of(p).is_remote}
    if remote:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(32, len(remote))) as pool:
            out.update(zip(remote, pool.map(info, remote)))
    return out


def listdir(path: str) -> List[Tuple[str, bool]]:
    """``(name, is_dir)`` of the entries of a folder, sorted by name."""
    return files_of(path).listdir(path)


def walk_files(path: str, skip=None) -> List[Tuple[Tuple[str, ...], str]]:
    """Every file under a folder as ``(parts of its path inside the folder, full path)``,
    sorted by parts; a name for which ``skip(name)`` is true is left out with everything under
    it. Symbolic links to local folders are not followed (``discover`` has its own walk, which
    follows them once each)."""
    return files_of(path).walk_files(path, skip)


def file_sizes(path: str) -> List[Tuple[Tuple[str, ...], int]]:
    """``(parts of its path inside the folder, size in bytes)`` of every file under a folder,
    sorted; one listing of the store for a URL (no request per file). Nothing when the folder
    is not there."""
    return files_of(path).file_sizes(path)


def glob(pattern: str) -> List[str]:
    """Paths matching a glob (``**`` spans folders), sorted; URLs come back as URLs."""
    return [m for m, _ in glob_entries(pattern)]


def glob_entries(pattern: str) -> List[Tuple[str, bool]]:
    """``(path, is_dir)`` of the matches of a glob, sorted (one listing of a store)."""
    return files_of(pattern).glob_entries(pattern)


def makedirs(path: str) -> None:
    """Create a folder and its parents (a no-op on object stores, which have no folders)."""
    files_of(path).makedirs(path)


def remove_tree(path: str) -> None:
    """Remove a folder and everything under it, or a file; nothing when it is not there."""
    files_of(path).remove_tree(path)


def remove(path: str) -> None:
    """Remove one file; nothing when it is not there."""
    files_of(path).remove(path)


def move(source: str, target: str) -> None:
    """Move a file or folder to ``target`` on the same storage, replacing a file there (a rename
    locally; a copy inside the store and a delete for a URL)."""
    files_of(source).move(source, target)


def open_input(path: str) -> IO[bytes]:
    """The raw bytes of a file, as a seekable binary file object (close it, or use ``with``).
    A file that cannot be read raises OSError, remote or local alike; a missing extra is a
    ConfigError."""
    return files_of(path).open_input(path)


def open_read(path: str, compression: Optional[str] = None):
    """A binary stream of the decompressed bytes of a file: ``compression`` is None, ``gzip``
    or ``zstd`` (pyarrow's decoders; a file cut short raises ``OSError("Truncated compressed
    stream")`` at its end). Use it as a context manager."""
    import pyarrow as pa

    raw = open_input(path)
    if compression is None:
        return raw
    return pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), compression)


def atomic_write(path: str):
    """A context manager giving a binary file that appears at ``path`` only when the block
    ends without an exception (and never when it raises). Parents are created as needed."""
    return files_of(path).atomic_write(path)


def read_bytes(path: str) -> bytes:
    return files_of(path).read_bytes(path)


def write_bytes(path: str, data: bytes) -> None:
    """Write a whole file atomically."""
    with atomic_write(path) as f:
        f.write(data)


def read_ranges(path: str, starts: List[int], ends: List[int]) -> List[bytes]:
    """The bytes ``[starts[i], ends[i])`` of a file, one ``bytes`` a range: explicit reads for a
    local path, ranged GETs for a URL (issued together, without the read-ahead cache of
    :func:`open_input`, which would fetch whole blocks around every small read). A range that
    ends past the end of the file comes back short. Failures are OSError, as for open_input."""
    return files_of(path).read_ranges(path, starts, ends)


def head(path: str, compression: Optional[str] = None, size: int = 1 << 20) -> bytes:
    """About the first ``size`` bytes of a file's (decompressed) text, from one read of its
    first ``size`` bytes (for a URL one ranged GET: a streamed read would fetch a whole
    read-ahead block, up to the whole object). Damaged compressed data gives what decodes."""
    import zlib

    raw = read_ranges(path, [0], [size])[0]
    try:
        if compression == "gzip":
            return zlib.decompressobj(wbits=47).decompress(raw, size)
        if compression == "zstd":
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(raw)[:size]
        if compression in ("bz2", "xz"):
            import bz2
            import lzma

            d = bz2.BZ2Decompressor() if compression == "bz2" else lzma.LZMADecompressor()
            return d.decompress(raw, size)
    except Exception:  # not what its name says: the reader will say so
        return b""
    return raw


def check_reachable(path: str) -> None:
    """Fail early, in one line, when a URL's store cannot be reached, has no credentials or no
    such bucket (for an output, before any work is done). Local paths: nothing to check."""
    files_of(path).check_reachable(path)


# the settings of object stores that another process needs as this one has them (credentials, endpoints)
STORE_ENV_PREFIXES = ("AWS_", "FSSPEC_", "GOOGLE_", "GCS_", "HF_", "AZURE_", "S3FS_")


def store_settings(paths) -> dict:
    """The environment's settings of object stores (``AWS_*``, ...) when any of ``paths`` lies
    in a store, for workers that must reach it as this process does; none for local paths."""
    import os

    if not any_remote(paths):
        return {}
    return {k: v for k, v in os.environ.items() if k.startswith(STORE_ENV_PREFIXES)}


def lock(path: str, *, wait: bool, what: str):
    """A context holding the exclusive lock of the lock file ``path`` (see
    :meth:`.local.LocalFiles.lock`; none in a store): waited for, or with ``wait=False`` a
    :class:`LockedError` at once when another process holds it."""
    return files_of(path).lock(path, wait, what)


__all__ = ["FileInfo", "Files", "LockedError", "any_remote", "atomic_write", "basename", "check_reachable", "dirname",
           "exists", "file_sizes", "files_of", "glob", "glob_entries", "has_magic", "head", "info", "infos",
           "isdir", "isfile", "join", "listdir", "local_path", "lock", "makedirs", "move", "new_temp",
           "open_input", "open_read", "os_path", "protocol", "read_bytes", "read_ranges", "redact",
           "remote_errors", "remove", "remove_tree", "store_settings", "userinfo_span", "walk_files",
           "write_bytes"]
