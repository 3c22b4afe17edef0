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
The files a reader fetches whole (band keys, offsets, sources) are checked against their CRC-32
when fetched; the ones read by ranges (fingerprints or signatures, ids) by ``neardup index
verify`` and by compaction, which fetch them whole.

URLs: ``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME:]`` (``rediss://`` for TLS,
``unix://[[USER]:PASSWORD@]/PATH[?db=DB&prefix=NAME:]``); anything else in them is refused rather
than ignored (a password holding a raw ``/ ? #`` too: percent-encode them), and a password is
never printed (``fs.redact``).
"""

from __future__ import annotations

import contextlib
import functools
import time
import zlib
from typing import Callable, Dict, Iterable, Optional
from urllib.parse import parse_qs, urlsplit, urlunsplit

import numpy as np

from ..errors import StorageError
from ..io.storage.fs import redact, userinfo_span
from .removal import object_names
from .segments import FILE_DTYPES, checksum
from .storage import (SegmentReader, Storage, chunks_of, crash_point, damaged, entry_files, gather_ranges, manifest_bytes,
                      parse_manifest)

CHUNK = 8 << 20            # bytes per APPEND
FLUSH_EVERY = 8            # APPENDs per pipeline round trip
ORPHAN_AGE_S = 3600        # uncommitted segments older than this are a crashed writer's
CONNECT_TIMEOUT_S = 3      # TCP connect, and the TLS handshake of rediss://, per attempt
COMMAND_TIMEOUT_S = 60     # a silent server during a command (not retried: a call waits this long at most)
CONNECT_RETRIES = 1        # attempts after the first: an unreachable server is told in seconds
SERVICE_TIMEOUT_S = 5      # the first PING's answer: a silent service (not Redis) is told in seconds


def _redis_errors(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        import redis
        try:
            return method(self, *args, **kwargs)
        except redis.exceptions.AuthenticationError as exc:  # a ConnectionError: the server was reached
            raise StorageError(f"Redis at {self.location} refused the credentials: {_one_line(exc)} (the user "
                               f"name and password of the URL, redis://USER:PASSWORD@HOST:PORT/DB)") from None
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            hint = ""
            if self.location.lower().startswith("rediss://") and isinstance(exc, redis.exceptions.TimeoutError):
                hint = " (rediss:// speaks TLS: does this server? redis:// is without)"
            raise StorageError(f"cannot reach Redis at {self.location}: {_one_line(exc)}{hint}") from None
        except redis.exceptions.ResponseError as exc:
            raise StorageError(f"Redis at {self.location} refused a command: {_one_line(exc)}") from None
    return wrapper


def _one_line(exc) -> str:
    return redact(" ".join(str(exc).split()) or exc.__class__.__name__)


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
            info = self.entry["files"][file]
            if len(raw) != info["bytes"]:
                raise StorageError(f"corrupt index {self.location}: segment {self.name} file {file} "
                                   f"has {len(raw)} bytes, the manifest says {info['bytes']}")
            want = info.get("crc32")
            if want is not None and checksum(np.frombuffer(raw, np.uint8)) != want:
                raise StorageError(damaged(self.location, self.name, file, checksum(np.frombuffer(raw, np.uint8)), want))
            arr = np.frombuffer(raw, dtype=FILE_DTYPES[file])
            self.arrays[file] = arr
        return arr

    @_redis_errors
    def read(self, file: str, start: int, stop: int) -> np.ndarray:
        if file in self.arrays:
            return np.array(self.arrays[file][start:stop])
        size = np.dtype(FILE_DTYPES[file]).itemsize
        raw = self.storage.client.getrange(self.key(file), start * size, stop * size - 1) if stop > start else b""
        if len(raw) != (stop - start) * size:
            raise StorageError(f"corrupt index {self.location}: segment {self.name} file {file} is shorter "
                               f"than the manifest says")
        return np.frombuffer(raw, dtype=FILE_DTYPES[file]).copy()

    @_redis_errors
    def ranges(self, file, starts, stops):
        dtype = np.dtype(FILE_DTYPES[file])
        starts = np.asarray(starts, dtype=np.int64)
        lengths = np.asarray(stops, dtype=np.int64) - starts
        if file in self.arrays:
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


def parse_url(url: str):
    """(URL for the client, the location as shown, key prefix) of an index URL; a URL whose
    database, port or options cannot be honoured is refused here, before any connection."""
    shown = redact(url)
    span = userinfo_span(url)
    # a password holding a raw / ? or # ends the client's host early: the rest of the password
    # would be read as port, database or options, and shown as such
    crossing = span is not None and not urlsplit(url).netloc.startswith(url[span[0]:span[1] + 1])

    def refuse(what: str):
        if crossing:
            what = "a password holding / ? or # must be percent-encoded (%2F, %3F, %23)"
        raise StorageError(f"bad Redis URL {shown}: {what}")

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError as exc:
        refuse(f"{exc} (the port must be a number)")
    scheme = parts.scheme.lower()
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        refuse("cannot read its options (NAME=VALUE&...)")  # not quoted: they may hold a password
    allowed = ("prefix", "db") if scheme == "unix" else ("prefix",)
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        refuse(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (it takes "
               f"{' and '.join('?' + a + '=' for a in allowed)})")
    if any(len(v) > 1 for v in query.values()):
        refuse("an option is given twice")
    prefix = query.get("prefix", ["neardup:"])[0]
    if not prefix:
        refuse("an empty prefix")
    if scheme == "unix":
        db = query.get("db", ["0"])[0]
        if not parts.path:
            refuse("no socket path (unix:///PATH/TO/redis.sock)")
    else:
        if not parts.hostname:
            refuse("no host (redis://HOST:PORT/DB)")
        db = parts.path[1:] if parts.path.startswith("/") else parts.path
        db = db or "0"
    if not db.isdigit() or not db.isascii():
        refuse(f"the database must be a number (redis://HOST:PORT/DB, DB 0, 1, ...), got {db!r}")
    if scheme == "unix":
        plain = urlunsplit((parts.scheme, parts.netloc, parts.path, f"db={int(db)}", ""))
    else:
        plain = urlunsplit((parts.scheme, parts.netloc, f"/{int(db)}", "", ""))
    return plain, redact(urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))), prefix


def _client(plain: str, command_timeout: Optional[float] = None):
    """A client whose connection attempts, the TLS handshake included, give up within seconds:
    a rediss:// URL to a plain server (silent during the handshake) or an unreachable host is one
    line soon, not a minute of waiting. A timeout is not retried (only a refused or dropped
    connection is), so that a wait said to last N seconds (``command_timeout``, else
    :data:`COMMAND_TIMEOUT_S`) lasts N seconds: a query to a server that stopped answering was
    told after 240 s before (two commands, each timeout retried once)."""
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    retried = {"supported_errors": (redis.exceptions.ConnectionError,)}
    kwargs = dict(socket_connect_timeout=CONNECT_TIMEOUT_S,
                  socket_timeout=COMMAND_TIMEOUT_S if command_timeout is None else command_timeout,
                  retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), CONNECT_RETRIES, **retried))
    if plain.lower().startswith("rediss://"):
        class HandshakeTimeoutSSLConnection(redis.connection.SSLConnection):
            def _connect(self):
                timeout = self.socket_timeout
                self.socket_timeout = self.socket_connect_timeout  # the socket's timeout in the handshake
                try:
                    sock = super()._connect()
                finally:
                    self.socket_timeout = timeout
                sock.settimeout(timeout)
                return sock

        kwargs["connection_class"] = HandshakeTimeoutSSLConnection
    return redis.Redis.from_url(plain, **kwargs)


class RedisStorage(Storage):
    def __init__(self, url: str):
        plain, self.location, self.prefix = parse_url(url)
        try:
            self.client = _client(plain)
        except ValueError as exc:
            raise StorageError(f"bad Redis URL {self.location}: {redact(str(exc))}") from None
        self.manifest_key = self.prefix + "manifest"
        self._check_service(plain)

    @_redis_errors
    def _check_service(self, plain: str) -> None:
        """A PING answered within SERVICE_TIMEOUT_S by PONG, or the URL is refused in one line: a
        port of another service (an SSH or HTTP banner, one that says nothing) is not a Redis
        server, and its answer must not end in a protocol error's traceback."""
        import redis
        client = _client(plain, command_timeout=SERVICE_TIMEOUT_S)
        not_redis = (f"{self.location} does not answer as a Redis server does ({{}}): is that port another "
                     f"service? give redis://HOST:PORT/DB of a Redis server")
        try:
            answer = client.ping()
        except redis.exceptions.TimeoutError:
            if self.location.lower().startswith("rediss://"):
                raise  # perhaps a TLS handshake with a plain server: the wrapper says so
            raise StorageError(not_redis.format(f"no answer to PING within {SERVICE_TIMEOUT_S} s")) from None
        except (redis.exceptions.InvalidResponse, redis.exceptions.DataError, UnicodeError) as exc:
            raise StorageError(not_redis.format(f"it sent {_one_line(exc)[:80]}")) from None
        finally:
            client.close()
        if answer is not True:
            raise StorageError(not_redis.format(f"PING answered {str(answer)[:40]!r}"))

    def segment_key(self, name: str, file: str) -> str:
        return f"{self.prefix}seg:{name}:{file}"

    @_redis_errors
    def read_manifest(self) -> Optional[dict]:
        raw = self.client.get(self.manifest_key)
        if raw is None:
            return None
        return parse_manifest(raw, self.location)

    def open_segment(self, entry: dict) -> SegmentReader:
        entry_files(entry, self.location)
        seg = RedisSegment(self, entry)
        seg.check()
        return seg

    @_redis_errors
    def file_sizes(self, entry: dict) -> Dict[str, Optional[int]]:
        files = list(entry_files(entry, self.location))
        pipe = self.client.pipeline(transaction=False)
        for file in files:
            pipe.exists(self.segment_key(entry["name"], file))
            pipe.strlen(self.segment_key(entry["name"], file))
        got = pipe.execute()
        return {f: (got[2 * i + 1] if got[2 * i] else None) for i, f in enumerate(files)}

    @_redis_errors
    def read_file(self, entry: dict, file: str) -> Optional[np.ndarray]:
        raw = self.client.get(self.segment_key(entry["name"], file))
        return None if raw is None else np.frombuffer(raw, np.uint8)

    @_redis_errors
    def write_segment(self, name: str, arrays) -> Dict[str, dict]:
        pipe = self.client.pipeline(transaction=False)
        queued = 0
        files = {}
        try:
            for file, data in chunks_of(arrays):
                view = memoryview(np.ascontiguousarray(data)).cast("B")
                key = self.segment_key(name, file)
                if file not in files:
                    pipe.delete(key)
                    files[file] = {"bytes": 0, "crc32": 0}
                for start in range(0, len(view), CHUNK):
                    pipe.append(key, view[start:start + CHUNK].tobytes())
                    queued += 1
                    if queued % FLUSH_EVERY == 0:
                        pipe.execute()
                files[file]["bytes"] += view.nbytes
                files[file]["crc32"] = zlib.crc32(view, files[file]["crc32"])
            pipe.execute()
        except BaseException:  # nothing of a failed write stays (a crashed writer's orphans go at compaction)
            with contextlib.suppress(Exception):
                self.drop_segments([name])
            raise
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
        named = object_names(manifest)
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
