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
clusters stage's selection kernel is loaded by that stage itself.

The read stage's own kernels (:func:`read_kernels`) are loaded first, in the order its map
threads call them, every version the cache holds: started with the stage, the thread has
loaded each before a map thread, which reads and scans its first block meanwhile, calls it.
Left to those calls, the first kernel call of a 100,000-document run came 65-93 ms after the
stage's start (each map thread loading what it met first, one at a time under numba's lock,
behind the later stages' kernels that this thread was loading then); loaded here first,
32-50 ms (issue 32).
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


# The read stage's kernels in the order a map thread calls them: the JSONL scanner's (a block
# scanned, its texts' spans found, its ids gathered), then the fused MinHash kernel, the
# fingerprints' codes (--verify exact) and the band keys.
SCANNER_KERNELS: Tuple[Tuple[str, str], ...] = (
    ("neardup.kernels.jsonl", "_scan_block"),
    ("neardup.kernels.jsonl", "_offsets"),
)
SCANNER_ID_KERNELS: Tuple[Tuple[str, str], ...] = (("neardup.kernels.jsonl", "_gather_ids"),)
MINHASH_KERNELS: Tuple[Tuple[str, str], ...] = (("neardup.kernels.minhash", "_process_kernel"),)
CODE_KERNELS: Tuple[Tuple[str, str], ...] = (
    ("neardup.kernels.eliasfano", "_code_bytes_kernel"),
    ("neardup.kernels.eliasfano", "_encode_parts_kernel"),
)
BAND_KERNELS: Tuple[Tuple[str, str], ...] = (("neardup.kernels.bands", "_band_keys_kernel"),)


def read_kernels(run) -> Tuple[Tuple[str, str], ...]:
    """The kernels that the read stage of ``run`` (a :class:`~neardup.stages.context.RunContext`)
    calls first, in that order: the scanner's where a JSONL source is read by it
    (:func:`neardup.kernels.jsonl.worth_it`: compiled, or large enough to compile it), with
    ``_gather_ids`` where there is an id column; for texts (any source but signatures) the MinHash
    kernel, and with ``--verify exact`` the codes' kernels; the band keys. The scanner's kernels
    for a text with escapes or one copied out of its block (``_in_place``, ``_gather``) are left to
    their first call: most blocks call neither."""
    from ..io.sources import SIGNATURE_FORMATS
    from ..kernels import jsonl as scanner
    config = run.config
    out: Tuple[Tuple[str, str], ...] = ()
    if any(s.format == "jsonl" and scanner.worth_it(_size(s.path)) for s in run.sources):
        out += SCANNER_KERNELS + (SCANNER_ID_KERNELS if config.id_column is not None else ())
    if any(s.format not in SIGNATURE_FORMATS for s in run.sources):
        out += MINHASH_KERNELS + (CODE_KERNELS if config.verify == "exact" else ())
    return out + (BAND_KERNELS if run.sources else ())


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


def load_ahead(kernels: Sequence[Tuple[str, str]] = LATER_KERNELS,
               first: Sequence[Tuple[str, str]] = ()) -> threading.Thread:
    """Starts a daemon thread that loads ``first``, every version of each that numba's disk cache
    holds (:func:`cached_signatures`: the read stage's kernels, which its map threads are about
    to call, in whichever version the input makes), then ``kernels`` ((module, name) of
    :func:`neardup.kernels.compile.kernel` dispatchers) from numba's disk cache, each held in one
    version (:func:`cached_signature`). Their modules are imported first, in the caller's thread
    (an import in the new thread could meet one of the caller's). Errors are left to each
    kernel's first call."""
    firsts = [getattr(importlib.import_module(module), name) for module, name in first]
    dispatchers = [getattr(importlib.import_module(module), name) for module, name in kernels]

    def run():
        for dispatcher in firsts:
            try:
                for sig in cached_signatures(dispatcher):
                    dispatcher.compile(sig)
            except Exception:  # as below
                pass
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


def cached_signatures(dispatcher) -> list:
    """Every signature numba's disk cache holds compiled for ``dispatcher`` as it is, on this
    machine (see :func:`cached_signature`), not loaded yet: 1-4 ms of loading each, against the
    lock's wait of a map thread that meets a kernel not loaded while another thread loads one."""
    return [sig for sig in _held(dispatcher) if tuple(sig) not in dispatcher.overloads]


def cached_signature(dispatcher):
    """The signature numba's disk cache holds compiled for ``dispatcher`` as it is, on this
    machine (its index, as numba reads it, less the entries of another machine's CPU or of
    another version of the function, which numba would compile over), when it holds one and it
    is not loaded yet; else None. A kernel the cache holds in several versions (one called with
    read-only arrays and one with writable ones, as tests do) is left to its first call, which
    loads the one it needs, not every version."""
    held = _held(dispatcher)
    return held[0] if len(held) == 1 and tuple(held[0]) not in dispatcher.overloads else None


def _held(dispatcher) -> list:
    """The signatures numba's disk cache holds for ``dispatcher`` as it is, on this machine (its
    index, as numba reads it, less the entries of another machine's CPU or of another version of
    the function, which numba would compile over); none for a dispatcher without a disk cache."""
    cache = getattr(dispatcher, "_cache", None)
    if cache is None or not hasattr(cache, "files"):
        return []
    files = cache.files()
    codegen = dispatcher.targetctx.codegen()
    return [key[0] for key in files._cache_file._load_index() if key == files._index_key(key[0], codegen)]
