"""The compiled loops of :mod:`neardup.kernels` that read and copy files (``copy_file_range``,
``sendfile``, ``statx``: functions of the C library that not every machine has), each loaded once,
on its first use, where it can run here: :func:`compiled_loop`, given the name of its module
(:func:`kernels` imports it: a run imports only the module of the loops it uses)."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable, Optional


def kernels(module: str) -> ModuleType:
    """The module of compiled loops ``module`` imported, and no other: ``"filecopy"``
    (:mod:`neardup.kernels.filecopy`), ``"fileread"`` (:mod:`neardup.kernels.fileread`) or
    ``"filestat"`` (:mod:`neardup.kernels.filestat`)."""
    if module == "filecopy":
        from ..kernels import filecopy as loops
    elif module == "fileread":
        from ..kernels import fileread as loops
    elif module == "filestat":
        from ..kernels import filestat as loops
    elif module == "inputsjson":
        from ..kernels import inputsjson as loops
    else:
        raise ValueError(f"no compiled loops of files named {module!r}")
    return loops


def compiled_loop(module: str, name: str, available: str, *warm: Any) -> Callable[[], Optional[Callable]]:
    """A function that gives the kernel ``name`` of the module ``module`` (``"filecopy"`` or
    ``"fileread"``: :func:`kernels`), or None where it cannot run here: where ``available()`` of
    that module says the C library lacks what it calls (a kernel calling a function the linker
    cannot find stops the process), or where loading the kernel fails (numba, the linker: the
    caller's Python loop does the work). Nothing is imported before the first call, which imports that
    module alone and loads (or compiles) the kernel by calling it with the arguments ``warm`` (a
    call that does nothing); the answer is kept for every later call."""

    @functools.lru_cache(maxsize=None)
    def loaded() -> Optional[Callable]:
        loops = kernels(module)  # an unknown name raises, not a silent Python loop
        try:
            if not getattr(loops, available)():
                return None
            fn = getattr(loops, name)
            fn(*warm)
            return fn
        except Exception:  # noqa: BLE001 (numba or the C library: the Python loop does the work)
            return None

    return loaded
