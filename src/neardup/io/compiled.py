"""The compiled loops of :mod:`neardup.kernels` that read and copy files (``copy_file_range``,
``sendfile``, ``statx``: functions of the C library that not every machine has), each loaded once,
on its first use, where it can run here: :func:`compiled_loop`, given the module's import
(:func:`filecopy`, :func:`fileread`: a run imports only the module of the loops it uses)."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable, Optional


def filecopy() -> ModuleType:
    """:mod:`neardup.kernels.filecopy`, imported."""
    from ..kernels import filecopy as kernels
    return kernels


def fileread() -> ModuleType:
    """:mod:`neardup.kernels.fileread`, imported."""
    from ..kernels import fileread as kernels
    return kernels


def compiled_loop(module: Callable[[], ModuleType], name: str, available: str,
                  *warm: Any) -> Callable[[], Optional[Callable]]:
    """A function that gives the kernel ``name`` of the module that ``module()`` imports
    (:func:`filecopy` or :func:`fileread`), or None where it cannot run here: where
    ``available()`` of that module says the C library lacks what it calls (a kernel calling a
    function the linker cannot find stops the process), or where loading it fails (numba, the
    linker: the caller's Python loop does the work). Nothing is imported before the first call,
    which imports that module alone and loads (or compiles) the kernel by calling it with the
    arguments ``warm`` (a call that does nothing); the answer is kept for every later call."""

    @functools.lru_cache(maxsize=None)
    def loaded() -> Optional[Callable]:
        try:
            kernels = module()
            if not getattr(kernels, available)():
                return None
            fn = getattr(kernels, name)
            fn(*warm)
            return fn
        except Exception:  # noqa: BLE001 (numba or the C library: the Python loop does the work)
            return None

    return loaded
