"""Inputs read without leaving them in the page cache unless they were there (:class:`DropBehind`).

A run reads each input file from start to end, once in the read stage and once more to write
what it keeps. A file that was not in the page cache is read from storage into fresh pages of it;
on a machine whose memory holds less than the corpus and the run's own files, those pages push
out the work files the next stage reads and are themselves gone before the write stage comes
back, and each fresh page costs the kernel more than the copy (on the benchmark machine, ~1
CPU-second a GB read cold against ~0.1 when the pages read are given back as the reader passes
them: ``bench/page_cache.py``). So the rule is: **what was in the page cache when a file was
opened stays there; what the run brought in is given back (``POSIX_FADV_DONTNEED``) once the
reader is past it.** A corpus already in memory is read as before; a corpus read from storage
leaves the page cache as it found it.

Which pages of the file were cached is asked of the kernel when the file is opened: how many, by
one ``cachestat`` call (Linux 6.5+: a file cached whole is left alone at once, a file not cached
at all is given back whole), page by page by ``mincore`` over a read-only mapping of it where
some are; the pages are given back at least :data:`REGION` bytes at a time. The first bytes
that discovery reads to tell a file's format and ids, and those where a large file is cut into
ranges read in parallel (the line each cut falls in), are cached before the read opens the
file, and stay (with the kernel's read-ahead, a region each: at 100k documents 8.5 MB of the
file's 230 MB). The kernel answers truthfully only for a file the process may write or owns;
for any other file (a shared, read-only corpus) nothing is given back. Only local files of at
least two regions; nothing on a platform without ``mincore`` or ``posix_fadvise``;
``NEARDUP_DROP_BEHIND=0`` turns it off. Readers use :func:`given_back`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, Optional, Tuple

REGION = 2 << 20  # bytes a region: what is asked at once, and given back at once
READ_AHEAD = 16 << 20  # bytes past a range's end that its reads may have brought in (the kernel's read-ahead)
_WINDOW = 1 << 30  # bytes mapped at once to ask (a large file: one window after another)


def _libc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]

    class CachestatRange(ctypes.Structure):  # struct cachestat_range
        _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]

    libc.cachestat_range = CachestatRange
    return libc


_LIBC = None
_PAGE = 4096


def _available() -> bool:
    global _LIBC, _PAGE
    if not sys.platform.startswith("linux") or not hasattr(os, "posix_fadvise"):
        return False
    if _LIBC is None:
        try:
            _LIBC = _libc()
            _PAGE = os.sysconf("SC_PAGE_SIZE")
        except (OSError, AttributeError, ValueError):
            return False
    return True


def resident_pages(fd: int, size: int, start: int = 0, end: Optional[int] = None):
    """For each page of the file ``fd`` (``size`` bytes), True where it is in the page cache now
    (a numpy bool array), asked for the pages of bytes [start, end) only (``start`` a multiple of
    the page size; the others True); None where the kernel cannot say (no ``mincore`` here, the
    mapping refused)."""
    import ctypes

    import numpy as np
    if not _available():
        return None
    libc = _LIBC
    end = size if end is None else min(end, size)
    out = np.ones((size + _PAGE - 1) // _PAGE, np.bool_)
    at = start
    while at < end:
        length = min(_WINDOW, end - at)
        addr = libc.mmap(None, length, 1, 1, fd, at)  # PROT_READ, MAP_SHARED
        if addr is None or addr == ctypes.c_void_p(-1).value:
            return None
        try:
            pages = (length + _PAGE - 1) // _PAGE
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, length, vec) != 0:
                return None
        finally:
            libc.munmap(addr, length)
        first = at // _PAGE
        out[first:first + pages] = np.frombuffer(vec, np.uint8) & 1  # (the other bits are reserved)
        at += length
    return out


def cached_regions(fd: int, size: int) -> Optional[bytearray]:
    """For each REGION of the file ``fd``, 1 where at least one of its pages is in the page cache
    now, else 0 (None: see :func:`resident_pages`)."""
    import numpy as np
    pages = resident_pages(fd, size)
    if pages is None:
        return None
    return bytearray(_any_per_region(pages).astype(np.uint8).tobytes())


def _any_per_region(pages):
    """For each REGION, whether any of its pages (a bool a page) is set."""
    import numpy as np
    per = REGION // _PAGE
    regions = -(-len(pages) // per)
    padded = np.zeros(regions * per, np.bool_)
    padded[:len(pages)] = pages
    return padded.reshape(regions, per).any(axis=1)


_CACHESTAT = 451  # the syscall's number, one on every architecture (Linux 6.5 and later)
_cachestat_works = True


def cached_count(fd: int, start: int, end: int) -> Optional[int]:
    """How many pages of bytes [start, end) of the file ``fd`` are in the page cache now, by
    ``cachestat`` (one call, a fraction of a millisecond for a 2 GB file, against ~15 ms for
    ``mincore`` over it); None where the kernel has no such call (older than 6.5) or refuses it."""
    global _cachestat_works
    if not _cachestat_works or not _available():
        return None
    import ctypes
    span = _LIBC.cachestat_range(start, max(end - start, 1))
    stat = (ctypes.c_uint64 * 5)()  # nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted
    if _LIBC.syscall(_CACHESTAT, fd, ctypes.byref(span), ctypes.byref(stat), 0) != 0:
        _cachestat_works = False  # ENOSYS, EPERM: mincore alone from now on
        return None
    return int(stat[0])


def _trusted(fd: int) -> bool:
    """Whether ``mincore`` tells the page cache of this file truthfully to this process: the
    kernel does so for a file the process owns or may write (else it reports only the pages this
    process has mapped: none, and every cached page would be given back)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return os.geteuid() in (0, st.st_uid) or os.access(f"/proc/self/fd/{fd}", os.W_OK)


class DropBehind:
    """A file read from start to end (or to a place) whose pages the run brought into the page
    cache are given back as the reader passes them (see the module). ``advance(pos)`` once the
    reader has used the bytes before ``pos``; ``close()`` at the end. :meth:`of` gives None where
    there is nothing to do (a small file, a file cached whole, no way to ask)."""

    def __init__(self, fd: int, fresh):
        self.fd = fd
        self.fresh = fresh  # True: a page that was not cached at the start (numpy bool, a page each)
        self.done = 0  # pages passed

    @classmethod
    def of(cls, path: Optional[str], start: int = 0, end: Optional[int] = None,
           fd: Optional[int] = None) -> Optional["DropBehind"]:
        """For the local file ``path`` (None: not local), read from ``start`` to ``end`` (None:
        its end): only the pages from the region of ``start`` to READ_AHEAD past ``end`` are
        asked after, and may be given back. ``fd``: the reader's own descriptor of that file
        (a small file is then told by one ``fstat``, with no file opened; a copy of it is kept
        where there is something to give back)."""
        if path is None or not _available() or os.environ.get("NEARDUP_DROP_BEHIND", "1") == "0":
            return None
        try:
            if fd is not None:
                if os.fstat(fd).st_size < 2 * REGION:  # (the common case of many small files)
                    return None
                fd = os.dup(fd)
            else:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        keep = False
        try:
            drop = cls._watch(fd, start, end)
            keep = drop is not None
            return drop
        finally:
            if not keep:
                os.close(fd)

    @classmethod
    def _watch(cls, fd: int, start: int, end: Optional[int]) -> Optional["DropBehind"]:
        """:meth:`of` over the descriptor ``fd`` (the DropBehind's own, closed by it)."""
        import numpy as np
        size = os.fstat(fd).st_size
        if size < 2 * REGION or not _trusted(fd):
            return None
        first = (start // REGION) * REGION
        last = size if end is None else min(size, end + READ_AHEAD)
        # a file cached whole or not at all, as most are, told by one cachestat call; a mix
        # (or no cachestat) page by page by mincore
        count = cached_count(fd, first, last) if last > first else None
        pages = -(-last // _PAGE) - first // _PAGE
        if count is not None and count >= pages:
            return None
        if count == 0:
            cached = np.ones(-(-size // _PAGE), np.bool_)
            cached[first // _PAGE:-(-last // _PAGE)] = False
        else:
            cached = resident_pages(fd, size, first, last)
        if cached is None or cached.all():
            return None
        # a region counts as brought in by this run only when none of its pages was cached:
        # pages cached here and there (a corpus partly paged out) are left as they are, not
        # given back in many small runs (each call that cannot give back all it names drains
        # every core's page lists)
        any_cached = _any_per_region(cached)
        if any_cached.all():
            return None
        drop = cls(fd, np.repeat(~any_cached, REGION // _PAGE)[:len(cached)])
        drop.done = first // _PAGE  # (whole regions: see advance)
        return drop

    def advance(self, pos: int) -> None:
        """The reader has used every byte before ``pos``: the pages passed since the last call
        that were not cached at the start are given back (in runs of such pages), whole REGIONs
        of the file at a time (the end of the file the last): the kernel gives back a large
        folio of the page cache (up to 2 MB, read ahead at once) only when asked for all of it."""
        import numpy as np
        per = REGION // _PAGE
        upto = len(self.fresh) if pos >= len(self.fresh) * _PAGE else (pos // REGION) * per
        k = self.done
        if upto <= k:
            return
        part = self.fresh[k:upto]
        if part.all():
            runs = [(k, upto)]
        else:
            edges = np.flatnonzero(np.diff(np.concatenate(([False], part, [False])).astype(np.int8)))
            runs = [(k + int(a), k + int(b)) for a, b in zip(edges[0::2], edges[1::2])]
        for a, b in runs:
            try:
                os.posix_fadvise(self.fd, a * _PAGE, (b - a) * _PAGE, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
        self.done = upto

    def close(self, pos: Optional[int] = None) -> None:
        """Done reading (``pos``: where the reader of a range stopped, None: at the end of the
        file). A range's reader gives back what it passed and what the kernel read ahead for
        it past its end (READ_AHEAD bytes: pages not cached when it started, which the reader of
        the next range, started after it, found cached and kept)."""
        if self.fd < 0:
            return
        try:
            self.advance(len(self.fresh) * _PAGE if pos is None else pos + READ_AHEAD)
        finally:
            os.close(self.fd)
            self.fd = -1


@contextlib.contextmanager
def given_back(path: Optional[str], file=None,
               span: Optional[Tuple[int, int]] = None) -> Iterator[Optional[DropBehind]]:
    """The :class:`DropBehind` of a reader of the local file ``path`` (None: not local, nothing
    done) through its open ``file`` (one with a descriptor, else the path is opened), of the
    bytes ``span`` (None: the whole file), or None where there is nothing to give back; closed
    when the reader is done (at the span's end, or the file's)."""
    try:
        fd = None if file is None else file.fileno()
    except (AttributeError, OSError, ValueError):  # (a stream of the store, a Python object)
        fd = None
    drop = DropBehind.of(path, *((0, None) if span is None else span), fd=fd)
    try:
        yield drop
    finally:
        if drop is not None:
            drop.close(None if span is None else span[1])
