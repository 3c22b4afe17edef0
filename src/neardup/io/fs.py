"""One filesystem layer for local paths and URLs (``s3://``, ``gs://``, ``hf://``, any fsspec
protocol).

Every function takes a path as the user typed it: a local path goes to plain ``os`` calls (so
local files keep their speed and need nothing installed), a URL to the fsspec filesystem of its
protocol (``pip install 'neardup[cloud]'``), with credentials and endpoints found the standard
way (environment, profiles, ``AWS_ENDPOINT_URL``). Paths come back in the form they were given:
URLs stay URLs, so a name built here can be passed to any other function here.

Writes are atomic per object: :func:`atomic_write` makes a local file appear under its name
only once complete (a temporary name and a rename), and an object in a store appears only when
its upload completes (a failed write aborts the upload).

A remote problem is one line, never a traceback: a missing extra or an unknown protocol is a
:class:`~neardup.errors.ConfigError`; an unreachable endpoint, missing credentials, access
denied or a missing bucket an :class:`~neardup.errors.InputError`.
"""

from __future__ import annotations

import contextlib
import errno
import glob as _glob
import io
import os
import re
import shutil
from dataclasses import dataclass
from typing import IO, Any, Iterator, List, Optional, Tuple

from ..errors import ConfigError, InputError

# protocols whose fsspec implementation lives in another package, and that package's name
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "hf": "huggingface_hub",
             "az": "adlfs", "abfs": "adlfs", "abfss": "adlfs", "http": "aiohttp", "https": "aiohttp"}
_EXTRA = "pip install 'neardup[cloud]'"
# a scheme of two letters or more ("C://x" stays a Windows path), or fsspec's chained
# protocols ("simplecache::s3://...")
_SCHEME = re.compile(r"((?:[A-Za-z][A-Za-z0-9+.\-]*::)*[A-Za-z][A-Za-z0-9+.\-]+)://")
# stores without folders: makedirs is a no-op there (s3fs's would even create a missing bucket)
_OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "hf", "oss", "r2"}


def is_url(path: str) -> bool:
    """Whether ``path`` names something outside the local file system (``scheme://...``);
    ``file://`` URLs are local."""
    m = _SCHEME.match(str(path))
    return m is not None and m.group(1).lower() not in ("file", "local")


# user:password@ (or a lone token@) after a scheme: what a URL carries as credentials
_USERINFO = re.compile(r"((?:[A-Za-z][A-Za-z0-9+.\-]*::)*[A-Za-z][A-Za-z0-9+.\-]*://)([^/@\s]*)@")


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it hidden: ``scheme://user:pw@host`` becomes
    ``scheme://user:***@host`` and ``scheme://token@host`` (or ``:pw@``) ``scheme://***@host``.
    Every path or URL that neardup prints or stores passes through here; nothing else of the text
    changes."""
    text = str(text)
    secrets = set()

    def hide(m: "re.Match") -> str:
        user, sep, secret = m.group(2).partition(":")
        secrets.add(secret if sep and user else m.group(2))
        return f"{m.group(1)}{user}:***@" if sep and user else f"{m.group(1)}***@"

    text = _USERINFO.sub(hide, text)
    # a library's message may quote the secret again without its scheme ("KEY:SECRET@bucket")
    for secret in sorted((x for x in secrets if x), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def local_path(path: str) -> str:
    """A local path without its ``file://`` prefix (the path itself when it has none)."""
    p = str(path)
    for prefix in ("file://", "local://"):
        if p.lower().startswith(prefix):
            return p[len(prefix):]
    return p


def protocol(path: str) -> str:
    """``s3``, ``gs``, ... for a URL, ``file`` for a local path."""
    return str(path).partition("://")[0].lower() if is_url(path) else "file"


# --------------------------------------------------------------------------- remote plumbing


def _filesystem(url: str):
    """``(fsspec filesystem, path without the protocol)`` of a URL."""
    proto = protocol(url)
    try:
        import fsspec
    except ImportError:
        raise ConfigError(f"{url}: reading and writing {proto}:// paths needs the cloud extra "
                          f"({_EXTRA})") from None
    try:
        fs, path = _cached_url_to_fs(fsspec, url, proto)
    except ImportError as e:
        pkg = _PACKAGES.get(proto) or getattr(e, "name", None) or "its fsspec package"
        raise ConfigError(f"{url}: reading and writing {proto}:// paths needs {pkg} "
                          f"({_EXTRA})") from None
    except ValueError as e:
        if "protocol" in str(e).lower():
            raise ConfigError(f"{url}: unknown protocol {proto}:// (not a local path, and no "
                              "fsspec filesystem is installed for it)") from None
        raise ConfigError(f"{url}: {_one_line(e)}") from None
    except Exception as e:  # a filesystem that checks its settings when created
        raise _translate(url, e) from None
    return fs, path


_FS_CACHE: dict = {}  # the filesystems made by _cached_url_to_fs, the most recently used last
_FS_CACHE_SIZE = 16
# the settings a filesystem reads once, when created: a change makes a new one
_ENV_KEYS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
             "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION",
             "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
             "HF_TOKEN", "HF_ENDPOINT")


def _cached_url_to_fs(fsspec, url: str, proto: str):
    """fsspec's ``url_to_fs`` with one filesystem per protocol, options the URL sets (the host
    and user of ``sftp://``, ``ftp://``, ``webhdfs://``), environment and process, the last
    _FS_CACHE_SIZE of them kept; and no listings cache on object stores: another process (a Ray
    worker, a previous run) may have written since, and a stale listing would hide its files."""
    options = {"skip_instance_cache": True}
    if proto in ("s3", "s3a", "gs", "gcs"):
        options["use_listings_cache"] = False
    if "::" in url:  # a chain (a cache in front of a store): fsspec builds it per URL
        return fsspec.core.url_to_fs(url)
    from_url = fsspec.get_filesystem_class(proto)._get_kwargs_from_urls(url)
    # a filesystem holds connections and an event loop: one per process (after a fork, anew)
    key = (proto, repr(sorted(from_url.items())), os.getpid(), tuple(os.environ.get(k) for k in _ENV_KEYS))
    fs = _FS_CACHE.pop(key, None)
    if fs is None:
        fs, path = fsspec.core.url_to_fs(url, **options)
    else:
        path = fs._strip_protocol(url)
    _FS_CACHE[key] = fs
    while len(_FS_CACHE) > _FS_CACHE_SIZE:
        del _FS_CACHE[next(iter(_FS_CACHE))]
    return fs, path


def _one_line(e: Any) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= 300 else s[:297] + "..."


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _translate(url: str, e: BaseException) -> Exception:
    """A one-line InputError / ConfigError for what went wrong on ``url``."""
    if isinstance(e, (InputError, ConfigError)):
        return e
    names = " ".join(type(x).__name__ for x in _chain(e))
    text = " ".join(_one_line(x) for x in _chain(e))
    low = text.lower()
    if "NoCredentialsError" in names or "unable to locate credentials" in low \
            or "PartialCredentialsError" in names or "DefaultCredentialsError" in names:
        return InputError(f"{url}: no credentials found ({_CREDENTIALS_HINT.get(protocol(url), _CREDENTIALS_HINT['s3'])})")
    if ("EndpointConnectionError" in names or "ConnectTimeout" in names
            or "could not connect to the endpoint" in low or "ClientConnectorError" in names
            or "connection refused" in low or "name or service not known" in low
            or "ConnectionError" in names):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and protocol(url) in ("s3", "s3a"):
            return InputError(f"{url}: cannot reach the storage endpoint at {endpoint}")
        return InputError(f"{url}: cannot reach the storage endpoint ({_first_line(e)})")
    if "nosuchbucket" in low or "bucket does not exist" in low or "specified bucket" in low:
        return InputError(f"{url}: no such bucket: {_bucket(url)}")
    if isinstance(e, PermissionError) or "accessdenied" in low or "access denied" in low \
            or "forbidden" in low or "invalidaccesskeyid" in low or "signaturedoesnotmatch" in low:
        return InputError(f"{url}: access denied ({_first_line(e)})")
    if isinstance(e, FileNotFoundError):
        return InputError(f"no such file or folder: {url}")
    return InputError(f"{url}: {type(e).__name__}: {_first_line(e)}")


_CREDENTIALS_HINT = {
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or give the machine a role",
    "gs": "set GOOGLE_APPLICATION_CREDENTIALS, or run gcloud auth application-default login",
    "hf": "set HF_TOKEN, or run huggingface-cli login",
}
_CREDENTIALS_HINT["s3a"] = _CREDENTIALS_HINT["s3"]
_CREDENTIALS_HINT["gcs"] = _CREDENTIALS_HINT["gs"]


def _first_line(e: BaseException) -> str:
    for x in _chain(e):
        s = _one_line(x)
        if s:
            return s
    return type(e).__name__


def _bucket(url: str) -> str:
    rest = str(url).partition("://")[2]
    return rest.split("/", 1)[0]


@contextlib.contextmanager
def remote_errors(url: str) -> Iterator[None]:
    """Turn any exception from a remote filesystem into a one-line InputError / ConfigError."""
    try:
        yield
    except (InputError, ConfigError):
        raise
    except Exception as e:
        raise _translate(url, e) from None


def _rejoin(url: str, fs, path: str) -> str:
    """The URL of ``path`` (as fsspec returns it, without protocol) on the filesystem of ``url``."""
    if "://" in path:
        return path
    head, _, rest = str(url).partition("://")
    if path.startswith("/") and not rest.startswith("/"):  # a root marker the user did not type
        path = path[1:]
    return f"{head}://{path}"


# --------------------------------------------------------------------------- paths


def join(base: str, *parts: str) -> str:
    """``base/part/...``: ``os.path.join`` for local paths, ``/`` for URLs."""
    if not is_url(base):
        return os.path.join(base, *parts)
    out = str(base)
    for p in parts:
        out = out.rstrip("/") + "/" + str(p).lstrip("/")
    return out


def basename(path: str) -> str:
    if not is_url(path):
        return os.path.basename(path)
    return str(path).rstrip("/").rsplit("/", 1)[-1]


def dirname(path: str) -> str:
    if not is_url(path):
        return os.path.dirname(path)
    head, _, rest = str(path).partition("://")
    rest = rest.rstrip("/")
    return f"{head}://" + (rest.rsplit("/", 1)[0] if "/" in rest else rest)


# --------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class FileInfo:
    """size in bytes and modification time in nanoseconds (0 where the store has none); a
    fingerprint of an input for a run's resume check."""

    size: int
    mtime_ns: int


def exists(path: str) -> bool:
    if not is_url(path):
        return os.path.exists(local_path(path))
    fs, p = _filesystem(path)
    with remote_errors(path):
        return bool(fs.exists(p))


def isdir(path: str) -> bool:
    if not is_url(path):
        return os.path.isdir(local_path(path))
    fs, p = _filesystem(path)
    with remote_errors(path):
        return bool(fs.isdir(p))


def isfile(path: str) -> bool:
    if not is_url(path):
        return os.path.isfile(local_path(path))
    fs, p = _filesystem(path)
    with remote_errors(path):
        return bool(fs.isfile(p))


def info(path: str) -> FileInfo:
    """Size and modification time of a file; InputError when it is not there."""
    if not is_url(path):
        try:
            st = os.stat(local_path(path))
        except OSError as e:
            raise InputError(f"cannot read {path} ({e.strerror or e})") from None
        return FileInfo(int(st.st_size), int(st.st_mtime_ns))
    fs, p = _filesystem(path)
    with remote_errors(path):
        d = fs.info(p)
    return FileInfo(int(d.get("size") or 0), _mtime_ns(d))


def infos(paths) -> dict:
    """``{path: FileInfo}`` of many files: local ones by ``stat``, remote ones asked for together
    (one request each: thousands of files one after another would take minutes)."""
    paths = list(paths)
    remote = [p for p in paths if is_url(p)]
    out = {p: info(p) for p in paths if not is_url(p)}
    if remote:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(32, len(remote))) as pool:
            out.update(zip(remote, pool.map(info, remote)))
    return out


def _mtime_ns(d: dict) -> int:
    import datetime as dt

    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        v = d.get(key)
        if v is None:
            continue
        if isinstance(v, (int, float)):
            return int(v * 1e9)
        if isinstance(v, str):
            try:
                v = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                continue
        if isinstance(v, dt.datetime):
            if v.tzinfo is None:
                v = v.replace(tzinfo=dt.timezone.utc)
            return int(v.timestamp() * 1e9)
    etag = d.get("ETag") or d.get("etag")
    if etag:  # no time: the content tag still changes when the object does (stable across runs)
        import hashlib

        return int.from_bytes(hashlib.sha256(str(etag).encode()).digest()[:7], "little")
    return 0


def listdir(path: str) -> List[Tuple[str, bool]]:
    """``(name, is_dir)`` of the entries of a folder, sorted by name."""
    if not is_url(path):
        out = []
        with os.scandir(local_path(path)) as it:
            for e in it:
                try:
                    out.append((e.name, e.is_dir()))
                except OSError:
                    out.append((e.name, False))
        return sorted(out)
    fs, p = _filesystem(path)
    with remote_errors(path):
        entries = fs.ls(p, detail=True)
    out = []
    base = p.rstrip("/")
    for d in entries:
        name = d["name"].rstrip("/")
        if name == base:
            continue  # some stores list the folder marker itself
        out.append((name.rsplit("/", 1)[-1], d.get("type") == "directory"))
    return sorted(set(out))


def walk_files(path: str, skip=None) -> List[Tuple[Tuple[str, ...], str]]:
    """Every file under a folder as ``(parts of its path inside the folder, full path)``,
    sorted by parts; a name for which ``skip(name)`` is true is left out with everything under
    it. Symbolic links to local folders are not followed (``discover`` has its own walk, which
    follows them once each)."""
    found: List[Tuple[Tuple[str, ...], str]] = []
    if not is_url(path):
        for root, dirs, files in os.walk(local_path(path)):
            rel = os.path.relpath(root, local_path(path))
            parts = () if rel == "." else tuple(rel.split(os.sep))
            if skip is not None:
                dirs[:] = [d for d in dirs if not skip(d)]
            for f in files:
                if skip is None or not skip(f):
                    found.append((parts + (f,), os.path.join(root, f)))
        found.sort()
        return found
    fs, p = _filesystem(path)
    base = p.rstrip("/")
    with remote_errors(path):
        listing = fs.find(base, withdirs=False, detail=True)
    for name, d in listing.items():
        if d.get("type") == "directory" or not name.startswith(base + "/"):
            continue
        parts = tuple(name[len(base) + 1:].split("/"))
        if skip is not None and any(skip(x) for x in parts):
            continue
        if any(x == "" for x in parts):
            continue
        found.append((parts, join(path, *parts)))
    found.sort()
    return found


def has_magic(path: str) -> bool:
    return _glob.has_magic(str(path))


def glob(pattern: str) -> List[str]:
    """Paths matching a glob (``**`` spans folders), sorted; URLs come back as URLs."""
    if not is_url(pattern):
        return sorted(_glob.glob(local_path(pattern), recursive=True))
    return [m for m, _ in glob_entries(pattern)]


def glob_entries(pattern: str) -> List[Tuple[str, bool]]:
    """``(path, is_dir)`` of the matches of a glob, sorted, from one listing of the store."""
    if not is_url(pattern):
        return [(m, os.path.isdir(m)) for m in glob(pattern)]
    fs, p = _filesystem(pattern)
    with remote_errors(pattern):
        matches = fs.glob(p, detail=True)
    return sorted((_rejoin(pattern, fs, m), d.get("type") == "directory") for m, d in matches.items())


# --------------------------------------------------------------------------- changes


def makedirs(path: str) -> None:
    """Create a folder and its parents (a no-op on object stores, which have no folders)."""
    if not is_url(path):
        os.makedirs(local_path(path), exist_ok=True)
        return
    if protocol(path) in _OBJECT_STORES:
        return
    fs, p = _filesystem(path)
    with remote_errors(path):
        fs.makedirs(p, exist_ok=True)


def remove_tree(path: str) -> None:
    """Remove a folder and everything under it, or a file; nothing when it is not there."""
    if not is_url(path):
        p = local_path(path)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.remove(p)
        return
    fs, p = _filesystem(path)
    with remote_errors(path):
        if fs.exists(p):
            fs.rm(p, recursive=True)


def remove(path: str) -> None:
    """Remove one file; nothing when it is not there."""
    if not is_url(path):
        try:
            os.remove(local_path(path))
        except FileNotFoundError:
            pass
        return
    fs, p = _filesystem(path)
    with remote_errors(path):
        if fs.exists(p):
            fs.rm_file(p)


def move(source: str, target: str) -> None:
    """Move a file or folder to ``target`` on the same storage, replacing a file there (a rename
    locally; a copy inside the store and a delete for a URL)."""
    if not is_url(source):
        os.replace(local_path(source), local_path(target))
        return
    fs, p = _filesystem(source)
    with remote_errors(source):
        if fs.isfile(p):
            pairs = [(p, _filesystem(target)[1])]
        else:  # a prefix: each object under it, copied inside the store (no download)
            pairs = [(_filesystem(full)[1], _filesystem(join(target, *parts))[1]) for parts, full in walk_files(source)]
        for a, b in pairs:
            fs.copy(a, b)
        if pairs:
            fs.rm([a for a, _ in pairs])


# --------------------------------------------------------------------------- reading and writing


def open_input(path: str) -> IO[bytes]:
    """The raw bytes of a file, as a seekable binary file object (close it, or use ``with``).

    Opening or reading a file that cannot be read raises OSError, remote or local alike (a
    missing object is ``FileNotFoundError`` "No such file or directory"; a store problem an
    OSError whose text is the one-line reason), so that readers report both the same way; a
    missing extra is still a ConfigError."""
    if not is_url(path):
        return open(local_path(path), "rb")
    fs, p = _filesystem(path)
    try:
        return _RemoteInput(path, fs.open(p, "rb"))
    except Exception as e:
        raise _as_oserror(path, e) from None


def _as_oserror(url: str, e: BaseException) -> OSError:
    if isinstance(e, FileNotFoundError) and not _chain_says_bucket(e):
        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    err = _translate(url, e)
    if isinstance(err, ConfigError):
        raise err
    reason = str(err)
    if reason.startswith(f"{url}: "):
        reason = reason[len(url) + 2:]
    return OSError(reason)


def _chain_says_bucket(e: BaseException) -> bool:
    text = " ".join(_one_line(x) for x in _chain(e)).lower()
    return "nosuchbucket" in text or "bucket does not exist" in text or "specified bucket" in text


class _RemoteInput(io.RawIOBase):
    """A remote file whose read errors are OSErrors with a one-line reason (see open_input)."""

    def __init__(self, url: str, f):
        super().__init__()
        self.url = url
        self.f = f

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        try:
            return self.f.read(size)
        except Exception as e:
            raise _as_oserror(self.url, e) from None

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self.read(-1)

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return self.f.seek(offset, whence)
        except Exception as e:
            raise _as_oserror(self.url, e) from None

    def tell(self) -> int:
        return self.f.tell()

    @property
    def size(self) -> int:
        return self.f.size

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self.f.close()
        super().close()


def open_read(path: str, compression: Optional[str] = None):
    """A binary stream of the decompressed bytes of a file: ``compression`` is None, ``gzip``
    or ``zstd`` (pyarrow's decoders; a file cut short raises ``OSError("Truncated compressed
    stream")`` at its end). Use it as a context manager."""
    import pyarrow as pa

    raw = open_input(path)
    if compression is None:
        return raw
    return pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), compression)


def new_temp(folder: str, name: str) -> Tuple[int, str]:
    """A new file (made by this call: O_EXCL, so never someone else's) with a temporary name in
    ``folder``: a dot, ``name``, the process id, random letters, ``.tmp``; (fd open for
    writing, path)."""
    import secrets

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{name[:180]}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise OSError(errno.EEXIST, "no free temporary name", folder)  # pragma: no cover


class _AtomicLocal:
    def __init__(self, path: str):
        self.path = local_path(path)

    def __enter__(self) -> IO[bytes]:
        parent = os.path.dirname(self.path) or "."
        os.makedirs(parent, exist_ok=True)
        fd, self.tmp = new_temp(parent, os.path.basename(self.path))
        self.f = os.fdopen(fd, "wb")
        return self.f

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.f.close()
        finally:
            if exc_type is None:
                os.replace(self.tmp, self.path)
            else:
                with contextlib.suppress(OSError):
                    os.remove(self.tmp)


class _AtomicRemote:
    """An object upload that becomes visible only when ``close`` completes it; on an error the
    upload (multipart or buffered) is discarded, so no partial object is ever seen."""

    def __init__(self, url: str):
        self.url = url

    def __enter__(self) -> IO[bytes]:
        fs, p = _filesystem(self.url)
        makedirs(dirname(self.url))
        with remote_errors(self.url):
            self.f = fs.open(p, "wb")
        return _UploadFile(self.url, self.f)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            with remote_errors(self.url):
                self.f.close()  # completes the upload: the object appears now
            return
        discard = getattr(self.f, "discard", None)
        with contextlib.suppress(Exception):
            if discard is not None:
                discard()  # aborts a multipart upload; nothing was put yet otherwise
                self.f.closed = True  # so that its finaliser does not upload the rest
            else:  # pragma: no cover - a filesystem without discard: leave nothing behind
                self.f.close()
                remove(self.url)


class _UploadFile(io.RawIOBase):
    """The writable side of an upload. Its ``close`` only stops writing: a writer that closes
    its sink when it fails (pyarrow's ParquetWriter does) must not complete the upload; that is
    for :func:`atomic_write` to decide."""

    def __init__(self, url: str, f):
        super().__init__()
        self.url = url
        self.f = f

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except Exception as e:
            raise _translate(self.url, e) from None

    def tell(self) -> int:
        return self.f.tell()


def atomic_write(path: str):
    """A context manager giving a binary file that appears at ``path`` only when the block
    ends without an exception (and never when it raises). Parents are created as needed."""
    if not is_url(path):
        return _AtomicLocal(path)
    return _AtomicRemote(path)


def read_bytes(path: str) -> bytes:
    with open_input(path) as f:
        if is_url(path):
            with remote_errors(path):
                return f.read()
        return f.read()


def write_bytes(path: str, data: bytes) -> None:
    """Write a whole file atomically."""
    with atomic_write(path) as f:
        f.write(data)


def check_reachable(path: str) -> None:
    """Fail early, in one line, when a URL's store cannot be reached, has no credentials or no
    such bucket (for an output, before any work is done). Local paths: nothing to check."""
    if not is_url(path):
        return
    fs, p = _filesystem(path)
    bucket = p.split("/", 1)[0]
    with remote_errors(path):
        if hasattr(fs, "invalidate_cache"):
            fs.invalidate_cache(bucket)
        if protocol(path) in ("s3", "s3a", "gs", "gcs"):
            # info, not exists: s3fs's exists answers False for an unreachable endpoint or
            # missing credentials too, which would read as "no such bucket"
            try:
                fs.info(bucket)
            except FileNotFoundError:
                raise InputError(f"{path}: no such bucket: {bucket}") from None
        elif protocol(path) in _OBJECT_STORES and not fs.exists(bucket):
            raise InputError(f"{path}: no such bucket: {bucket}")


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
    except Exception:  # not what its name says: the reader will say so
        return b""
    return raw


def any_remote(paths) -> bool:
    """Whether any of ``paths`` is a URL (a run that touches a store)."""
    return any(is_url(p) for p in paths)


def read_ranges(path: str, starts: List[int], ends: List[int]) -> List[bytes]:
    """The bytes ``[starts[i], ends[i])`` of a file, one ``bytes`` a range: explicit reads for a
    local path, ranged GETs for a URL (issued together, without the read-ahead cache of
    :func:`open_input`, which would fetch whole blocks around every small read). A range that
    ends past the end of the file comes back short. Failures are OSError, as for open_input."""
    if not is_url(path):
        out = []
        with open(local_path(path), "rb") as f:
            for a, b in zip(starts, ends):
                f.seek(a)
                out.append(f.read(b - a))
        return out
    if not len(starts):
        return []
    fs, p = _filesystem(path)
    try:
        got = fs.cat_ranges([p] * len(starts), [int(a) for a in starts], [int(b) for b in ends])
    except Exception as e:
        raise _as_oserror(path, e) from None
    for g in got:
        if isinstance(g, BaseException):
            raise _as_oserror(path, g) from None
    return got


def file_sizes(path: str) -> List[Tuple[Tuple[str, ...], int]]:
    """``(parts of its path inside the folder, size in bytes)`` of every file under a folder,
    sorted; one listing of the store for a URL (no request per file). Nothing when the folder
    is not there."""
    if not is_url(path):
        out = []
        for parts, full in walk_files(path):
            try:
                out.append((parts, os.stat(full).st_size))
            except OSError:
                pass
        return out
    fs, p = _filesystem(path)
    base = p.rstrip("/")
    with remote_errors(path):
        try:
            listing = fs.find(base, withdirs=False, detail=True)
        except FileNotFoundError:
            return []
    out = []
    for name, d in listing.items():
        if d.get("type") == "directory" or not name.startswith(base + "/"):
            continue
        parts = tuple(name[len(base) + 1:].split("/"))
        if all(parts):
            out.append((parts, int(d.get("size") or 0)))
    return sorted(out)
