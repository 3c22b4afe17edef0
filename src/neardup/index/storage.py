"""The storage seam: where an index's manifest and segments live.

:class:`~neardup.index.core.Index` never knows whether its segments are files in a folder or
strings in Redis (the same seam as datasketch's ``storage.py``). A storage offers:

* ``read_manifest()``: the committed manifest (a dict), or None when there is no index yet;
* ``write_segment(name, arrays)``: stores an immutable segment, invisible until committed;
* ``commit(update)``: applies ``update(manifest or None) -> manifest`` and switches the
  manifest atomically (a crash before the switch leaves the previous manifest in force);
* ``open_segment(entry)``: a :class:`SegmentReader` over a committed segment;
* ``writer()``: a context in which this process may write (exclusive for a folder);
* ``drop_segments(names)`` / ``drop_orphans(manifest)``: deletes what no manifest names.

:func:`neardup.index.core.open_storage` picks the backend from the location: ``redis://HOST:PORT/DB`` (optionally
``?prefix=NAME:``) for Redis, anything else is a folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from typing import Callable, Dict, Iterable, Optional, Tuple

import numpy as np

from ..errors import StorageError
from .segments import FILE_DTYPES, checksum

MANIFEST = "manifest.json"
SEGMENTS = "segments"
LOCK = ".lock"
TMP_PREFIX = ".tmp-"


def manifest_bytes(body: dict) -> bytes:
    """The manifest as stored: its body and a SHA-256 of the body, so damage is detected."""
    text = json.dumps(body, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return json.dumps({"sha256": digest, "manifest": body}, sort_keys=True, indent=1).encode()


def parse_manifest(raw: bytes, where: str) -> dict:
    try:
        outer = json.loads(raw)
        body = outer["manifest"]
        digest = outer["sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"corrupt index {where}: the manifest is not readable ({exc.__class__.__name__})") from None
    if hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest() != digest:
        raise StorageError(f"corrupt index {where}: the manifest does not match its checksum")
    return body


class SegmentReader:
    """Read access to one committed segment: whole arrays, or ranges of one."""

    def array(self, file: str) -> np.ndarray:
        raise NotImplementedError

    def ranges(self, file: str, starts: np.ndarray, stops: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(values concatenated, lengths) of ``array(file)[starts[i]:stops[i]]`` for every i."""
        raise NotImplementedError


def gather_ranges(arr: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(values, lengths) of arr[starts[i]:stops[i]] concatenated, by one fancy index."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(stops, dtype=np.int64) - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=arr.dtype), lengths
    begin = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=begin[1:])
    index = np.arange(total, dtype=np.int64) + np.repeat(starts - begin, lengths)
    return np.asarray(arr[index]), lengths


class Storage:
    location = ""

    def read_manifest(self) -> Optional[dict]:
        raise NotImplementedError

    def write_segment(self, name: str, arrays: Dict[str, np.ndarray]) -> Dict[str, dict]:
        raise NotImplementedError

    def commit(self, update: Callable[[Optional[dict]], dict]) -> dict:
        raise NotImplementedError

    def open_segment(self, entry: dict) -> SegmentReader:
        raise NotImplementedError

    def writer(self):
        return contextlib.nullcontext()

    def drop_segments(self, names: Iterable[str]) -> None:
        raise NotImplementedError

    def drop_orphans(self, manifest: Optional[dict], thorough: bool = False) -> None:
        """Deletes segments no manifest names; ``thorough`` (compaction) may scan the store."""

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- folder

def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: str, data) -> None:
    with open(path, "wb") as f:
        f.write(memoryview(np.ascontiguousarray(data)).cast("B"))
        f.flush()
        os.fsync(f.fileno())


class FolderSegment(SegmentReader):
    """Every file memory-mapped at once: a compaction that deletes the segment later cannot pull
    the data from under a reader (the maps keep the files alive until the reader lets go)."""

    def __init__(self, folder: str, entry: dict, where: str):
        self.folder = folder
        self.arrays: Dict[str, np.ndarray] = {}
        for file, info in entry["files"].items():
            path = os.path.join(folder, file)
            try:
                size = os.path.getsize(path)
                if size == info["bytes"]:
                    dtype = FILE_DTYPES[file]
                    self.arrays[file] = np.memmap(path, dtype=dtype, mode="r") if size else np.zeros(0, dtype)
            except OSError:
                raise StorageError(f"corrupt index {where}: segment {entry['name']} has lost its file "
                                   f"{file}") from None
            if size != info["bytes"]:
                raise StorageError(f"corrupt index {where}: segment {entry['name']} file {file} has {size} "
                                   f"bytes, the manifest says {info['bytes']}")

    def array(self, file: str) -> np.ndarray:
        return self.arrays[file]

    def ranges(self, file, starts, stops):
        return gather_ranges(self.arrays[file], starts, stops)


class FolderStorage(Storage):
    """An index in a folder: ``manifest.json`` and ``segments/NAME/FILE``.

    A segment is written under ``segments/.tmp-NAME``, each file fsynced, then renamed to
    ``segments/NAME``; the manifest is written to ``manifest.json.tmp``, fsynced and renamed over
    ``manifest.json`` (then the folder is fsynced). Rename is atomic on POSIX file systems, so a
    reader or a crash sees the old manifest or the new one, never a mix; a segment no manifest
    names is invisible and removed by the next writer. Writers take an exclusive ``flock`` on
    ``.lock`` for the whole add or compaction; readers take no lock.
    """

    def __init__(self, path: str):
        self.path = path
        self.location = path
        self._lock_fd = None

    # reading
    def read_manifest(self) -> Optional[dict]:
        path = self.path
        if not os.path.exists(path):
            return None
        if not os.path.isdir(path):
            raise StorageError(f"{path} is not a neardup index (it is a file, not a folder)")
        mpath = os.path.join(path, MANIFEST)
        try:
            with open(mpath, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            extra = [e for e in os.listdir(path) if e not in (LOCK, SEGMENTS)]
            if extra:
                raise StorageError(f"{path} is not a neardup index (no {MANIFEST}; it holds other files)") from None
            return None
        except OSError as exc:
            raise StorageError(f"cannot read index {path}: {exc.strerror or exc}") from None
        return parse_manifest(raw, path)

    def open_segment(self, entry: dict) -> SegmentReader:
        return FolderSegment(os.path.join(self.path, SEGMENTS, entry["name"]), entry, self.path)

    # writing
    @contextlib.contextmanager
    def writer(self):
        created = not os.path.exists(self.path)
        try:
            os.makedirs(os.path.join(self.path, SEGMENTS), exist_ok=True)
            fd = os.open(os.path.join(self.path, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot write index {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self
        finally:
            if created and not os.path.exists(os.path.join(self.path, MANIFEST)):
                shutil.rmtree(self.path, ignore_errors=True)  # a first add that failed leaves nothing
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def write_segment(self, name: str, arrays: Dict[str, np.ndarray]) -> Dict[str, dict]:
        base = os.path.join(self.path, SEGMENTS)
        tmp = os.path.join(base, TMP_PREFIX + name)
        os.makedirs(tmp)
        files = {}
        for file, data in arrays.items():
            _write_file(os.path.join(tmp, file), data)
            files[file] = {"bytes": int(np.asarray(data).nbytes), "crc32": checksum(data)}
        _fsync_dir(tmp)
        crash_point("segment_written")
        os.rename(tmp, os.path.join(base, name))
        _fsync_dir(base)
        return files

    def commit(self, update: Callable[[Optional[dict]], dict]) -> dict:
        new = update(self.read_manifest())
        mpath = os.path.join(self.path, MANIFEST)
        tmp = mpath + ".tmp"
        _write_file(tmp, np.frombuffer(manifest_bytes(new), dtype=np.uint8))
        crash_point("before_manifest_switch")
        os.replace(tmp, mpath)
        _fsync_dir(self.path)
        crash_point("after_manifest_switch")
        return new

    def drop_segments(self, names: Iterable[str]) -> None:
        for name in names:
            shutil.rmtree(os.path.join(self.path, SEGMENTS, name), ignore_errors=True)

    def drop_orphans(self, manifest: Optional[dict], thorough: bool = False) -> None:
        """Removes segment folders no manifest names (left by a crash); call inside writer()."""
        base = os.path.join(self.path, SEGMENTS)
        named = {s["name"] for s in (manifest or {}).get("segments", [])}
        try:
            entries = os.listdir(base)
        except FileNotFoundError:
            return
        for entry in entries:
            if entry not in named:
                shutil.rmtree(os.path.join(base, entry), ignore_errors=True)
        tmp = os.path.join(self.path, MANIFEST + ".tmp")
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def crash_point(name: str) -> None:
    """Failure injection for the crash tests: ``NEARDUP_INDEX_CRASH_AT=name`` kills the process
    here with SIGKILL (as ``kill -9`` would). Costs one environment lookup."""
    if os.environ.get("NEARDUP_INDEX_CRASH_AT") == name:
        import signal
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["Storage", "SegmentReader", "FolderStorage", "gather_ranges", "StorageError"]
