"""The kept lines of an uncompressed local JSONL file copied from where the read stage saw them
(``read/block-B.lines``: :func:`neardup.stages.read.write_line_bounds`): the byte ranges of the
kept lines are known without reading the file again to find its lines (the 2.3 GB of 1M
documents: ~0.45 CPU-s of the write stage); the kernel copies them (:class:`RangeCopier`). The
same bytes as :func:`neardup.io.formats.jsonl_kept.write_kept_lines`.

Only for a file whose size and modification time are still those the run started with (the
run's identity, ``inputs.json``) and whose inode and change time (st_ctime, which no one can set
back, unlike the modification time) are still those the read stage saw before it read the file
(``read/block-B.lines-stat``: each block that read it, a split file's ranges too, in this
process or an earlier one), all compared on the file as opened for the copy (``fstat``: no
window between the check and the open): one changed since is written the way every other file
is, its lines found again (what that finds, or the error it gives, is today's). A file changed
within :data:`TIMESTAMP_GRAIN_NS` before the read stage saw it is not recorded (git's "racily
clean" files): a change after, within the same tick of a coarse clock, could leave its times
as they were.

Only for a local kept/ (:func:`records_lines`): the read stage writes no lines for another.
"""

from __future__ import annotations

import os
import stat
import time
from codecs import BOM_UTF8
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import io as nio
from ..io.kernel_copy import RangeCopier
from ..io.page_cache import given_back
from ..io.storage import fs as _fs
from ..io.storage.folder import Folder
from .workdir import LINE_BOUNDS, LINE_STATS, block_name

# a file's times are trusted only where they are this much older than the moment the read stage
# saw them: the coarsest clock of a file system that keeps them (FAT's 2 s; ext4, xfs, tmpfs:
# the kernel's tick, 1-10 ms; NFS: the server's clock, trusted as far as it agrees with ours)
TIMESTAMP_GRAIN_NS = 2_000_000_000
DROP_BYTES = 64 << 20  # bytes of a file read from storage whose kept ranges are copied before its pages are given back
# (size, modification time in ns) as the run's identity has them, then (device, inode, change
# time in ns) as the read stage saw them
FileStat = Tuple[int, ...]


def copies_whole(config) -> bool:
    """Whether kept/ gets a kept text file as it stands (copied whole: no marks, the input's
    format); the kept lines of a JSONL file are copied from their bounds only then (the read
    stage writes them only then)."""
    return not config.mark and config.output_format == "same"


def records_lines(config, output: Folder) -> bool:
    """Whether the read stage records the lines of the uncompressed local JSONL files it reads
    (for :func:`copy_kept_lines`): their kept lines copied as they are (:func:`copies_whole`) to
    a local output (the copy's only use: a store's kept/ gets them the way every file is written)."""
    return copies_whole(config) and output.os_path is not None


def plain_local_jsonl(src: nio.Source) -> Optional[str]:
    """The local path of ``src`` where it is an uncompressed local JSONL file (the read stage sees
    its lines where they lie in it), else None."""
    return _fs.os_path(src.path) if src.format == "jsonl" and src.compression is None else None


def seen_stats(sources: Sequence[nio.Source], members: Sequence[int]) -> np.ndarray:
    """(source, device, inode, change time in ns) int64 rows of the uncompressed local JSONL files
    of ``members`` as they are before the read stage reads them (a file changed after is one
    changed since: its change time is later); none for a file whose modification or change time
    is not :data:`TIMESTAMP_GRAIN_NS` older than now (racily clean: a change after could keep them)."""
    out = []
    for si in members:
        local = plain_local_jsonl(sources[si])
        if local is None:
            continue
        try:
            st = os.stat(local)
        except (OSError, ValueError):
            continue  # the read says why
        if max(st.st_mtime_ns, st.st_ctime_ns) > time.time_ns() - TIMESTAMP_GRAIN_NS:
            continue
        out.append((si, st.st_dev, st.st_ino, st.st_ctime_ns))
    return np.array(out, np.int64).reshape(-1, 4)


def read_stats(work: Folder, block_of: Dict[int, List[int]], expected: Dict[int, FileStat]
               ) -> Dict[int, FileStat]:
    """``expected`` (:func:`expected_stats`) with the device, inode and change time that every
    block of each file (``block_of``: a split file's ranges) recorded (:func:`seen_stats`); a file
    without them (a work dir of a version before them), or whose blocks saw different ones (it
    changed between two ranges' reads), left out: its lines found again."""
    seen: Dict[int, Optional[Tuple[int, int, int]]] = {}
    by_block: Dict[int, List[int]] = {}
    for si in expected:
        for b in block_of[si]:
            by_block.setdefault(b, []).append(si)
    for b, group in by_block.items():
        name = block_name(b, LINE_STATS)
        rows = np.frombuffer(work.read_bytes(name), np.int64).reshape(-1, 4) if work.exists(name) else None
        recorded = {} if rows is None else {r[0]: tuple(r[1:]) for r in rows.tolist()}
        for si in group:
            st = recorded.get(si)
            seen[si] = st if seen.get(si, st) == st else None
    return {si: expected[si] + st for si, st in seen.items() if st is not None}


def block_lines(work: Folder, block: int) -> Optional[np.ndarray]:
    """The (n, 2) int64 line bounds of a block's documents, or None when it has none."""
    name = block_name(block, LINE_BOUNDS)
    if not work.exists(name):
        return None
    return np.frombuffer(work.read_bytes(name), np.int64).reshape(-1, 2)


def expected_stats(inputs: Optional[Sequence], sources: Sequence[nio.Source], group: Sequence[int]
                   ) -> Dict[int, FileStat]:
    """{source: (size, mtime_ns)} as the run's identity recorded them (``WorkDir.inputs``:
    [name, path, size, mtime] each), for the uncompressed JSONL files of ``group``."""
    if inputs is None:
        return {}
    return {si: recorded for si in group
            if plain_local_jsonl(sources[si]) is not None and (recorded := recorded_stat(inputs, si)) is not None}


_FILE_ROW = 4  # the length of a file's row in WorkDir.inputs: [name, path, size, mtime]; a table's is shorter


def recorded_stat(inputs: Sequence, si: int) -> Optional[Tuple[int, int]]:
    """(size, mtime_ns) of source ``si`` as the run's identity recorded it (``WorkDir.inputs``:
    [name, path, size, mtime] for a file), None for an in-memory table's (no size)."""
    row = inputs[si]
    return (int(row[2]), int(row[3])) if len(row) == _FILE_ROW else None


def recorded_sizes(inputs: Sequence, sources: Sequence[int]) -> List[int]:
    """The size of each of ``sources`` as :func:`recorded_stat` gives it, -1 for an in-memory
    table's, without a call a source (100,000 files: 0.016 -> 0.008 CPU-s)."""
    return [int(row[2]) if len(row) == _FILE_ROW else -1 for row in map(inputs.__getitem__, sources)]


def copies_lines(src: nio.Source, bounds: Optional[np.ndarray], expected: Optional[FileStat], config,
                 kept: Folder) -> bool:
    """Whether the kept lines of ``src`` may be copied from their known ``bounds``: an
    uncompressed local JSONL file that the read stage saw (``expected``: :func:`read_stats`),
    every document's line known, written as it is to a local kept/. Whether it is unchanged
    since is :func:`copy_kept_lines`'s check, on the file it opens."""
    return (bounds is not None and expected is not None and plain_local_jsonl(src) is not None
            and copies_whole(config) and kept.os_path is not None and bool(len(bounds) == 0 or bounds[:, 0].min() >= 0))


def unchanged(st: os.stat_result, expected: FileStat) -> bool:
    """Whether the file of ``st`` is a regular file as ``expected`` (:func:`read_stats`) says it was."""
    return stat.S_ISREG(st.st_mode) and (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_ctime_ns) == expected


def kept_ranges(rows: np.ndarray, bounds: np.ndarray, keep: np.ndarray, size: int
                ) -> Tuple[np.ndarray, np.ndarray, bool]:
    """The byte ranges to copy for the kept rows ``keep`` of a file of ``size`` bytes whose
    documents are ``rows`` (sorted) with their lines' ``bounds``: (starts, ends, newline), each
    line with its newline, consecutive lines as one range; ``newline``: the last kept line is
    the file's last and has none (the caller adds it). Rows that go on by one (a file without
    blank or bad lines) give each kept row's place by a subtraction, not a binary search (at 1M
    documents, ~0.03 s before the copy can start). The ranges as int64 arrays, which the copy
    takes as they are (lists of 92,000 ranges made and turned back: ~10 ms at 1M documents),
    made by one compiled pass (:func:`neardup.kernels.filecopy.kept_line_ranges`: numpy's
    gather, compares and masks ~30 ms of the main thread before the copy at 1M)."""
    if len(keep) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), False
    from ..kernels.filecopy import kept_line_ranges
    gapless = rows[-1] - rows[0] == len(rows) - 1 and bool(np.all(rows[1:] > rows[:-1]))
    last = keep[-1] - rows[0] if gapless else np.searchsorted(rows, keep[-1])
    starts, ends = np.empty(len(keep), np.int64), np.empty(len(keep), np.int64)
    n = kept_line_ranges(_plain(rows), _plain(bounds), _plain(keep), int(size), bool(gapless), starts, ends)
    return starts[:n], ends[:n], bool(bounds[last, 1] >= size)


def _plain(a: np.ndarray) -> np.ndarray:
    """``a`` as a contiguous, writable int64 array (a copy only where it is not: a block's
    bounds read from its file are read-only), so that the kernel is compiled, cached and loaded
    ahead in one version (:mod:`.preload`), not one for read-only arrays beside."""
    a = np.ascontiguousarray(a, np.int64)
    return a if a.flags.writeable else a.copy()


def copy_kept_lines(src: nio.Source, rows: np.ndarray, bounds: np.ndarray, keep: np.ndarray, out_path: str,
                    expected: FileStat, capture: Optional[Dict[int, Optional[bytes]]] = None,
                    started: Optional[Callable[[], None]] = None) -> Optional[int]:
    """The kept lines of ``src`` (rows ``keep`` of its documents ``rows``, whose lines are
    ``bounds``) written to the local file ``out_path`` by the kernel, where the file opened is
    still as ``expected`` (:func:`unchanged`); ``capture`` as for
    :func:`neardup.io.writer.write_kept`. Returns the lines written, or None (nothing written)
    for a file changed since or that cannot be opened: the caller finds its lines again.
    ``started``: called as the copy starts (its ranges known: what runs from then on holds
    Python's lock no more)."""
    try:
        f = open(_fs.local_path(src.path), "rb", buffering=0)
    except (OSError, ValueError):
        return None  # the lines found again say why
    with f:
        st = os.fstat(f.fileno())
        if not unchanged(st, expected):
            return None
        with _fs.atomic_write(out_path) as out:
            return _copy_ranges(f, out, src.name, st.st_size, rows, bounds, keep, capture, started)


def _copy_ranges(f, out, name: str, size: int, rows: np.ndarray, bounds: np.ndarray, keep: np.ndarray,
                 capture: Optional[Dict[int, Optional[bytes]]], started: Optional[Callable[[], None]] = None) -> int:
    """:func:`copy_kept_lines` of the open file ``f`` of ``size`` bytes to ``out``."""
    if os.pread(f.fileno(), 3, 0) == BOM_UTF8:  # the read stage's offsets are of the lines after it
        bounds = bounds + len(BOM_UTF8)
    starts, ends, newline = kept_ranges(rows, bounds, keep, size)
    out.flush()
    if started is not None:
        started()
    copier = RangeCopier(f.fileno(), out.fileno(), name)
    # a file read from storage: its pages given back behind the copy (neardup.io.page_cache),
    # the ranges copied DROP_BYTES of the file at a time; a file in the page cache: at once
    with given_back(f.name if isinstance(f.name, str) else None, f) as drop:
        if drop is None:
            copier.copy(starts, ends)
        else:
            cuts = np.searchsorted(starts, np.arange(DROP_BYTES, size, DROP_BYTES, dtype=np.int64))
            for a, b in zip(np.concatenate(([0], cuts)).tolist(), np.concatenate((cuts, [len(starts)])).tolist()):
                if b > a:
                    copier.copy(starts[a:b], ends[a:b])
                    drop.advance(int(ends[b - 1]))
    if newline:
        os.write(out.fileno(), b"\n")
    for row in capture or {}:
        i = int(np.searchsorted(rows, row))
        if i < len(rows) and rows[i] == row:
            a, e = bounds[i].tolist()
            capture[row] = os.pread(f.fileno(), e - a, a)
    return len(keep)
