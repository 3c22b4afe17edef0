"""The Redis backend of the storage seam: the same immutable segments, one Redis string per file.

Keys (``PREFIX`` is ``neardup:`` unless the URL says ``?prefix=NAME:``):

* ``PREFIX manifest``: the manifest, the same bytes as a folder index's ``manifest.json``;
* ``PREFIX seg:NAME:FILE``: the bytes of one segment file.

A writer stores its segments first (pipelined ``APPEND`` s of 8 MiB, one round trip per 64 MiB)
and then switches the manifest with an optimistic transaction (``WATCH`` manifest, ``MULTI``,
``SET``, ``EXEC``, retried when another writer committed in between). So two processes adding at
once both land, whole, in some order; a writer that dies before its ``EXEC`` leaves strings that
no manifest names, invisible to readers (``compact`` removes them an hour later). Readers fetch
a segment's band keys and per-document offsets once and cache them (12·b + 20 bytes a
document), and fetch the fingerprints and ids of candidates only, by ``GETRANGE``, all of one
query in one round trip. With the server's persistence on (RDB or AOF), a restart keeps the index.
"""

from __future__ import annotations

import functools
import time
from typing import Callable, Dict, Iterable, Optional
from urllib.parse import parse_qs, urlsplit, urlunsplit

import numpy as np

from ..errors import StorageError
from .segments import FILE_DTYPES, checksum
from .storage import SegmentReader, Storage, crash_point, manifest_bytes, parse_manifest

CHUNK = 8 << 20            # bytes per APPEND
FLUSH_EVERY = 8            # APPENDs per pipeline round trip
ORPHAN_AGE_S = 3600        # uncommitted segments older than this are a crashed writer's


def _redis_errors(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        import redis
        try:
            return method(self, *args, **kwargs)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            raise StorageError(f"cannot reach Redis at {self.location}: {_one_line(exc)}") from None
        except redis.exceptions.ResponseError as exc:
            raise StorageError(f"Redis at {self.location} refused a command: {_one_line(exc)}") from None
    return wrapper


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or exc.__class__.__name__


class RedisSegment(SegmentReader):
    def __init__(self, storage: "RedisStorage", entry: dict):
        self.storage = storage
        self.name = entry["name"]
        self.entry = entry
        self.arrays: Dict[str, np.ndarray] = {}

    def key(self, file: str) -> str:
        return self.storage.segment_key(self.name, file)

    @_redis_errors
    def check(self) -> None:
        pipe = self.storage.client.pipeline(transaction=False)
        files = list(self.entry["files"])
        for file in files:
            pipe.strlen(self.key(file))
        for file, size in zip(files, pipe.execute()):
            want = self.entry["files"][file]["bytes"]
            if size != want:
                raise StorageError(f"corrupt index {self.storage.location}: segment {self.name} file {file} "
                                   f"has {size} bytes, the manifest says {want}")

    @property
    def location(self):
        return self.storage.location

    @_redis_errors
    def array(self, file: str) -> np.ndarray:
        arr = self.arrays.get(file)
        if arr is None:
            raw = self.storage.client.get(self.key(file)) or b""
            arr = np.frombuffer(raw, dtype=FILE_DTYPES[file])
            self.arrays[file] = arr
        return arr

    @_redis_errors
    def ranges(self, file, starts, stops):
        dtype = np.dtype(FILE_DTYPES[file])
        starts = np.asarray(starts, dtype=np.int64)
        lengths = np.asarray(stops, dtype=np.int64) - starts
        if file in self.arrays:
            from .storage import gather_ranges
            return gather_ranges(self.arrays[file], starts, stops)
        key = self.key(file)
        pipe = self.storage.client.pipeline(transaction=False)
        size = dtype.itemsize
        for s, n in zip(starts.tolist(), lengths.tolist()):
            if n > 0:  # GETRANGE k 0 -1 would be the whole string
                pipe.getrange(key, s * size, (s + n) * size - 1)
        raw = b"".join(pipe.execute()) if lengths.any() else b""
        values = np.frombuffer(raw, dtype=dtype)
        if len(values) != int(lengths.sum()):
            raise StorageError(f"corrupt index {self.location}: segment {self.name} file {file} is shorter "
                               f"than the manifest says")
        return values, lengths


class RedisStorage(Storage):
    def __init__(self, url: str):
        import redis
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        self.prefix = query.pop("prefix", ["neardup:"])[0]
        plain = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        self.location = plain
        try:
            self.client = redis.Redis.from_url(plain, socket_connect_timeout=5, socket_timeout=60)
        except ValueError as exc:
            raise StorageError(f"bad Redis URL {url!r}: {exc}") from None
        self.manifest_key = self.prefix + "manifest"

    def segment_key(self, name: str, file: str) -> str:
        return f"{self.prefix}seg:{name}:{file}"

    @_redis_errors
    def read_manifest(self) -> Optional[dict]:
        raw = self.client.get(self.manifest_key)
        if raw is None:
            return None
        return parse_manifest(raw, self.location)

    def open_segment(self, entry: dict) -> SegmentReader:
        seg = RedisSegment(self, entry)
        seg.check()
        return seg

    @_redis_errors
    def write_segment(self, name: str, arrays: Dict[str, np.ndarray]) -> Dict[str, dict]:
        pipe = self.client.pipeline(transaction=False)
        queued = 0
        files = {}
        for file, data in arrays.items():
            data = np.ascontiguousarray(data)
            view = memoryview(data).cast("B")
            key = self.segment_key(name, file)
            pipe.delete(key)
            for start in range(0, len(view), CHUNK):
                pipe.append(key, view[start:start + CHUNK].tobytes())
                queued += 1
                if queued % FLUSH_EVERY == 0:
                    pipe.execute()
            files[file] = {"bytes": int(data.nbytes), "crc32": checksum(data)}
        pipe.execute()
        crash_point("segment_written")
        return files

    @_redis_errors
    def commit(self, update: Callable[[Optional[dict]], dict]) -> dict:
        import redis
        while True:
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(self.manifest_key)
                    raw = pipe.get(self.manifest_key)
                    current = parse_manifest(raw, self.location) if raw is not None else None
                    new = update(current)
                    crash_point("before_manifest_switch")
                    pipe.multi()
                    pipe.set(self.manifest_key, manifest_bytes(new))
                    pipe.execute()
                    crash_point("after_manifest_switch")
                    return new
                except redis.exceptions.WatchError:
                    continue  # another writer committed first: apply our change to theirs

    @_redis_errors
    def drop_segments(self, names: Iterable[str]) -> None:
        keys = [self.segment_key(name, file) for name in names for file in FILE_DTYPES]
        for start in range(0, len(keys), 1000):
            self.client.delete(*keys[start:start + 1000])

    @_redis_errors
    def drop_orphans(self, manifest: Optional[dict], thorough: bool = False) -> None:
        if not thorough:  # a SCAN of the whole database is for compaction, not for every add
            return
        named = {s["name"] for s in (manifest or {}).get("segments", [])}
        cutoff = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() - ORPHAN_AGE_S))
        stale = set()
        start = len(self.prefix + "seg:")
        for key in self.client.scan_iter(match=self.prefix + "seg:*", count=1000):
            name = key.decode()[start:].split(":", 1)[0]
            if name not in named and name[:15] < cutoff:
                stale.add(name)
        self.drop_segments(stale)

    def close(self) -> None:
        self.client.close()
