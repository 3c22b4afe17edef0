"""neardup: find and remove near-duplicate documents with MinHash LSH.

>>> import neardup
>>> result = neardup.dedup("corpus.jsonl", output="out", threshold=0.8)   # doctest: +SKIP
>>> result.stats["counts"]                                                # doctest: +SKIP
"""

from ._version import __version__


def _kernel_cache_dir() -> None:
    """Points numba's on-disk cache at a folder named for this exact source of neardup.

    numba keys a cached kernel on its own file only; a kernel that calls a kernel of another
    module would keep running the old callee after that module changed (an upgrade, an edit).
    A folder per hash of all of neardup's sources makes any change start from a clean cache.
    ``NUMBA_CACHE_DIR``, when set, is the parent of that folder.
    """
    import hashlib
    import os

    import numba

    here = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha1()
    for root, dirs, files in os.walk(here):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                with open(os.path.join(root, name), "rb") as f:
                    digest.update(name.encode() + b"\0" + f.read())
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "neardup", "numba")
    path = os.path.join(base, f"{__version__}-{digest.hexdigest()[:16]}")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:  # not writable: numba falls back to the __pycache__ folders
        return
    numba.config.CACHE_DIR = path


def kernels_cached() -> bool:
    """Whether numba's on-disk cache (see :func:`_kernel_cache_dir`) holds the main kernels of a
    dedup run; False means the next run first compiles them (10-40 s, once per version)."""
    try:
        from . import bands, clusters, minhash, verify
        kernels = (minhash._process_kernel, bands._band_keys_kernel, clusters._select_kernel,
                   verify._exact_raw_kernel)
        # numba's own check: an index that exists, written by this numba, with the stamp of the
        # source file as it is now (an index numba would ignore counts as missing)
        return all(k._cache._cache_file._load_index() for k in kernels)
    except Exception:  # numba's cache layout is not public: never fail a run over a message
        return True


_kernel_cache_dir()

from .config import Config  # noqa: E402
from .errors import ConfigError, InputError, NeardupError, StorageError  # noqa: E402
from .minhash import MinHasher  # noqa: E402
from .params import (candidate_probability, choose_params, false_negative_area,  # noqa: E402
                     false_positive_area, midpoint)


def __getattr__(name):
    # the pipeline's API is imported on first use: `import neardup` stays light for the kernels
    if name in ("dedup", "DedupResult"):
        from . import api
        return getattr(api, name)
    if name == "Index":
        from .index import Index
        return Index
    raise AttributeError(f"module 'neardup' has no attribute {name!r}")


__all__ = ["dedup", "DedupResult", "Config", "Index", "MinHasher", "NeardupError", "ConfigError", "InputError",
           "StorageError",
           "candidate_probability", "midpoint", "false_positive_area", "false_negative_area", "choose_params"]
