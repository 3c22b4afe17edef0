"""The Ray engine: the stages' calls as Ray tasks, their shuffles as Ray Data's.

``neardup dedup ... --engine ray [--ray-address ADDRESS]``. Without an address a local Ray
instance is started (and stopped at the end); with one, the run joins that cluster
(:mod:`.ray_cluster`: joining, starting, leaving nothing behind). Ray is imported only by these
two modules. The stages are those of the local engine (:mod:`neardup.stages`), so the
outputs are byte for byte the same, and so is the work directory (a run interrupted under one
engine is finished by the other). See docs/scaling.md for the data flow and what crosses the
network.

``map`` over a list runs one plain Ray task per item (a call over few items gets several kernel
threads), ``map`` over a frame one task per partition of it, which it gets by reference (from the
object store of the node that made it); the tasks are submitted when the frame is collected. A
shuffle into one partition is no step of its own: the call that maps it gets every table and
joins them. Only a shuffle into several partitions is Ray Data's: the maps it takes become Ray
Data's maps (``map_batches``, from ``from_items`` for a list), as lazy; ``shuffle`` adds the
int32 column ``part`` (the hash of the key, :func:`neardup.kernels.hashing.partition_of`) and
sorts on it with boundaries at every value: the pull-based sort shuffle puts exactly the rows of
one part value into one block, and ``map_batches(batch_size=None)`` hands that block to one call
(blocks are not split: the largest
block size is raised for the run). Ray Data is imported, and its helper actors started, only by
a run that needs such a shuffle (a run on one node does not: profile of a 1M run on 2 CPUs,
bench/results/ray_profile_1m_base.json: its executor cost the driver ~2 CPU-s, its two actors ~1.1 CPU-s
each, and its first dataset ~3 s before the first task ran). On a
cluster of one node (or for a small step) the stages run their whole-corpus paths as one task
with every core of the node instead of shuffling (:meth:`RayEngine.one_call`); on the instance a
run starts for itself (one node) every call runs in one worker process, in its threads
(:mod:`.ray_runner`), not in a worker per CPU. Every task is a
pure function of its input and of the work directory (retried after a worker dies, it writes
the same files); the work directory must be visible to every node: a shared file system, or an
object-store prefix (``--work-dir s3://...``)
read and written through :mod:`neardup.io.storage.fs`. When neardup starts or joins a cluster it hands
the store's settings of its environment (``AWS_*``, ...) to the workers.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import logging
import math
import os
import pickle
import queue
import sys
import threading
import time
import warnings
from typing import Callable, Dict, List, Optional

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow
from ..config import default_workers
from ..errors import ConfigError, NeardupError, StorageError
from ..progress import check_interrupt, last_work
from . import ray_runner
from .ray_worker import warm_worker
from .ray_cluster import (HeldWarnings, check_reachable, cluster_busy, end_processes, import_ray, import_ray_data,
                          instance_marked, instance_processes, join_with_token, lost_work, lost_work_message,
                          other_neardup, pydantic_hidden, restore_auth_mode, signals_kept, stall_seconds,
                          stalled_message, start_local, start_watchdog, stop_local)

MAX_RETRIES = 4                 # Ray retries of every task whose worker died
TARGET_PART_BYTES = 128 << 20   # bytes of shuffled rows per partition (one call)
MAX_PARTS = 4096
ONE_CALL_BYTES = 256 << 20      # a step of fewer shuffled bytes runs as one call, on a cluster of several nodes
ONE_CALL_ENV = "NEARDUP_RAY_ONE_CALL"
OBJECT = "__object__"           # the column of a call's result that is not a table (pickled)
log = logging.getLogger("neardup.ray")


def shuffled_on_one_node() -> bool:
    """``NEARDUP_RAY_ONE_CALL=0``: a run's steps shuffled even on one node, as a cluster of many
    nodes runs them (to measure that path on one node for bench/plan.py)."""
    return os.environ.get(ONE_CALL_ENV, "").strip() == "0"


class RayFrame:
    """A step's partitions (a :class:`~.Frame`), lazy: a Ray dataset (``ds``: what a shuffle into
    several partitions made, and the maps over it), or a map not run yet (``fn`` over ``source``:
    a list of items, or a frame, one call per partition of it, with ``threads`` kernel threads
    a call), run as plain Ray tasks when it is collected (``refs``, their results in order) or as
    Ray Data's map when a shuffle into several partitions takes it; or (``joined``: frames,
    ``key``) a shuffle into one partition, which the call that maps it joins. With the progress
    its collect reports."""

    def __init__(self, ds=None, progress=None, units: Optional[Callable] = None, *, fn: Optional[Callable] = None,
                 source=None, threads: int = 1, joined: Optional[List["RayFrame"]] = None, key: str = "",
                 share: Optional[int] = None):
        self.ds, self.progress, self.units = ds, progress, units
        self.fn, self.source, self.threads = fn, source, threads
        # the CPUs a call holds in the run's one worker process (ray_runner): 0, none (``beside``)
        self.share = threads if share is None else share
        self.joined, self.key = joined, key
        self.refs: Optional[List] = None


class RayShared:
    """A value put once into Ray's object store; ``get()`` in a task fetches it (a :class:`~.Shared`)."""

    def __init__(self, ref):
        self.ref = ref

    def get(self):
        import ray
        return ray.get(self.ref)


class _Failure:
    """A call's NeardupError (bad input), carried as its result: ``collect`` raises the first one
    in item order, as the local engine would."""

    def __init__(self, error: NeardupError):
        self.error = error


def _call(table: pa.Table, *, fn, items, threads: int) -> pa.Table:
    """One call of Ray Data's map: on an item (``items`` given: the table holds its index) or on
    one partition; a result that is not a table travels pickled in one row."""
    if items is not None and table.num_rows != 1:  # one item a block (from_items, one block each)
        raise RuntimeError(f"internal error: a call got {table.num_rows} items; please report this bug")
    arg = items[int(table.column("i")[0].as_py())] if items is not None else table
    if items is None and "part" in table.column_names and table.num_rows:
        part = table.column("part").combine_chunks()
        if len(part.unique()) != 1:
            raise RuntimeError("internal error: a call got several partitions; please report this bug")
    result = _apply(fn, arg, threads)
    if isinstance(result, pa.Table):
        return result
    return pa.table({OBJECT: pa.array([pickle.dumps(result)], pa.binary())})


def _apply(fn, arg, threads: int):
    """``fn(arg)`` with ``threads`` kernel threads; a NeardupError is its result (a _Failure)."""
    from ..kernels.hashing import kernel_threads
    try:
        with kernel_threads(threads):
            return fn(arg)
    except NeardupError as exc:
        return _Failure(exc)


def _task(fn, threads: int, item, joined: bool, *tables):
    """One call of a map as a plain Ray task: on ``item`` (a map over a list), on one partition
    (``tables``: one, the result of an earlier call) or (``joined``) on the tables of a shuffle
    into one partition, joined here (as :meth:`~.LocalEngine.shuffle` joins them: the tables
    with rows, a column ``part`` of 0s), not by a task of its own that would store them again."""
    if tables and not joined:
        arg = tables[0]
    elif joined:
        failed = next((t for t in tables if isinstance(t, _Failure)), None)
        if failed is not None:
            return failed
        kept = [t.drop_columns(["part"]) if "part" in t.column_names else t for t in tables]
        kept = [t for t in kept if t.num_rows] or kept[:1]
        arg = pa.concat_tables(kept)
        arg = arg.append_column("part", arrow(np.zeros(arg.num_rows, np.int32)))
    else:
        arg = item
    if isinstance(arg, _Failure):
        return arg
    return _apply(fn, arg, threads)


def _same(table: pa.Table) -> pa.Table:
    """A shuffle's one partition as it is (a shuffle collected without a map of its own)."""
    return table


def _named(fn: Callable) -> str:
    """The name of the stage's function, so that Ray's task names (what ``ray list tasks`` and
    the dashboard show, a worker's process title) say which step runs."""
    return getattr(getattr(fn, "func", fn), "__name__", "call")


def _named_call(fn: Callable) -> Callable:
    """:func:`_call` under the name of the stage's function (Ray Data's map)."""
    def call(table, **kwargs):
        return _call(table, **kwargs)

    call.__name__ = call.__qualname__ = _named(fn)
    return call


WARM_TASKS = 64  # at most this many warm-up tasks at the start of a run (one per CPU below it)


def release_driver_memory() -> None:
    """Gives back to the system what the driver freed since the last step: Ray Data's
    executors, datasets and plans of the steps before are cyclic garbage that holds ObjectRefs
    (and the run raises the collector's threshold, :func:`neardup.api.collector_paused`, so it
    waits), and a shuffle's pieces under Ray's inline limit (100 KB) live in the driver's own
    memory store while a ref holds them; what they free stays in glibc's arenas (Ray's threads
    allocate in several) unless trimmed, and the report, drawn here once Ray is gone, grows on
    top of them. Measured (``bench/driver_memory.py``, ``NEARDUP_RAY_ONE_CALL=0``; 615 refs left
    at the end of the write stage at 3M, 12 with this): the driver's peak 342 -> 330 MiB at 1M
    documents, 406 -> 372 MiB at 3M (growth +18.6% -> +12.6%; one node +12.2% -> +9.8%). About
    30 ms a call (a collection of ~200k objects): before each step's results are awaited and
    once Ray is gone, not per task."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): the collection alone
        pass


def freeze_driver_objects() -> bool:
    """Moves what the driver holds once Ray has started (Ray's modules, its worker's state:
    ~0.2M objects) out of the collector's sight (``gc.freeze``), so that
    :func:`release_driver_memory`'s full collection walks only what the run made since: Ray
    Data's executors and plans, the steps' refs (measured on 1M documents, 2 CPUs, load 7-14:
    each collection 0.078 CPU-s, 3 of them in the read stage). In the ``neardup`` program
    (:func:`~neardup.progress.last_work`), which froze its own objects as it started, they stay
    frozen; in a library call only when nothing is frozen yet, and the caller's process gets
    them back at the exit (returns True: :func:`gc.unfreeze` then), not when the caller froze
    objects of its own (an unfreeze would give theirs back too)."""
    if last_work():
        gc.freeze()
        return False
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


class _Abandoned(BaseException):
    """Raised in the helper thread of :meth:`RayEngine._watched` whose results are no longer wanted."""


def _abandon(thread: threading.Thread, wait: float = 30.0) -> None:
    """Ends the iteration of a helper thread whose results are no longer wanted (the run failed or
    was interrupted), before the engine's exit disconnects from Ray: :class:`_Abandoned` raised in
    it (Ray Data's loops wait in Python, so it arrives within their next poll) makes Ray Data shut
    its execution down while still connected. Left running, it would find Ray gone, connect to a
    cluster again on its own and print Ray's tracebacks after neardup's error."""
    import ctypes
    if thread.ident is None or not thread.is_alive():
        return
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Abandoned))
    thread.join(wait)


class RayEngine:
    """An :class:`~.Engine` on a Ray cluster: a local instance started for the run (and stopped
    after it), or the cluster at ``address``, joined. Nothing is started, joined or changed
    before ``__enter__``; ``__exit__`` gives back whatever ``__enter__`` took, whether it ended
    or failed half-way. ``store_env``: the settings of the object stores the run touches
    (credentials, endpoints), handed to the workers as the driver has them."""
    in_process = False  # the driver runs no kernel: it does not import numba

    def __init__(self, workers: Optional[int] = None, address: Optional[str] = None, quiet: bool = False,
                 store_env: Optional[Dict[str, str]] = None):
        self.workers = workers
        self.address = address
        self.quiet = quiet
        self.store_env = dict(store_env or {})
        self.cpus = 0  # known once started
        self.cpus_per_node = 1
        self.nodes = 1  # nodes with CPUs, known once started
        self.ray = None
        self.started = False
        self._watchdog = None
        self._node = None  # the local instance's node, started by start_local
        self._held = HeldWarnings(quiet)
        self._auth = ()  # RAY_AUTH_MODE before the join, in a tuple once joined
        self._stall = 0.0
        self._need = 1  # the most CPUs a task of the run asks for
        self._dc = None
        self._rd = None
        self._task = None
        self._runner = None  # the one worker process of the run's own instance (ray_runner)
        self._saved = None
        # a stage may wait for two steps at once from two threads (the write stage: kept/ and
        # the member files): what is set up once a run is set up under this lock
        self._setup = threading.Lock()
        self._loggers: Dict[str, int] = {}
        self._shared: Dict[int, RayShared] = {}
        self._warming: List = []
        self._frozen = False  # the driver's objects frozen by the engine (freeze_driver_objects)

    def __enter__(self) -> "RayEngine":
        try:
            with pydantic_hidden(last_work()):  # the driver's serialization context made without it
                self._start()
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def _start(self) -> None:
        ray = self.ray = import_ray()

        address, quiet, workers = self.address, self.quiet, self.workers
        self._stall = stall_seconds()
        self._held.attach()  # before ray.init: it logs one of them
        if not ray.is_initialized():
            kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=not quiet)
            if self.store_env and address:  # a joined cluster's workers: through the job's runtime env
                kwargs["runtime_env"] = {"env_vars": self.store_env}
            if address:
                check_reachable(address)
                self._auth = (join_with_token(address),)
            if not address:
                self._watchdog = start_watchdog()
            try:
                with signals_kept():
                    if address:
                        ray.init(address=address, **kwargs)
                    else:
                        with instance_marked(self.store_env):  # for the watchdog, in every process of the
                            # instance, and the store settings, inherited (no runtime env: its agent logs them)
                            self._node = start_local(ray, default_workers(workers), log_monitor=not quiet,
                                                     one_worker=self._runner_wanted(), **kwargs)
                            if self._node is None:
                                ray.init(address="local", num_cpus=default_workers(workers), **kwargs)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                self._stop_watchdog()
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise ConfigError(f"cannot start or join {where}: {' '.join(str(exc).split())[:300]}") from None
            self.started = True
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if cpus < 1:
            raise ConfigError(f"the Ray cluster{' at ' + address if address else ''} has no CPUs for neardup's tasks "
                              f"(start its nodes with --num-cpus)")
        self.cpus = cpus
        per_node = [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
        self.cpus_per_node = max([c for c in per_node if c > 0] or [1])
        self.nodes = max(1, sum(1 for c in per_node if c > 0))
        self._loggers = {}
        for name in ("ray.data", "ray.data._internal.execution.streaming_executor"):
            lg = logging.getLogger(name)
            self._loggers[name] = lg.level
            lg.setLevel(logging.WARNING)  # under --quiet held, shown if the run fails
        self._held.attach()
        self._frozen = freeze_driver_objects()
        own = self.started and not self.address  # the instance started for the run: no one else's work
        if own and self.nodes == 1 and self._runner_wanted():  # every call in one process (ray_runner)
            self._runner = ray_runner.start(ray, cpus, MAX_RETRIES)
            self._warming = [ray_runner.warm_up(self._runner, _named(warm_worker), warm_worker, False, False)]
            return
        # one small task per CPU (up to WARM_TASKS), not waited for: the workers that run the
        # first calls have imported neardup by then (Ray reuses a job's idle workers)
        warm = ray.remote(num_cpus=1, max_retries=0)(warm_worker)
        self._warming = [warm.remote(not own) for _ in range(min(cpus, WARM_TASKS))]
        if not own:  # someone else's cluster: its workers' neardup must be this one, said before any work
            other = other_neardup(ray, self._warming)  # (they answer once warm; unanswered in 10 s: told at a failure)
            if other is not None:
                raise ConfigError(other)

    @staticmethod
    def _runner_wanted() -> bool:
        """Whether the run's own instance, of one node, runs its calls in one process (:mod:`.ray_runner`)."""
        return ray_runner.wanted(shuffled_on_one_node())

    def __exit__(self, *exc) -> None:
        """Gives back what ``__enter__`` took; Ray's warnings held during a run that failed (or
        was interrupted) are shown first."""
        self._held.release(show=bool(exc) and exc[0] is not None)
        if self._dc is not None:
            dc = self._dc
            (dc.enable_progress_bars, dc.execution_options.preserve_order, dc.shuffle_strategy,
             dc.target_max_block_size, dc.op_resource_reservation_enabled) = self._saved
            self._dc = self._rd = None
        for name, level in self._loggers.items():
            logging.getLogger(name).setLevel(level)
        self._loggers = {}
        self._warming = []
        self._runner = None
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
        if exc[0] is None and self._node is not None and last_work():
            self._stop_while_the_program_ends()
            return
        self._stop()

    def _stop(self, program: bool = False) -> None:
        """Disconnected from Ray, the instance the run started stopped, the watchdog gone.
        ``program``: in the ``neardup`` program, which exits next (:meth:`_stop_while_the_program_ends`):
        the driver's memory is not given back (nothing is drawn after it), and the watchdog's final
        sweep (a walk of every process of the machine, twice, 0.1 s apart: 0.26-0.45 s at load 18)
        is not waited for: the driver kills what is left of the instance's processes itself
        (:func:`~.ray_cluster.end_processes`), the watchdog's sweep finds nothing and it ends on
        its own."""
        try:
            if self.started:
                self.ray.shutdown()
                self.started = False
        finally:
            if self._node is not None:  # a local instance of start_local: the driver is disconnected now
                node, self._node = self._node, None
                left = instance_processes(self._watchdog) if program else []
                stop_local(node)
                end_processes(left)
        if not program:
            release_driver_memory()  # what Ray held in this process, before the report is drawn here
        if self._auth:
            restore_auth_mode(self._auth[0])
            self._auth = ()
        self._stop_watchdog(wait=not program)

    def _stop_while_the_program_ends(self) -> None:
        """:meth:`_stop` of a run's own instance in a helper thread, while the ``neardup`` program
        (which exits after the run: :func:`~neardup.progress.last_work`) draws the report and
        publishes the result, and joined when the process exits (an ``atexit`` function, which the
        program runs before it ends): nothing of Ray's is left behind when it has exited. The stop
        is mostly waiting: Ray's disconnect of the driver (0.02 or 0.26 s, 5 ms of CPU), the
        instance's processes ending; the program waited for it before the report. A library call
        (``neardup.dedup``) stops it before it returns, as before: its caller may start Ray
        again at once."""
        thread = threading.Thread(target=self._stop_in_the_program, name="neardup-ray-stop", daemon=True)
        thread.start()
        atexit.register(thread.join)

    def _stop_in_the_program(self) -> None:
        """:meth:`_stop` in the program's helper thread. The run has succeeded by then (its output
        written, its exit status kept): a failure of the stop is one line on stderr, not the
        thread's traceback."""
        try:
            self._stop(True)
        except Exception as e:  # noqa: BLE001 -- any failure: the run's result stands
            print(f"neardup: warning: stopping the run's own Ray instance failed ({type(e).__name__}: {e}); "
                  "its processes may remain: its watchdog ends them when this program exits, or end them "
                  "with `ray stop` (which stops every local Ray instance of this user)", file=sys.stderr)

    def _ray_data(self):
        """Ray Data, set up for the run's shuffles the first time one needs it (a run on one node
        never does: its driver does not import it, nor start its helper actors)."""
        if self._dc is not None:
            return self._rd
        with self._setup:
            if self._dc is None:
                self._set_up_ray_data()
        return self._rd

    def _set_up_ray_data(self) -> None:
        ray_data = import_ray_data()
        from ray.data.context import DataContext, ShuffleStrategy
        dc = DataContext.get_current()
        self._saved = (dc.enable_progress_bars, dc.execution_options.preserve_order, dc.shuffle_strategy,
                       dc.target_max_block_size, dc.op_resource_reservation_enabled)
        dc.enable_progress_bars = False
        dc.execution_options.preserve_order = True
        # the pull-based sort shuffle puts each partition into exactly one block and needs no actors
        dc.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
        dc.target_max_block_size = 1 << 40  # a partition stays one block, however large
        # no CPUs reserved per operator: with the reservation (half the CPUs shared out among the
        # operators of a pipeline), on a node of few CPUs each operator ran one task at a time
        # (ray.timeline() of a 1M run on 2 CPUs: form_buckets and search_buckets at a parallelism
        # of 0.97 and 0.94); the operators of neardup's pipelines follow one another, so the one
        # that has work takes every CPU; backpressure still bounds what is in flight
        dc.op_resource_reservation_enabled = False
        self._held.attach()  # Ray Data's handlers, now that it is imported
        self._rd, self._dc = ray_data, dc  # set up: seen by another thread only now

    def _stop_watchdog(self, wait: bool = True) -> None:
        if self._watchdog is not None:
            self._watchdog.stdin.close()  # it kills what is left of the instance, if anything
            if wait:
                self._watchdog.wait()
            self._watchdog = None

    def partitions(self, nbytes: float) -> int:
        """Partitions for a shuffle of nbytes: at least one per CPU (and 2), at most MAX_PARTS."""
        return int(max(2, self.cpus, min(MAX_PARTS, math.ceil(nbytes / TARGET_PART_BYTES))))

    def one_call(self, nbytes: float) -> bool:
        """One node with CPUs (a shuffle there moves rows between processes of the same machine
        for nothing: the pair stage's three shuffles cost 3.8x the local engine's pass at 1M on
        2 CPUs), or a step under ONE_CALL_BYTES: its whole-corpus path as one task with every
        core of a node. ``NEARDUP_RAY_ONE_CALL=0``: never (the partitioned path, as a cluster of
        many nodes runs it: to measure it on one node for bench/plan.py)."""
        if shuffled_on_one_node():  # always shuffled, as on a large cluster
            return False
        return self.nodes == 1 or nbytes <= ONE_CALL_BYTES

    def map(self, fn: Callable, items, *, progress=None, units: Optional[Callable] = None,
            concurrent: int = 1, beside: bool = False) -> RayFrame:
        """A map not run yet (over a dataset: Ray Data's map, as lazy). Collected, its calls run as
        plain Ray tasks, whose fixed cost is a task's, not a dataset's (its planning, its executor
        in the driver, its helper actors: on one node no dataset is made at all); taken by a
        shuffle into several partitions, as Ray Data's map, as before (its results streamed into
        the sort and freed there, not held in the object store for the whole stage). ``beside``:
        in the run's one worker process (:mod:`.ray_runner`) the calls hold none of its CPUs, so
        that they run beside the other step's calls, not after them (the write stage's members,
        sorted and stitched while kept/ is written: held, they waited for the kept/ call's
        end, as on the local engine they do not)."""
        if isinstance(items, RayFrame) and items.ds is not None:
            return RayFrame(self._data_map(items.ds, fn, None, 1), progress, units)
        if isinstance(items, RayFrame):
            threads = 1
        else:
            items = list(items)
            # with fewer items than CPUs each call gets several kernel threads
            threads = max(1, min(self.cpus_per_node, self.cpus // max(1, len(items))))
            if self.workers:
                threads = min(threads, int(self.workers))
        share = threads
        if self._runner is not None and concurrent > 1 and not isinstance(items, RayFrame):
            threads, share = ray_runner.concurrent_calls(self.cpus, concurrent)
        if self._runner is not None and beside:
            share = 0
        self._need = max(self._need, threads)
        return RayFrame(progress=progress, units=units, fn=fn, source=items, threads=threads, share=share)

    def _refs(self, frame: RayFrame) -> List:
        """The refs of the results of a map's calls, its tasks submitted (once): one per item, per
        partition of its source, or one on every table of a shuffle into one partition."""
        if frame.refs is None:
            src = frame.source
            if isinstance(src, RayFrame) and src.joined is not None:
                args = [(None, True, *[ref for f in src.joined for ref in self._refs(f)])]
            elif isinstance(src, RayFrame):
                args = [(None, False, ref) for ref in self._refs(src)]
            else:
                args = [(item, False) for item in src]
            fn_ref = self.ray.put(frame.fn)  # once, not once a task
            if self._runner is not None:
                run = self._runner.run.options(name=_named(frame.fn))
                frame.refs = [run.remote(frame.share, _task, fn_ref, frame.threads, *a) for a in args]
                return frame.refs
            with self._setup:
                if self._task is None:
                    self._task = self.ray.remote(_task)  # exported to the cluster once a run
            task = self._task.options(name=_named(frame.fn), num_cpus=frame.threads, max_retries=MAX_RETRIES)
            frame.refs = [task.remote(fn_ref, frame.threads, *a) for a in args]
        return frame.refs

    def _dataset(self, frame: RayFrame):
        """A frame as a Ray dataset, for a shuffle into several partitions: a map not run yet as
        Ray Data's map over its source's dataset (over a list: ``from_items``, one block an
        item); one already run (collected), from its results."""
        ray_data = self._ray_data()
        if frame.ds is not None:
            return frame.ds
        if frame.refs is not None:
            return ray_data.from_arrow_refs(frame.refs)
        if frame.joined is not None:
            return self._sorted([self._dataset(f) for f in frame.joined], frame.key, 1)
        src = frame.source
        if isinstance(src, RayFrame):
            return self._data_map(self._dataset(src), frame.fn, None, frame.threads)
        ds = ray_data.from_items([{"i": i} for i in range(len(src))], override_num_blocks=max(1, len(src)))
        return self._data_map(ds, frame.fn, src, frame.threads)

    @staticmethod
    def _data_map(ds, fn: Callable, items, threads: int):
        with warnings.catch_warnings():  # max_retries has no named parameter on map_batches
            warnings.simplefilter("ignore")
            return ds.map_batches(_named_call(fn), fn_kwargs=dict(fn=fn, items=items, threads=threads),
                                  batch_size=None, batch_format="pyarrow", zero_copy_batch=True, num_cpus=threads,
                                  max_retries=MAX_RETRIES)

    def shuffle(self, frames, key: str, parts: int) -> RayFrame:
        """Into one partition: the frames, joined by the call that maps them (no dataset, unless
        one of them is); into several: Ray Data's sort shuffle."""
        frames = [frames] if isinstance(frames, RayFrame) else list(frames)
        if parts == 1 and all(f.ds is None for f in frames):
            return RayFrame(joined=frames, key=key)
        return RayFrame(self._sorted([self._dataset(f) for f in frames], key, parts))

    @staticmethod
    def _sorted(datasets: List, key: str, parts: int):
        ds = datasets[0].union(*datasets[1:]) if len(datasets) > 1 else datasets[0]

        def keyed(t: pa.Table) -> pa.Table:
            from ..kernels.hashing import partition_of
            t = t.drop_columns(["part"]) if "part" in t.column_names else t
            return t.append_column("part", arrow(partition_of(t.column(key).to_numpy(), parts)))

        ds = ds.map_batches(keyed, batch_size=None, batch_format="pyarrow")
        if parts == 1:  # every row to one call: the blocks joined, no sort
            return ds.repartition(1)
        return ds.sort("part", boundaries=list(range(1, parts)))

    def collect(self, frame: RayFrame) -> List:
        """The results of a frame's calls, in order (each call's, as it ends, to the progress).
        What the steps before left in the driver (their refs and pieces) is let go before this
        step's results arrive: once its calls are submitted, while they run (:func:`_submitted`)."""
        if frame.joined is not None:  # a shuffle collected as it is: its one partition
            frame = self.map(_same, frame)
        out = []
        if frame.ds is None:
            refs = self._submitted(frame)
            results = self._watched(lambda: self._results(refs))
        else:
            release_driver_memory()
            results = self._watched(lambda: frame.ds.iter_batches(batch_size=None, batch_format="pyarrow",
                                                                  prefetch_batches=2))
        try:
            for result in results:
                if frame.ds is not None:  # a dataset's block: a table, or the calls' results pickled
                    if OBJECT not in result.column_names:
                        out.append(result)
                        continue
                    objects = [pickle.loads(blob) for blob in result.column(OBJECT).to_pylist()]
                elif isinstance(result, pa.Table):
                    out.append(result)
                    continue
                else:
                    objects = [result]
                for obj in objects:
                    if isinstance(obj, _Failure):
                        raise obj.error
                    if frame.progress is not None:
                        frame.progress.update(frame.units(obj) if frame.units else 1)
                    out.append(obj)
        finally:
            results.close()  # now, not when the error's traceback is freed (after Ray is gone)
        return out

    def _results(self, refs):
        """The results of ``refs``, in order, each as soon as it is there: waited for in short
        rounds, so that the thread of :meth:`_watched` that runs this is stopped within one."""
        ray = self.ray
        for ref in refs:
            while not ray.wait([ref], timeout=0.5)[0]:
                pass
            yield ray.get(ref)

    def _submitted(self, frame: RayFrame) -> List:
        """:meth:`_refs`, then :func:`release_driver_memory` while the calls run: the driver's
        collection (a walk of every object it holds, Ray's modules' included) no longer delays
        each step's calls, which waited for it before (traced on 2 CPUs at load 15-20: the
        first, before the read stage's calls, 0.57 s; the later ones 0.05-0.09 s each)."""
        refs = self._refs(frame)
        release_driver_memory()
        return refs

    def persist(self, frame: RayFrame) -> RayFrame:
        if frame.ds is None:
            if frame.joined is not None:
                frame = self.map(_same, frame)
            self._submitted(frame)
            return frame  # its tasks run; their results stay in the object store
        release_driver_memory()
        ds, = self._watched(lambda: [frame.ds.materialize()])
        return RayFrame(ds, frame.progress, frame.units)

    def _watched(self, produce: Callable):
        """The items of ``produce()`` (Ray Data's iteration, which blocks until the cluster has
        computed them), taken in a helper thread, so that this one can watch the cluster while
        it waits: when no item has come and no CPU of the cluster has been held for the run's
        bound (:func:`~.ray_cluster.stall_seconds`), its tasks cannot be scheduled and never
        will be (no node with the CPUs a task asks for; the nodes with CPUs lost), and the run
        stops with one line that says so, instead of waiting forever. Ctrl-C and SIGTERM are
        noticed while it waits."""
        items, stop = queue.Queue(maxsize=2), threading.Event()

        def put(entry) -> None:
            while not stop.is_set():
                try:
                    return items.put(entry, timeout=0.5)
                except queue.Full:
                    pass

        def pump() -> None:
            try:
                for item in produce():
                    put(("item", item))
                    if stop.is_set():
                        return
                put(("end", None))
            except BaseException as exc:  # raised in the caller's thread
                put(("error", exc))

        thread = threading.Thread(target=pump, name="neardup-ray-results", daemon=True)
        thread.start()
        last, ended = time.monotonic(), False
        try:
            while True:
                check_interrupt()
                try:
                    kind, value = items.get(timeout=1.0)
                except queue.Empty:
                    now = time.monotonic()
                    if cluster_busy(self.ray):
                        last = now
                    elif now - last > self._stall:
                        where = f"the Ray cluster at {self.address}" if self.address else "the local Ray instance"
                        raise ConfigError(stalled_message(self.ray, where, now - last, self.cpus, self._need))
                    continue
                last = time.monotonic()
                ended = kind != "item"
                if kind == "end":
                    return
                if kind == "error":
                    lost = lost_work(self.ray, value)
                    if lost is not None:
                        where = f"the Ray cluster at {self.address}" if self.address else "the local Ray instance"
                        raise StorageError(lost_work_message(where, lost)) from value
                    other = other_neardup(self.ray, self._warming) if self._warming and not isinstance(
                        value, NeardupError) else None
                    if other is not None:
                        raise ConfigError(other) from value
                    raise value
                yield value
        finally:
            stop.set()
            if not ended:
                _abandon(thread)

    def share(self, value) -> RayShared:
        if id(value) not in self._shared:
            self._shared[id(value)] = RayShared(self.ray.put(value))
        return self._shared[id(value)]
