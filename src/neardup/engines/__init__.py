"""Engines: where a run's calls run and how rows move between them. Nothing else.

:class:`Engine` is the contract (a ``typing.Protocol``); :mod:`.local` runs every call in this
process, :mod:`.ray` runs them as Ray tasks with Ray Data's shuffle (:mod:`.ray_cluster`:
starting or joining the cluster, and leaving nothing of it behind). The stages
(:mod:`neardup.stages`) say what is computed; an engine holds no stage logic, no kernel and no
file format. :func:`open_engine` picks the engine of a run.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional, Protocol, Sequence, runtime_checkable


@runtime_checkable
class Shared(Protocol):
    """A large value shared with every call of a map (an in-memory input table)."""

    def get(self) -> Any:
        """The value, where the call runs."""


class Frame(Protocol):
    """The partitions (Arrow tables) or results of one step, in order; an engine's own type."""


@runtime_checkable
class Engine(Protocol):
    """What a stage may ask of an engine. Started for a run and stopped after it (a context
    manager: whatever it acquires, it acquires in ``__enter__`` and gives back in ``__exit__``)."""

    cpus: int  # the CPUs it schedules on
    in_process: bool  # whether its calls run in this process (numba's threads of a thread that calls it matter)

    def __enter__(self) -> "Engine": ...

    def __exit__(self, *exc) -> None: ...

    def partitions(self, nbytes: float) -> int:
        """How many partitions it wants for a shuffle of ``nbytes``."""

    def one_call(self, nbytes: float) -> bool:
        """Whether a step it would shuffle as ``nbytes`` (``partitions`` above 1) is better run
        as one call with every core of a node (the stage's whole-corpus path, in a task): a
        shuffle only pays where there are other nodes, and for a small step not even there."""

    def map(self, fn: Callable, items, *, progress=None, units: Optional[Callable] = None,
            concurrent: int = 1, beside: bool = False) -> Frame:
        """``fn(item)`` for every item (a list, or the partitions of a frame), in order. A
        NeardupError of a call is raised by ``collect`` (the first in item order).
        ``concurrent``: how many calls an engine that runs them one after another may run at
        once (threads; a cluster runs them as it can anyway). ``beside``: the calls are a step
        run beside another one's (from another thread of the stage): they wait for none of the
        CPUs that step's calls hold, as a thread beside it does in this process."""

    def shuffle(self, frames, key: str, parts: int) -> Frame:
        """The rows of the tables of ``frames`` (a frame or a list of them) regrouped on the hash
        of the integer column ``key``: one call of a later ``map`` gets exactly the rows of one
        partition, with a column ``part``."""

    def collect(self, frame: Frame) -> List:
        """The results of a frame's calls, in order, in the driver."""

    def persist(self, frame: Frame) -> Frame:
        """The frame computed once (a frame used twice is not computed twice)."""

    def share(self, value) -> Shared:
        """A large value for every call: ``handle.get()``."""


@contextmanager
def open_engine(config, paths: Sequence[str], quiet: bool) -> Iterator[Engine]:
    """The engine of a run (``config.engine``), started for it and stopped after it. ``paths``:
    the files and folders the run touches (a store among them: its settings go to Ray's workers)."""
    if config.engine == "ray":
        try:
            from .ray import RayEngine
        except ImportError as exc:
            from ..errors import ConfigError
            raise ConfigError(f"the Ray engine needs Ray: pip install 'neardup[ray]' ({exc})") from None
        from ..io.storage.fs import store_settings
        engine = RayEngine(config.workers, config.ray_address, quiet, store_settings(paths))
    else:
        from .local import LocalEngine
        engine = LocalEngine(config.workers)
    with engine:
        yield engine


__all__ = ["Engine", "Frame", "Shared", "open_engine"]
