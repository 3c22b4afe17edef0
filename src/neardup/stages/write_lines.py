"""The kept lines of an uncompressed local JSONL file copied from where the read stage saw them
(``read/block-B.lines``: :func:`neardup.stages.read.write_line_bounds`): the byte ranges of the
kept lines are known without reading the file again to find its lines (the 2.3 GB of 1M
documents: ~0.45 CPU-s of the write stage); the kernel copies them (:class:`RangeCopier`). The
same bytes as :func:`neardup.io.formats.jsonl_kept.write_kept_lines`.

Only for a file whose size and modification time are still those the run started with (the
run's identity, ``inputs.json``): one changed since is written the way every other file is, its
lines found again (what that finds, or the error it gives, is today's).
"""

from __future__ import annotations

import os
import stat
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import io as nio
from ..errors import InputError
from ..io.kernel_copy import RangeCopier
from ..io.storage import fs as _fs
from ..io.storage.folder import Folder
from .workdir import LINE_BOUNDS, block_name

BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark starting a file: not part of its first line
FileStat = Tuple[int, int]  # (size, modification time in ns), as the run's identity has them


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
    return {si: (int(inputs[si][2]), int(inputs[si][3])) for si in group
            if sources[si].format == "jsonl" and sources[si].compression is None and len(inputs[si]) == 4}


def copies_lines(src: nio.Source, bounds: Optional[np.ndarray], expected: Optional[FileStat], config,
                 kept: Folder) -> bool:
    """Whether the kept lines of ``src`` are copied from their known ``bounds``: an uncompressed
    local JSONL file, unchanged since the run started (``expected``), every document's line
    known, written as it is to a local kept/."""
    local = _fs.os_path(src.path)
    if (bounds is None or expected is None or local is None or config.output_format != "same"
            or kept.os_path is None or src.compression is not None):
        return False
    try:
        st = os.stat(local)
    except (OSError, ValueError):
        return False
    return (stat.S_ISREG(st.st_mode) and (st.st_size, st.st_mtime_ns) == expected
            and bool(len(bounds) == 0 or bounds[:, 0].min() >= 0))


def kept_ranges(rows: np.ndarray, bounds: np.ndarray, keep: np.ndarray, size: int
                ) -> Tuple[List[int], List[int], bool]:
    """The byte ranges to copy for the kept rows ``keep`` of a file of ``size`` bytes whose
    documents are ``rows`` (sorted) with their lines' ``bounds``: (starts, ends, newline), each
    line with its newline, consecutive lines as one range; ``newline``: the last kept line is
    the file's last and has none (the caller adds it)."""
    if len(keep) == 0:
        return [], [], False
    b = bounds[np.searchsorted(rows, keep)]
    starts = b[:, 0]
    ends = np.minimum(b[:, 1] + 1, size)
    newline = bool(b[-1, 1] >= size)
    joined = starts[1:] == ends[:-1]
    return (starts[np.concatenate(([True], ~joined))].tolist(), ends[np.concatenate((~joined, [True]))].tolist(),
            newline)


def copy_kept_lines(src: nio.Source, rows: np.ndarray, bounds: np.ndarray, keep: np.ndarray, out_path: str,
                    capture: Optional[Dict[int, Optional[bytes]]] = None) -> int:
    """The kept lines of ``src`` (rows ``keep`` of its documents ``rows``, whose lines are
    ``bounds``) written to the local file ``out_path`` by the kernel; ``capture`` as for
    :func:`neardup.io.writer.write_kept`. Returns the lines written."""
    try:
        f = open(_fs.local_path(src.path), "rb", buffering=0)
    except OSError as e:
        raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
    with f, _fs.atomic_write(out_path) as out:
        size = os.fstat(f.fileno()).st_size
        if os.pread(f.fileno(), 3, 0) == BOM:  # the read stage's offsets are of the lines after it
            bounds = bounds + len(BOM)
        starts, ends, newline = kept_ranges(rows, bounds, keep, size)
        out.flush()
        RangeCopier(f.fileno(), out.fileno(), src.name).copy(starts, ends)
        if newline:
            while not os.write(out.fileno(), b"\n"):
                pass
        for row in capture or {}:
            i = int(np.searchsorted(rows, row))
            if i < len(rows) and rows[i] == row:
                a, e = bounds[i].tolist()
                capture[row] = os.pread(f.fileno(), e - a, a)
    return len(keep)
