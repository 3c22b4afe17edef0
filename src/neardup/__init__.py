"""neardup: find and remove near-duplicate documents with MinHash LSH.

>>> import neardup
>>> result = neardup.dedup("corpus.jsonl", output="out", threshold=0.8)   # doctest: +SKIP
>>> result.stats["counts"]                                                # doctest: +SKIP
"""

from ._version import __version__


def kernels_cached() -> bool:
    """Whether numba's on-disk cache (see :func:`neardup.kernels.compile.cache_dir`) holds the main
    kernels of a dedup run; False means the next run first compiles them (10-40 s, once per
    version)."""
    try:
        from .kernels import bands, components, minhash, verify
        from .kernels.compile import is_cached
        kernels = (minhash._process_kernel, bands._band_keys_kernel, components._select_kernel,
                   verify._exact_coded_kernel)
        return all(is_cached(k) for k in kernels)
    except Exception:  # numba's cache layout is not public: never fail a run over a message
        return True


from .errors import ConfigError, InputError, NeardupError, SkippedWarning, StorageError  # noqa: E402
from ._lazy import lazy_names as _lazy_names  # noqa: E402

# The public names that need numpy, numba or the pipeline are imported on first use (module
# __getattr__): `import neardup` is the version and the errors alone (a few ms), so that a
# command that draws a report or prints the parameters, a Ray driver or a program that only
# catches neardup's errors does not load numba and the kernels (0.4-0.5 s). Each name, once
# asked for, is set on the module: later uses are plain attribute reads.
_LAZY = {"Config": ".config", "MinHasher": ".kernels.minhash",
         "candidate_probability": ".config.params", "choose_params": ".config.params",
         "false_negative_area": ".config.params", "false_positive_area": ".config.params",
         "midpoint": ".config.params",
         "dedup": ".api", "DedupResult": ".api", "signatures": ".api", "Index": ".index"}


# --------------------------------------------------------------------------- first-call warm-up
# A fresh process pays, on its first MinHash call, for things done once per process: numba's
# typing and target contexts (their registries of typing and lowering functions, 0.25-0.8 s,
# including scipy.linalg, which numba imports for its BLAS check when scipy is installed) and
# pandas, which pyarrow imports on its first pa.array when pandas is installed (0.1-0.4 s).
# neardup.warmup() does both in a thread, so that a caller who has other work to do first
# (reading its data) does not wait for them later. Only when called: `import neardup` starts no
# thread and registers no hook.
# It is opt-in: measured (bench/signatures.py), it helps only when about half a second of work
# that releases the GIL lies between it and the first call, and its own work holds the GIL.
#
# - Kernels are not loaded ahead (20-40 ms each from numba's disk cache): loading a parallel
#   kernel starts numba's threading layer, and with GNU OpenMP numba then kills a forked child
#   that runs a parallel kernel. A process that has not called a kernel may still fork, as before.
# - A call that needs numba meanwhile waits for it: numba's compiler lock (held by the warm-up
#   while it builds the contexts, as numba's first dispatch would hold it) and the import locks
#   serialise the two threads.
# - os.fork waits for the warm-up to finish (a child must not inherit a lock held by it), and so
#   does the interpreter's exit (after asking it to stop before its next step).

_warmup_thread = None
_warmup_stop = False
_warmup_log = []  # (step, seconds, error or None): what the warm-up did, for benchmarks


def _warm_arrow() -> None:
    import pyarrow as pa
    pa.array([""], pa.large_string())  # pyarrow imports pandas here, when it is installed


def _warm_numba_typing() -> None:
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target
    with global_compiler_lock:
        cpu_target.typing_context.refresh()


def _warm_numba_target() -> None:
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target
    with global_compiler_lock:
        cpu_target.target_context.refresh()


def _start_numba(blas: bool = True) -> None:
    """Sets up numba in this thread now, as the process's first kernel load would: its target
    context and its runtime (NRT); kernels then load from the cache without numba's contexts
    refreshed (:func:`neardup.kernels.compile._load`). For a program that knows it runs kernels
    next. ``blas=False``, for a process that runs neardup's kernels alone (the command line): the
    kernels it loads do not make numba check for BLAS, which imports SciPy (0.1-0.2 s when SciPy
    is installed; see :func:`neardup.kernels.compile.skip_blas_check`). Errors are left to the
    first kernel call."""
    try:
        from numba.core.registry import cpu_target

        from .kernels import compile
        if not blas:
            compile.skip_blas_check()
        compile.start_runtime(cpu_target.target_context)
    except Exception:  # the first kernel call does the work instead, and says what is wrong
        pass


def _warmup_run() -> None:
    import time
    for step in (_warm_arrow, _warm_numba_typing, _warm_numba_target):
        if _warmup_stop:
            return
        t0 = time.perf_counter()
        error = None
        try:
            step()
        except Exception as exc:  # a warm-up never fails anything: the first call does the work instead
            error = repr(exc)
        _warmup_log.append((step.__name__, time.perf_counter() - t0, error))


def warmup_wait(timeout=None) -> None:
    """Waits for the background warm-up started by :func:`warmup` (if any) to finish."""
    import threading
    t = _warmup_thread
    if t is not None and t is not threading.current_thread():
        t.join(timeout)


def _warmup_stop_and_wait() -> None:
    global _warmup_stop
    _warmup_stop = True
    warmup_wait()


def warmup() -> None:
    """Starts, in a background thread, the once-per-process set-up that the first MinHash call
    would otherwise pay (numba's typing and target contexts, pyarrow's pandas import: 0.3-1 s),
    and returns at once. Worth it when the caller has half a second or more of other work to do
    before its first call (reading data); a second call does nothing."""
    global _warmup_thread
    if _warmup_thread is not None:
        return
    import atexit
    import concurrent.futures.thread  # noqa: F401 - see below
    import os
    import threading

    # A module imported by the warm-up that registers its own fork hooks while os.fork waits in
    # ours would have its "before" hook skipped and its "after" hook run (concurrent.futures, which
    # pandas imports, then releases a lock it never took): such modules are imported here, first.
    _warmup_thread = threading.Thread(target=_warmup_run, name="neardup-warmup", daemon=True)
    if hasattr(os, "register_at_fork"):
        # bounded: a fork from inside an import the warm-up waits for must not hang for ever
        os.register_at_fork(before=lambda: warmup_wait(30.0))
    atexit.register(_warmup_stop_and_wait)
    _warmup_thread.start()


__getattr__ = _lazy_names(globals(), _LAZY)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["dedup", "DedupResult", "signatures", "Config", "Index", "MinHasher", "NeardupError", "ConfigError", "InputError",
           "StorageError", "SkippedWarning",
           "candidate_probability", "midpoint", "false_positive_area", "false_negative_area", "choose_params",
           "warmup", "warmup_wait"]

