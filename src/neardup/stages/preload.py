"""The kernels that the stages after the read call first in the driver or on their path, loaded
from numba's disk cache in a thread of their own while the read stage runs (the driver then waits
on the map threads), not each at its first call after it (2-3 CPU-ms each, one after another on
the run's path: the main thread's after the read, the pairs stage's grouping thread's, the write
stage's first copy thread's).

A call that meets a kernel being loaded waits for it on numba's compiler lock, then finds it
loaded; a kernel already loaded is not loaded again. Only what numba's disk cache holds for this
machine is loaded, and only a kernel it holds in one version (the one the run calls: a run calls
each kernel with one set of types); a kernel not there is compiled by its first call, as before,
never here, and one held in several versions is loaded by its first call, as before. The
clusters stage's selection kernel is loaded by that stage itself, and the read stage's by its
map threads as they start.
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import Sequence, Tuple

LATER_KERNELS: Tuple[Tuple[str, str], ...] = (
    ("neardup.kernels.hashing", "_fnv1a_kernel"),        # the read stage's end, in the driver
    ("neardup.kernels.bands", "_group_rows"),            # pairs: the grouping thread
    ("neardup.kernels.bands", "_round_codes"),           # pairs, in the driver
    ("neardup.kernels.verify", "_exact_coded_kernel"),   # pairs (--verify exact), in the driver
    ("neardup.kernels.lines", "_newlines"),              # write, in the driver (not always: later_kernels)
    ("neardup.kernels.filecopy", "_copy_ranges_kernel"),  # write: the first copy thread
    ("neardup.kernels.filecopy", "kept_line_ranges"),    # write: the kept lines' ranges, in the driver
    ("neardup.kernels.filecopy", "fill_ranges"),         # write: a large file's kept lines, read...
    ("neardup.kernels.filecopy", "write_all"),           # ... and written (io.kernel_copy.RangeCopier.piped)
)


def later_kernels(run) -> Tuple[Tuple[str, str], ...]:
    """LATER_KERNELS less what ``run`` (a :class:`~neardup.stages.context.RunContext`) will not
    call: ``_newlines`` finds the lines of a JSONL file that pyarrow reads, or whose kept lines
    are found again to be written; not of one that the scanner reads (its spans are the lines)
    and whose kept lines are copied from them, nor of any other format (8-14 CPU-ms of the
    loading thread in a 100,000-document run: issue 32)."""
    from ..kernels import jsonl as scanner
    from .write_lines import plain_local_jsonl, records_lines
    paths = [plain_local_jsonl(s) for s in run.sources if s.format == "jsonl"]
    needed = bool(paths) and not (run.config.score_column is None and records_lines(run.config, run.output)
                                  and None not in paths and scanner.worth_it(min(_size(p) for p in paths)))
    return tuple(k for k in LATER_KERNELS if k[1] != "_newlines" or needed)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # as the read stage counts it: small
        return 0


def load_ahead(kernels: Sequence[Tuple[str, str]] = LATER_KERNELS) -> threading.Thread:
    """Starts a daemon thread that loads ``kernels`` ((module, name) of
    :func:`neardup.kernels.compile.kernel` dispatchers) from numba's disk cache. Their modules are
    imported first, in the caller's thread (an import in the new thread could meet one of the
    caller's). Errors are left to each kernel's first call."""
    dispatchers = [getattr(importlib.import_module(module), name) for module, name in kernels]

    def run():
        for dispatcher in dispatchers:
            try:
                sig = cached_signature(dispatcher)
                if sig is not None:
                    dispatcher.compile(sig)  # numba's own path: a cache hit is loaded, under its lock
            except Exception:  # numba's cache layout is not public: the first call loads it instead
                pass

    thread = threading.Thread(target=run, name="neardup-kernels", daemon=True)
    thread.start()
    return thread


def cached_signature(dispatcher):
    """The signature numba's disk cache holds compiled for ``dispatcher`` as it is, on this
    machine (its index, as numba reads it, less the entries of another machine's CPU or of
    another version of the function, which numba would compile over), when it holds one and it
    is not loaded yet; else None. A kernel the cache holds in several versions (one called with
    read-only arrays and one with writable ones, as tests do) is left to its first call, which
    loads the one it needs, not every version."""
    cache = getattr(dispatcher, "_cache", None)
    if cache is None or not hasattr(cache, "files"):
        return None
    files = cache.files()
    codegen = dispatcher.targetctx.codegen()
    held = [key[0] for key in files._cache_file._load_index() if key == files._index_key(key[0], codegen)]
    return held[0] if len(held) == 1 and tuple(held[0]) not in dispatcher.overloads else None
