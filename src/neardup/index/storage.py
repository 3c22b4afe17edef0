"""The storage seam: where an index's manifest and segments live.

:class:`~neardup.index.core.Index` never knows whether its segments are files in a folder or
strings in Redis (the same seam as datasketch's ``storage.py``). A storage offers:

* ``read_manifest()``: the committed manifest (a dict), or None when there is no index yet;
* ``write_segment(name, arrays)``: stores an immutable segment, invisible until committed;
* ``commit(update)``: applies ``update(manifest or None) -> manifest`` and switches the
  manifest atomically (a crash before the switch leaves the previous manifest in force);
* ``open_segment(entry)``: a :class:`SegmentReader` over a committed segment;
* ``writer(initial)``: a context in which this process may write (exclusive for a folder);
* ``drop_segments(names)`` / ``drop_orphans(manifest)``: deletes what no manifest names;
* ``file_sizes(entry)`` / ``read_file(entry, file)``: a segment's files as stored, for checks.

Damage is detected, never answered from: the manifest carries a SHA-256 of itself and each
segment file's size and CRC-32; sizes are checked when a segment is opened (and by every
writer, for all segments), CRCs when a file is first used in a process (a folder; on Redis the
files fetched whole) and by :meth:`Index.verify` (every file).

:func:`neardup.index.core.open_storage` picks the backend from the location: ``redis://HOST:PORT/DB`` (optionally
``?prefix=NAME:``) for Redis, anything else is a folder.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import zlib
from typing import Callable, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple

import numpy as np

from ..errors import ConfigError, StorageError
from ..io.storage.folder import Folder, refuse_overlap
from ..io.storage.paths import redact
from .removal import object_names
from .segments import BLOCK_BYTES, BLOCK_SUMS, FILE_DTYPES, checksum, with_block_sums

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
    except ValueError as exc:
        raise StorageError(f"corrupt index {where}: the manifest is not readable ({exc.__class__.__name__})") from None
    if not isinstance(outer, dict) or not {"manifest", "sha256"} <= set(outer):
        # JSON, but not what neardup writes: another program's file of that name
        raise StorageError(f"{where} is not a neardup index: its manifest was written by another program (it "
                           f"holds no neardup manifest); nothing was changed (give a new or empty folder)")
    try:
        body = outer["manifest"]
        digest = outer["sha256"]
        if not isinstance(body, dict) or not isinstance(digest, str):
            raise TypeError(type(body).__name__)
    except (KeyError, TypeError) as exc:
        raise StorageError(f"corrupt index {where}: the manifest is not readable ({exc.__class__.__name__})") from None
    if hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest() != digest:
        raise StorageError(f"corrupt index {where}: the manifest does not match its checksum")
    return body


def entry_files(entry: dict, where: str) -> Dict[str, dict]:
    """A manifest entry's files ({name: {bytes, crc32}}), refused when they are not a
    segment's (a manifest written by something else)."""
    files = entry.get("files") if isinstance(entry, dict) else None
    if not isinstance(files, dict) or any(f not in FILE_DTYPES or not isinstance(i, dict)
                                          or not isinstance(i.get("bytes"), int) for f, i in files.items()):
        name = entry.get("name") if isinstance(entry, dict) else entry
        raise StorageError(f"corrupt index {where}: the manifest's entry for segment {name} is not a segment's")
    return files


def damaged(where: str, segment: str, file: str, got: int, want: int) -> str:
    return (f"corrupt index {where}: segment {segment} file {file} does not match its checksum (crc32 "
            f"{got:08x}, the manifest says {want:08x}); nothing was read from it")


def chunks_of(arrays) -> Iterable[Tuple[str, np.ndarray]]:
    """(file, chunk) pairs of what :meth:`Storage.write_segment` takes: a dict of whole arrays,
    or such pairs already (a file's chunks in order, files interleaved as they come); the block
    sums of the files checked by blocks follow at the end."""
    return with_block_sums(arrays.items() if isinstance(arrays, dict) else arrays)


class SegmentReader(Protocol):
    """Read access to one committed segment: whole arrays, or ranges of one."""

    def array(self, file: str) -> np.ndarray:
        raise NotImplementedError

    def read(self, file: str, start: int, stop: int) -> np.ndarray:
        """A copy of ``array(file)[start:stop]``, read without holding the file (compaction reads
        every file this way, once, front to back, and checks its CRC-32 itself)."""
        return np.array(self.array(file)[start:stop])

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


class Storage(Protocol):
    location = ""

    def read_manifest(self) -> Optional[dict]:
        raise NotImplementedError

    def write_segment(self, name: str, arrays) -> Dict[str, dict]:
        """Stores a segment's files: ``arrays`` a dict of whole arrays, or (file, chunk) pairs."""
        raise NotImplementedError

    def commit(self, update: Callable[[Optional[dict]], dict]) -> dict:
        raise NotImplementedError

    def open_segment(self, entry: dict) -> SegmentReader:
        raise NotImplementedError

    def writer(self, initial: Optional[dict] = None):
        """A context in which this process may write; ``initial``: the manifest a new index
        starts with (a backend may write it first; None: the index must exist)."""
        return contextlib.nullcontext()

    def file_sizes(self, entry: dict) -> Dict[str, Optional[int]]:
        """The stored size of each file of a segment (None: missing)."""
        raise NotImplementedError

    def read_file(self, entry: dict, file: str) -> Optional[np.ndarray]:
        """A segment file's bytes as stored (any dtype; None: missing)."""
        raise NotImplementedError

    def drop_segments(self, names: Iterable[str]) -> None:
        raise NotImplementedError

    def drop_orphans(self, manifest: Optional[dict], thorough: bool = False) -> None:
        """Deletes segments no manifest names; ``thorough`` (compaction) may scan the store."""

    def refuse_as_input(self, inputs: Sequence[str], files: Sequence[str]) -> None:
        """Refuses inputs that are, hold or lie inside the index (its own files read as documents)."""

    def refuse_output(self, path: str, option: str) -> None:
        """Refuses an output file that would be written inside the index."""

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- folder

# a segment's folder: its name (see segments.new_segment_name), or that name after TMP_PREFIX
# while it is being written; nothing else under segments/ is ever removed
SEGMENT_NAME = re.compile(r"^[0-9]{8}T[0-9]{6}-[0-9a-f]{12}$")
MANIFEST_TMP = MANIFEST + ".tmp"


def reason(exc: OSError) -> str:
    """An OSError in a few words: ``No space left on device (ENOSPC)``."""
    code = errno.errorcode.get(exc.errno or 0)
    text = exc.strerror or str(exc) or exc.__class__.__name__
    return f"{text} ({code})" if code else text


def _remove_segment_folder(folder: str) -> None:
    """Removes a segment's own files, then the folder if nothing else is left in it (a file put
    there by someone else stays, and so does the folder): file by file with ``os``, where
    :meth:`Folder.remove` would take the whole tree."""
    for file in FILE_DTYPES:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.remove(os.path.join(folder, file))
    with contextlib.suppress(OSError):
        os.rmdir(folder)


# files whose checksum this process has verified: (path, device, inode, size, mtime, ctime);
# a segment is immutable, so a file is read in full once per process, when first used
_VERIFIED: set = set()
# the blocks checked so far of the files checked by blocks, by the same key
_VERIFIED_BLOCKS: Dict[tuple, np.ndarray] = {}


class FolderSegment(SegmentReader):
    """Every file memory-mapped at once: a compaction that deletes the segment later cannot pull
    the data from under a reader (the maps keep the files alive until the reader lets go).
    Each file's size is checked here, its CRC-32 when it is first used (once per process); a file
    checked by blocks (:data:`.segments.BLOCK_SUMS`) that is read by ranges has only the blocks
    it reads checked, each once per process. The files are opened with ``os`` calls, not through
    :meth:`Folder.map_array`: the size, device, inode and times of the very file mapped are what
    says that a file was checked before."""

    def __init__(self, folder: str, entry: dict, where: str):
        self.folder = folder
        self.name = entry["name"]
        self.where = where
        self.arrays: Dict[str, np.ndarray] = {}
        self._unchecked: Dict[str, tuple] = {}
        files = entry_files(entry, where)
        self._by_blocks = {data: sums for data, sums in BLOCK_SUMS.items() if data in files and sums in files}
        for file, info in files.items():
            path = os.path.join(folder, file)
            try:
                with open(path, "rb") as f:
                    st = os.fstat(f.fileno())
                    size = st.st_size
                    if size == info["bytes"]:
                        dtype = FILE_DTYPES[file]
                        self.arrays[file] = np.memmap(f, dtype=dtype, mode="r") if size else np.zeros(0, dtype)
            except FileNotFoundError:
                raise StorageError(f"corrupt index {where}: segment {self.name} has lost its file {file}") from None
            except OSError as exc:
                raise StorageError(f"cannot read index {where}: segment {self.name} file {file}: "
                                   f"{reason(exc)}") from None
            if size != info["bytes"]:
                raise StorageError(f"corrupt index {where}: segment {self.name} file {file} has {size} "
                                   f"bytes, the manifest says {info['bytes']}")
            key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if key not in _VERIFIED:
                self._unchecked[file] = (key, info.get("crc32"))

    def _check(self, file: str) -> None:
        entry = self._unchecked.get(file)
        if entry is None:  # another thread checked it meanwhile
            return
        key, want = entry
        if want is not None:
            try:
                got = checksum(self.arrays[file])
            except OSError as exc:  # an I/O error under the map
                raise StorageError(f"cannot read index {self.where}: segment {self.name} file {file}: "
                                   f"{reason(exc)}") from None
            if got != want:
                raise StorageError(damaged(self.where, self.name, file, got, want))
        _VERIFIED.add(key)
        self._unchecked.pop(file, None)

    def array(self, file: str) -> np.ndarray:
        if file in self._unchecked:
            self._check(file)
        return self.arrays[file]

    def ranges(self, file, starts, stops):
        if file in self._by_blocks and file in self._unchecked:
            self._check_blocks(file, starts, stops)
            return gather_ranges(self.arrays[file], starts, stops)
        return gather_ranges(self.array(file), starts, stops)

    def _check_blocks(self, file: str, starts, stops) -> None:
        """Checks the blocks of ``file`` that the ranges cover and no one has checked yet."""
        entry = self._unchecked.get(file)
        if entry is None:
            return
        key = entry[0]
        if key in _VERIFIED:  # another reader of the same file checked all of it
            self._unchecked.pop(file, None)
            return
        data = self.arrays[file]
        nbytes = data.nbytes
        nblocks = -(-nbytes // BLOCK_BYTES)
        done = _VERIFIED_BLOCKS.setdefault(key, np.zeros(nblocks, dtype=bool))
        item = data.dtype.itemsize
        lo = np.asarray(starts, dtype=np.int64) * item
        hi = np.asarray(stops, dtype=np.int64) * item
        some = hi > lo
        if not some.any():
            return
        first, count = lo[some] // BLOCK_BYTES, (hi[some] - 1) // BLOCK_BYTES - lo[some] // BLOCK_BYTES + 1
        blocks = np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
        if len(blocks) and (int(blocks.min()) < 0 or int(blocks.max()) >= nblocks):
            raise RuntimeError(f"internal error: a range outside {file} of segment {self.name}")
        todo = np.unique(blocks[~done[blocks]])
        if not len(todo):
            return
        sums = self.array(self._by_blocks[file])
        if len(sums) != nblocks:
            raise StorageError(f"corrupt index {self.where}: segment {self.name} file {self._by_blocks[file]} has "
                               f"{len(sums)} block checksums for the {nblocks} blocks of {file}")
        raw = memoryview(data.view(np.uint8))
        try:
            for b in todo.tolist():
                got = zlib.crc32(raw[b * BLOCK_BYTES:(b + 1) * BLOCK_BYTES])
                if got != int(sums[b]):
                    raise StorageError(f"corrupt index {self.where}: segment {self.name} file {file} bytes "
                                       f"{b * BLOCK_BYTES}-{min(nbytes, (b + 1) * BLOCK_BYTES) - 1} do not match "
                                       f"their checksum (crc32 {got:08x}, {self._by_blocks[file]} says "
                                       f"{int(sums[b]):08x}); nothing was read from them")
        except OSError as exc:  # an I/O error under the map
            raise StorageError(f"cannot read index {self.where}: segment {self.name} file {file}: "
                               f"{reason(exc)}") from None
        done[todo] = True
        if done.all():
            _VERIFIED.add(key)
            self._unchecked.pop(file, None)
            _VERIFIED_BLOCKS.pop(key, None)

    def read(self, file: str, start: int, stop: int) -> np.ndarray:
        dtype = np.dtype(FILE_DTYPES[file])
        try:
            with open(os.path.join(self.folder, file), "rb") as f:
                raw = os.pread(f.fileno(), (stop - start) * dtype.itemsize, start * dtype.itemsize)
        except OSError as exc:
            raise StorageError(f"cannot read index {self.where}: segment {self.name} file {file}: "
                               f"{reason(exc)}") from None
        if len(raw) != (stop - start) * dtype.itemsize:
            raise StorageError(f"corrupt index {self.where}: segment {self.name} file {file} is shorter "
                               f"than the manifest says")
        return np.frombuffer(raw, dtype=dtype).copy()


class FolderStorage(Storage):
    """An index in a folder: ``manifest.json`` and ``segments/NAME/FILE``.

    A segment is written under ``segments/.tmp-NAME``, each file fsynced, then renamed to
    ``segments/NAME``; the manifest is written to ``manifest.json.tmp``, fsynced and renamed over
    ``manifest.json`` (then the folder is fsynced). Rename is atomic on POSIX file systems, so a
    reader or a crash sees the old manifest or the new one, never a mix; a segment no manifest
    names is invisible and removed by the next writer. Writers hold the folder's lock
    (:meth:`Folder.lock` on ``.lock``, waiting for the writer before) for the whole add, removal
    or compaction; readers take no lock. The lock file is never removed (a writer waiting on it
    must lock the file the next one will find).

    Ownership: a folder is written only when it is new, empty (nothing but this index's own
    lock, temporaries and an empty ``segments/``) or holds a manifest. The first add writes an
    empty manifest before any segment, so segments without a manifest mean a lost manifest:
    refused, never cleaned. Cleaning removes only what the index made: segment folders named as
    segments are (their own files), ``.tmp-`` ones, ``manifest.json.tmp``.
    """

    def __init__(self, path: str):
        self.path = path
        self.folder = Folder.of(path)
        self.location = redact(path)

    def refuse_as_input(self, inputs: Sequence[str], files: Sequence[str]) -> None:
        """An add whose input is this folder, lies inside it (its manifest, its segments) or holds
        it (the next add would read the index's own files as documents) is refused in one line."""
        refuse_overlap("index", self.folder, [os.fspath(i) for i in inputs], [os.fspath(f) for f in files])

    def refuse_output(self, path: str, option: str) -> None:
        real, mine = os.path.realpath(os.fspath(path)), os.path.realpath(self.path)
        if real == mine or real.startswith(mine.rstrip(os.sep) + os.sep):
            raise ConfigError(f"{option} {redact(os.fspath(path))}: lies inside the index {self.location} (only "
                              f"neardup writes there); name a file outside it")

    # reading
    def read_manifest(self) -> Optional[dict]:
        if self._state() != "index":
            return None
        try:
            raw = self.folder.read_bytes(MANIFEST)
        except FileNotFoundError:  # a failed first add took it back meanwhile
            return None if self._state() != "index" else self.read_manifest()
        except OSError as exc:
            raise StorageError(f"cannot read index {self.location}: {reason(exc)}") from None
        return parse_manifest(raw, self.location)

    def _state(self) -> str:
        """``missing``, ``empty`` (a folder this index may start in) or ``index`` (a manifest);
        anything else is refused with what was found there."""
        where = self.location
        try:
            st = os.stat(self.folder.path)  # os: its errors say what the path is instead of a folder
        except FileNotFoundError:
            return "missing"
        except OSError as exc:
            hint = " (a part of the path is a file)" if exc.errno == errno.ENOTDIR else ""
            raise StorageError(f"cannot use {where} as an index: {reason(exc)}{hint}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise StorageError(f"{where} is not a neardup index (it is a file, not a folder)")
        try:
            if os.path.lexists(self.folder.join(MANIFEST)):  # even a broken link: not ours to replace
                return "index"
            entries = self.folder.names()
            segs = self._segment_names()
        except OSError as exc:
            raise StorageError(f"cannot read index {where}: {reason(exc)}") from None
        foreign = sorted(set(entries) - {LOCK, SEGMENTS, MANIFEST_TMP})
        kept = sorted(e for e in segs if not (e.startswith(TMP_PREFIX) and SEGMENT_NAME.match(e[len(TMP_PREFIX):])))
        if (foreign or kept) and (MANIFEST in entries or os.path.lexists(self.folder.join(MANIFEST))):
            # another process's first add published its manifest (then its segments) since the
            # look above (this look runs outside the lock): an index, not a foreign folder
            return "index"
        if not foreign and kept and all(SEGMENT_NAME.match(e) for e in kept):
            raise StorageError(
                f"index {where} has lost its {MANIFEST}: {SEGMENTS}/ holds {len(kept)} segment"
                f"{'s' if len(kept) != 1 else ''} that no manifest names; nothing was changed (restore "
                f"{MANIFEST} from a backup, or move the folder away to start a new index there)")
        if foreign or kept:
            shown = foreign or [f"{SEGMENTS}/{e}" for e in kept]
            more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
            raise StorageError(f"{where} is not a neardup index: it has no {MANIFEST} and holds other files "
                               f"({', '.join(shown[:3])}{more}); nothing was changed (give a new or empty folder)")
        return "empty"

    def _segment_names(self) -> List[str]:
        """The entries of ``segments/``: none when it is not there; a ``segments`` that is no
        folder is an OSError, as for any listing."""
        if self.folder.exists(SEGMENTS) and not self.folder.is_dir(SEGMENTS):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), self.folder.join(SEGMENTS))
        return self.folder.names(SEGMENTS)

    def open_segment(self, entry: dict) -> SegmentReader:
        return FolderSegment(self._segment_folder(entry["name"]).path, entry, self.location)

    def _segment_folder(self, name: str) -> Folder:
        if not isinstance(name, str) or not SEGMENT_NAME.match(name):
            raise StorageError(f"corrupt index {self.location}: the manifest names a segment {name!r}")
        return self.folder.child(SEGMENTS, name)

    def file_sizes(self, entry: dict) -> Dict[str, Optional[int]]:
        folder = self._segment_folder(entry["name"])
        out: Dict[str, Optional[int]] = {}
        for file in entry_files(entry, self.location):
            try:  # os: a missing file (None) is not one that cannot be read (an error)
                out[file] = os.stat(folder.join(file)).st_size
            except FileNotFoundError:
                out[file] = None
            except OSError as exc:
                raise StorageError(f"cannot read index {self.location}: segment {entry['name']} file {file}: "
                                   f"{reason(exc)}") from None
        return out

    def read_file(self, entry: dict, file: str) -> Optional[np.ndarray]:
        folder = self._segment_folder(entry["name"])
        try:
            return folder.map_array(file, np.uint8)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read index {self.location}: segment {entry['name']} file {file}: "
                               f"{reason(exc)}") from None

    # writing
    @contextlib.contextmanager
    def writer(self, initial: Optional[dict] = None):
        """Exclusive write access. ``initial``: the manifest a new index starts with (written
        before any segment, and taken back if the add fails); None: the index must exist."""
        self._state()  # refuses a file or a foreign folder before anything is created
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(self.folder.lock(LOCK, wait=True))
            except OSError as exc:
                raise StorageError(f"cannot write index {self.location}: {reason(exc)}") from None
            claimed = False
            try:
                if self._state() != "index" and initial is not None:
                    claimed = True
                    self.commit(lambda current: initial if current is None else current, crash_points=False)
                yield self
            except BaseException:
                if claimed:
                    self._unclaim()
                raise

    def _unclaim(self) -> None:
        """After a failed first add: takes back the empty manifest (so the folder is no index
        again), if nothing was committed and no segment is left; the lock file stays."""
        with contextlib.suppress(OSError, StorageError):
            manifest = self.read_manifest()
            left = [e for e in self.folder.names(SEGMENTS) if not e.startswith(TMP_PREFIX)]
            if manifest is not None and not manifest.get("segments") and not left:
                os.remove(self.folder.join(MANIFEST))
                with contextlib.suppress(OSError):
                    os.remove(self.folder.join(MANIFEST_TMP))
                with contextlib.suppress(OSError):
                    os.rmdir(self.folder.join(SEGMENTS))  # only when empty: a .tmp- segment stays
                self.folder.sync()

    def write_segment(self, name: str, arrays) -> Dict[str, dict]:
        """Writes the files into ``segments/.tmp-NAME``, each fsynced, then renames the folder
        ``segments/NAME`` (both folders fsynced): a segment is there whole or not at all."""
        base = self.folder.child(SEGMENTS)
        tmp = base.child(TMP_PREFIX + name)
        files: Dict[str, dict] = {}
        try:
            base.makedirs(TMP_PREFIX + name)
            with contextlib.ExitStack() as open_files:  # each file fsynced and closed as the block ends
                handles = {}
                for file, data in chunks_of(arrays):
                    f = handles.get(file)
                    if f is None:
                        f = handles[file] = open_files.enter_context(tmp.durable_write(file))
                        files[file] = {"bytes": 0, "crc32": 0}
                    view = memoryview(np.ascontiguousarray(data)).cast("B")
                    f.write(view)
                    files[file]["bytes"] += view.nbytes
                    files[file]["crc32"] = zlib.crc32(view, files[file]["crc32"])
            tmp.sync()
            crash_point("segment_written")
            base.move_in(tmp.path, name)
            base.sync()
        except OSError as exc:
            _remove_segment_folder(tmp.path)
            _remove_segment_folder(base.join(name))
            raise StorageError(f"cannot write index {self.location}: {reason(exc)}") from None
        except BaseException:  # a failure of what produced the chunks (a damaged file read by a compaction)
            _remove_segment_folder(tmp.path)
            raise
        return files

    def commit(self, update: Callable[[Optional[dict]], dict], crash_points: bool = True) -> dict:
        """``crash_points=False``: the empty manifest of a first add, which the crash tests'
        points (``before_manifest_switch`` ...) are not about."""
        new = update(self.read_manifest())
        try:
            with self.folder.durable_write(MANIFEST_TMP) as f:
                f.write(manifest_bytes(new))
            if crash_points:
                crash_point("before_manifest_switch")
            self.folder.move_in(self.folder.join(MANIFEST_TMP), MANIFEST)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(self.folder.join(MANIFEST_TMP))
            raise StorageError(f"cannot write index {self.location}: {reason(exc)}") from None
        try:
            self.folder.sync()
        except OSError as exc:  # switched, but perhaps not yet durable: say so, keep the segments
            raise StorageError(f"index {self.location}: the new manifest is in place but the folder could not "
                               f"be synced ({reason(exc)})") from None
        if crash_points:
            crash_point("after_manifest_switch")
        return new

    def drop_segments(self, names: Iterable[str]) -> None:
        for name in names:
            if isinstance(name, str) and SEGMENT_NAME.match(name):
                _remove_segment_folder(self.folder.join(SEGMENTS, name))

    def drop_orphans(self, manifest: Optional[dict], thorough: bool = False) -> None:
        """Removes the segment folders no manifest names (left by a crash) and a left-over
        ``manifest.json.tmp``; call inside writer(). Only names this index makes are touched."""
        named = object_names(manifest)
        try:
            entries = self._segment_names()
        except OSError as exc:
            raise StorageError(f"cannot read index {self.location}: {reason(exc)}") from None
        for entry in entries:
            bare = entry[len(TMP_PREFIX):] if entry.startswith(TMP_PREFIX) else entry
            if SEGMENT_NAME.match(bare) and entry not in named:
                _remove_segment_folder(self.folder.join(SEGMENTS, entry))
        with contextlib.suppress(OSError):
            os.remove(self.folder.join(MANIFEST_TMP))


# Failure injection for the crash tests, which set it in the process they kill (see tests/index_corpus.py)
crash_hook: Optional[Callable[[str], None]] = None


def crash_point(name: str) -> None:
    """A step of an index write where the crash tests kill the process (``segment_written``,
    ``before_manifest_switch``, ``after_manifest_switch``): calls :data:`crash_hook` when set."""
    if crash_hook is not None:
        crash_hook(name)


__all__ = ["Storage", "SegmentReader", "FolderStorage", "gather_ranges", "StorageError"]
