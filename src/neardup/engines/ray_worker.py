"""What a Ray worker of a run does once, before its first call: its warm-up (:func:`warm_worker`,
the imports and set-up the first call would otherwise pay) and, in the run's one worker process
(:mod:`.ray_runner`), pandas and pydantic kept out (:func:`without_pandas`,
:func:`without_pydantic`). Run in the workers (as Ray tasks that :class:`~.ray.RayEngine`
submits as it starts, or as the runner's module is loaded there), never in the driver."""

from __future__ import annotations

import os
import sys

from .ray_cluster import MARK_ENV


def warm_worker(blas: bool = True, pandas: bool = True):
    """What a worker's first call pays once: importing the stages (numba, the kernels' modules),
    numba's typing and target contexts, pyarrow's first array (:mod:`neardup`'s warm-up steps),
    done while the driver plans the read, not inside the first call. ``blas=False`` (a worker of
    the local instance the run started, which runs neardup's tasks alone): numba sets up without
    its check for BLAS, which imports SciPy (none of neardup's kernels uses BLAS), as the
    command line's local engine does (:func:`neardup._start_numba`). ``pandas=False`` (the run's
    one worker process, :mod:`.ray_runner`): :func:`without_pandas` instead of pyarrow's first
    array, which imports pandas. Never fails anything.
    Returns which neardup the worker imports and where (:func:`~.ray_cluster.code_identity`, the
    node), for :func:`~.ray_cluster.other_neardup`; None when it cannot tell."""
    try:
        import socket
        from neardup.engines.ray_cluster import code_identity
        where = f"{socket.gethostname()} ({os.path.dirname(os.path.dirname(os.path.abspath(__file__)))})"
        answer = (code_identity(), where)
    except Exception:
        answer = None
    try:
        import neardup
        import neardup.stages.clusters  # noqa: F401
        import neardup.stages.pairs  # noqa: F401
        import neardup.stages.read  # noqa: F401
        import neardup.stages.write  # noqa: F401
        # numba imported first through the module each call imports it through (ray._apply): by
        # another module (numba.core.registry, numba's set-up below) at the same time as a call,
        # the two threads' imports deadlocked (Python's _DeadlockError in the call)
        import neardup.kernels.hashing  # noqa: F401
        if pandas:
            neardup._warm_arrow()
        else:
            without_pandas()
        if blas:
            neardup._warm_numba_typing()
            neardup._warm_numba_target()
        else:
            neardup._start_numba(blas=False)
    except Exception:  # the first call does the work instead
        pass
    return answer


class _NoPandas:
    """A finder first on ``sys.meta_path`` for which pandas is not installed."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r} (neardup's Ray worker: not needed)", name=name)
        return None


def without_pandas() -> None:
    """This process goes on as if pandas were not installed, unless it imported it already: the
    run's one worker process (:mod:`.ray_runner`) runs neardup's calls alone, none of which needs
    pandas (the local engine's process never imports it in a whole run), but pyarrow imports it
    on its first conversion of a Python value, which Ray's own serializer of a table with a string
    column makes (``pc.subtract`` of its offsets and a Python int: the read stage's id rows), and
    the warm-up's first array before that: 0.2-0.25 CPU-s in the read stage's first seconds,
    while both CPUs run its calls; pyarrow without pandas gives the same arrays."""
    if "pandas" not in sys.modules and _NoPandas not in sys.meta_path:
        sys.meta_path.insert(0, _NoPandas)


def without_pydantic() -> None:
    """In a worker process of a run's own instance (:data:`~.ray_cluster.MARK_ENV`, the driver's
    id, in its environment; Ray's worker mode), pydantic not importable, unless imported already:
    Ray's serializer, made in a worker at its first task (the runner's creation: after the
    runner's module is loaded, :mod:`.ray_runner`), registers serializers for pydantic's models,
    which neardup never sends, and imports pydantic for them (``ray._common.pydantic_compat``:
    0.06 CPU-s, measured by importing it with and without pydantic); it goes without them, as a
    Ray installed without pydantic does, and as the driver's does
    (:class:`~.ray_cluster.pydantic_hidden`). The driver (the mark is its own id while it starts
    the instance) and a joined cluster's workers (no mark) keep it."""
    mark = os.environ.get(MARK_ENV)
    ray = sys.modules.get("ray")
    if not mark or mark == str(os.getpid()) or ray is None or "pydantic" in sys.modules:
        return
    try:
        in_worker = ray._private.worker.global_worker.mode == ray.WORKER_MODE
    except AttributeError:  # a Ray without these: left as it is
        return
    if in_worker and "ray._common.pydantic_compat" not in sys.modules:
        sys.modules["pydantic"] = None  # type: ignore[assignment]  # import pydantic -> ImportError
