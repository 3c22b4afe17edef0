"""Files in a store (``s3://``, ``gs://``, ``hf://``, any fsspec protocol): :class:`RemoteFiles`.

Through the fsspec filesystem of the URL's protocol (``pip install 'neardup[cloud]'``), with
credentials and endpoints found the standard way (environment, profiles,
``AWS_ENDPOINT_URL``). Paths come back as URLs, so a name built here can be passed to any
function of :mod:`.fs`. An object appears only when its upload completes (a failed write aborts
the upload).

A remote problem is one line, never a traceback: a missing extra or an unknown protocol is a
:class:`~neardup.errors.ConfigError`; an unreachable endpoint, missing credentials, access
denied or a missing bucket an :class:`~neardup.errors.InputError`.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
from typing import IO, Iterator, List, Tuple

from ...errors import ConfigError, InputError, one_line
from .paths import join, protocol, redact, without_credentials

# protocols whose fsspec implementation lives in another package, and that package's name
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "hf": "huggingface_hub",
             "az": "adlfs", "abfs": "adlfs", "abfss": "adlfs", "http": "aiohttp", "https": "aiohttp"}
_EXTRA = "pip install 'neardup[cloud]'"
# stores without folders: makedirs is a no-op there (s3fs's would even create a missing bucket)
OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "hf", "oss", "r2"}


def filesystem(url: str):
    """``(fsspec filesystem, path without the protocol)`` of a URL."""
    proto = protocol(url)
    try:
        import fsspec
    except ImportError:
        raise ConfigError(f"{redact(url)}: reading and writing {proto}:// paths needs the cloud extra "
                          f"({_EXTRA})") from None
    try:
        fs, path = _cached_url_to_fs(fsspec, url, proto)
    except ImportError as e:
        pkg = _PACKAGES.get(proto) or getattr(e, "name", None) or "its fsspec package"
        raise ConfigError(f"{redact(url)}: reading and writing {proto}:// paths needs {pkg} "
                          f"({_EXTRA})") from None
    except ValueError as e:
        if "protocol" in str(e).lower():
            raise ConfigError(f"{redact(url)}: unknown protocol {proto}:// (not a local path, and no "
                              "fsspec filesystem is installed for it)") from None
        raise ConfigError(redact(f"{url}: {_first_line(e, url)}")) from None
    except Exception as e:  # a filesystem that checks its settings when created
        raise translate(url, e) from None
    return fs, path


FS_CACHE: dict = {}  # the filesystems made by _cached_url_to_fs, the most recently used last
FS_CACHE_SIZE = 16
# the settings a filesystem reads once, when created: a change makes a new one
_ENV_KEYS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
             "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION",
             "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
             "HF_TOKEN", "HF_ENDPOINT")


def _cached_url_to_fs(fsspec, url: str, proto: str):
    """fsspec's ``url_to_fs`` with one filesystem per protocol, options the URL sets (the host
    and user of ``sftp://``, ``ftp://``, ``webhdfs://``), environment and process, the last
    FS_CACHE_SIZE of them kept; and no listings cache on object stores: another process (a Ray
    worker, a previous run) may have written since, and a stale listing would hide its files."""
    options = {"skip_instance_cache": True}
    if proto in ("s3", "s3a", "gs", "gcs"):
        options["use_listings_cache"] = False
    if "::" in url:  # a chain (a cache in front of a store): fsspec builds it per URL
        return fsspec.core.url_to_fs(url)
    from_url = fsspec.get_filesystem_class(proto)._get_kwargs_from_urls(url)
    # a filesystem holds connections and an event loop: one per process (after a fork, anew)
    key = (proto, repr(sorted(from_url.items())), os.getpid(), tuple(os.environ.get(k) for k in _ENV_KEYS))
    fs = FS_CACHE.pop(key, None)
    if fs is None:
        fs, path = fsspec.core.url_to_fs(url, **options)
    else:
        path = fs._strip_protocol(url)
    FS_CACHE[key] = fs
    while len(FS_CACHE) > FS_CACHE_SIZE:
        del FS_CACHE[next(iter(FS_CACHE))]
    return fs, path


def _text(e: BaseException) -> str:
    """A library's message in one line of at most 300 characters ('' when it has none)."""
    return one_line(str(e), 300)


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def translate(url: str, e: BaseException) -> Exception:
    """A one-line InputError / ConfigError for what went wrong on ``url``, redacted as a whole:
    a library's message may quote the URL's secret without its scheme (boto: ``Invalid bucket
    name "KEY:SECRET@bucket"``), which only a :func:`~.paths.redact` that sees the URL too can
    find. So ``url`` is the URL as given, not redacted."""
    if isinstance(e, (InputError, ConfigError)):
        return e
    err = _translate(url, e)
    return type(err)(redact(str(err)))


def _translate(url: str, e: BaseException) -> Exception:
    names = " ".join(type(x).__name__ for x in _chain(e))
    text = " ".join(_text(x) for x in _chain(e))
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
        return InputError(f"{url}: cannot reach the storage endpoint ({_first_line(e, url)})")
    if "nosuchbucket" in low or "bucket does not exist" in low or "specified bucket" in low:
        return InputError(f"{url}: no such bucket: {_bucket(url)}")
    if isinstance(e, PermissionError) or "accessdenied" in low or "access denied" in low \
            or "forbidden" in low or "invalidaccesskeyid" in low or "signaturedoesnotmatch" in low:
        return InputError(f"{url}: access denied ({_first_line(e, url)})")
    if isinstance(e, FileNotFoundError):
        return InputError(f"no such file or folder: {url}")
    return InputError(f"{url}: {type(e).__name__}: {_first_line(e, url)}")


_CREDENTIALS_HINT = {
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or give the machine a role",
    "gs": "set GOOGLE_APPLICATION_CREDENTIALS, or run gcloud auth application-default login",
    "hf": "set HF_TOKEN, or run huggingface-cli login",
}
_CREDENTIALS_HINT["s3a"] = _CREDENTIALS_HINT["s3"]
_CREDENTIALS_HINT["gcs"] = _CREDENTIALS_HINT["gs"]


def _first_line(e: BaseException, url: str) -> str:
    """The first message of ``e``'s chain, the secrets of ``url`` hidden in it before it is cut
    to 300 characters (a cut secret is no longer found)."""
    for x in _chain(e):
        s = one_line(redact(str(x), [url]), 300)
        if s:
            return s
    return type(e).__name__


def _bucket(url: str) -> str:
    """The bucket of ``url``, after its credentials (``s3://KEY:SE/CRET@bucket/x``: ``bucket``)."""
    return without_credentials(str(url)).split("/", 1)[0]


@contextlib.contextmanager
def remote_errors(url: str) -> Iterator[None]:
    """Turn any exception from a remote filesystem into a one-line InputError / ConfigError."""
    try:
        yield
    except (InputError, ConfigError):
        raise
    except Exception as e:
        raise translate(url, e) from None


def _rejoin(url: str, fs, path: str) -> str:
    """The URL of ``path`` (as fsspec returns it, without protocol) on the filesystem of ``url``."""
    if "://" in path:
        return path
    head, _, rest = str(url).partition("://")
    if path.startswith("/") and not rest.startswith("/"):  # a root marker the user did not type
        path = path[1:]
    return f"{head}://{path}"


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


def as_oserror(url: str, e: BaseException) -> OSError:
    if isinstance(e, FileNotFoundError) and not _chain_says_bucket(e):
        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    err = translate(url, e)
    if isinstance(err, ConfigError):
        raise err
    reason, shown = str(err), redact(url)
    if reason.startswith(f"{shown}: "):
        reason = reason[len(shown) + 2:]
    return OSError(reason)


def _chain_says_bucket(e: BaseException) -> bool:
    text = " ".join(_text(x) for x in _chain(e)).lower()
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
            raise as_oserror(self.url, e) from None

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
            raise as_oserror(self.url, e) from None

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


class _AtomicRemote:
    """An object upload that becomes visible only when ``close`` completes it; on an error the
    upload (multipart or buffered) is discarded, so no partial object is ever seen."""

    def __init__(self, files: "RemoteFiles", url: str):
        self.files = files
        self.url = url

    def __enter__(self) -> IO[bytes]:
        fs, p = filesystem(self.url)
        self.files.makedirs(self.url.rstrip("/").rsplit("/", 1)[0])
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
                self.files.remove(self.url)


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
            raise translate(self.url, e) from None

    def tell(self) -> int:
        return self.f.tell()


class RemoteFiles:
    """The file operations of :mod:`.fs` on URLs (see there for what each does)."""

    is_remote = True

    def exists(self, path: str) -> bool:
        fs, p = filesystem(path)
        with remote_errors(path):
            return bool(fs.exists(p))

    def isdir(self, path: str) -> bool:
        fs, p = filesystem(path)
        with remote_errors(path):
            return bool(fs.isdir(p))

    def isfile(self, path: str) -> bool:
        fs, p = filesystem(path)
        with remote_errors(path):
            return bool(fs.isfile(p))

    def stat(self, path: str) -> Tuple[int, int]:
        fs, p = filesystem(path)
        with remote_errors(path):
            d = fs.info(p)
        return int(d.get("size") or 0), _mtime_ns(d)

    def listdir(self, path: str) -> List[Tuple[str, bool]]:
        fs, p = filesystem(path)
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

    def _listing(self, path: str, missing_ok: bool = False) -> List[Tuple[Tuple[str, ...], dict]]:
        """(parts below the folder, fsspec's entry) of every file under a folder, one listing."""
        fs, p = filesystem(path)
        base = p.rstrip("/")
        with remote_errors(path):
            try:
                listing = fs.find(base, withdirs=False, detail=True)
            except FileNotFoundError:
                if not missing_ok:
                    raise
                return []
        out = []
        for name, d in listing.items():
            if d.get("type") == "directory" or not name.startswith(base + "/"):
                continue
            parts = tuple(name[len(base) + 1:].split("/"))
            if all(parts):
                out.append((parts, d))
        return out

    def walk_files(self, path: str, skip=None) -> List[Tuple[Tuple[str, ...], str]]:
        found = [(parts, join(path, *parts)) for parts, _ in self._listing(path)
                 if skip is None or not any(skip(x) for x in parts)]
        found.sort()
        return found

    def file_sizes(self, path: str) -> List[Tuple[Tuple[str, ...], int]]:
        return sorted((parts, int(d.get("size") or 0)) for parts, d in self._listing(path, missing_ok=True))

    def glob_entries(self, pattern: str) -> List[Tuple[str, bool]]:
        fs, p = filesystem(pattern)
        with remote_errors(pattern):
            matches = fs.glob(p, detail=True)
        return sorted((_rejoin(pattern, fs, m), d.get("type") == "directory") for m, d in matches.items())

    def makedirs(self, path: str) -> None:
        if protocol(path) in OBJECT_STORES:
            return
        fs, p = filesystem(path)
        with remote_errors(path):
            fs.makedirs(p, exist_ok=True)

    def remove_tree(self, path: str) -> None:
        fs, p = filesystem(path)
        with remote_errors(path):
            if fs.exists(p):
                fs.rm(p, recursive=True)

    def remove(self, path: str) -> None:
        fs, p = filesystem(path)
        with remote_errors(path):
            if fs.exists(p):
                fs.rm_file(p)

    def move(self, source: str, target: str) -> None:
        fs, p = filesystem(source)
        with remote_errors(source):
            if fs.isfile(p):
                pairs = [(p, filesystem(target)[1])]
            else:  # a prefix: each object under it, copied inside the store (no download)
                pairs = [(filesystem(full)[1], filesystem(join(target, *parts))[1])
                         for parts, full in self.walk_files(source)]
            for a, b in pairs:
                fs.copy(a, b)
            if pairs:
                fs.rm([a for a, _ in pairs])

    def open_input(self, path: str) -> IO[bytes]:
        fs, p = filesystem(path)
        try:
            return _RemoteInput(path, fs.open(p, "rb"))
        except Exception as e:
            raise as_oserror(path, e) from None

    def atomic_write(self, path: str):
        return _AtomicRemote(self, path)

    def read_bytes(self, path: str) -> bytes:
        with self.open_input(path) as f:
            with remote_errors(path):
                return f.read()

    def read_ranges(self, path: str, starts: List[int], ends: List[int]) -> List[bytes]:
        if not len(starts):
            return []
        fs, p = filesystem(path)
        try:
            got = fs.cat_ranges([p] * len(starts), [int(a) for a in starts], [int(b) for b in ends])
        except Exception as e:
            raise as_oserror(path, e) from None
        for g in got:
            if isinstance(g, BaseException):
                raise as_oserror(path, g) from None
        return got

    def check_reachable(self, path: str) -> None:
        fs, p = filesystem(path)
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
            elif protocol(path) in OBJECT_STORES and not fs.exists(bucket):
                raise InputError(f"{path}: no such bucket: {bucket}")

    def lock(self, path: str, wait: bool, what: str):
        """A store offers no lock that every client honours: one writer at a time is the user's
        to arrange (README); nothing is taken."""
        return contextlib.nullcontext()
