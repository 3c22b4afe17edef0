"""The Ray engine: the stages' calls as Ray tasks, their shuffles as Ray Data's.

``neardup dedup ... --engine ray [--ray-address ADDRESS]``. Without an address a local Ray
instance is started (and stopped at the end); with one, the run joins that cluster. Ray is
imported only here. The stages are those of the local engine (:mod:`neardup.stages`), so the
outputs are byte for byte the same, and so is the work directory (a run interrupted under one
engine is finished by the other). See docs/scaling.md for the data flow and what crosses the
network.

``map`` over a list runs one task per item (a call over few items gets several kernel threads);
``map`` over a frame runs one task per partition. ``shuffle`` adds the int32 column ``part`` (the
hash of the key, :func:`neardup.hashing.partition_of`) and sorts on it with boundaries at every
value: the pull-based sort shuffle puts exactly the rows of one part value into one block, and
``map_batches(batch_size=None)`` hands that block to one call (blocks are not split: the largest
block size is raised for the run). Every task is a pure function of its input and of the work
directory (retried after a worker dies, it writes the same files); the work directory must be
visible to every node: a shared file system, or an object-store prefix (``--work-dir s3://...``)
read and written through :mod:`neardup.io.fs`. When neardup starts or joins a cluster it hands
the store's settings of its environment (``AWS_*``, ...) to the workers.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import warnings
from typing import Callable, Dict, List, Optional, Sequence

import pyarrow as pa

from ..arrays import arrow
from ..config import default_workers
from ..errors import ConfigError, NeardupError
from ..hashing import kernel_threads, partition_of
from ..io import fs
from ..progress import check_interrupt

MAX_RETRIES = 4                 # Ray retries of every task whose worker died
TARGET_PART_BYTES = 128 << 20   # bytes of shuffled rows per partition (one call)
MAX_PARTS = 4096
OBJECT = "__object__"           # the column of a call's result that is not a table (pickled)
log = logging.getLogger("neardup.ray")

# the settings of object stores that workers need as the driver has them (credentials, endpoints)
_STORE_ENV_PREFIXES = ("AWS_", "FSSPEC_", "GOOGLE_", "GCS_", "HF_", "AZURE_", "S3FS_")


def _import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the Ray engine needs Ray: pip install 'neardup[ray]' ({exc})") from None
    return ray


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """A HOST:PORT address that nothing answers on is an error now (Ray would keep retrying)."""
    import socket

    if "://" in address or address in ("auto", "local") or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot reach the Ray cluster at {address} ({exc}); start one with "
                          f"'ray start --head' or check --ray-address") from None


def _join_with_token(address: str) -> None:
    """Ray (2.52+) turns token authentication on where it finds a token only for ``ray.init()``
    without an address; a driver that names the address of a cluster started with ``ray start
    --head`` (token authentication on by default since Ray 2.59) retries for 20 s and says only
    "Failed to connect". So: the token is used wherever Ray would find it (``RAY_AUTH_TOKEN``,
    ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``), unless ``RAY_AUTH_MODE`` says otherwise (a
    driver with a token also joins a cluster without authentication), and a cluster that refuses
    the driver's token, or the lack of one, is an error at once, in one line that says what to set.
    The token is never printed."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config, GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:  # a Ray without token authentication
        return
    if "RAY_AUTH_MODE" not in os.environ and AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        os.environ["RAY_AUTH_MODE"] = "token"
        Config.initialize("")  # Ray read its settings at import; this process now sends the token
    try:
        with _stderr_silenced():  # the client's C++ log line; the error below says it in words
            GcsClient(address=address).cluster_id
    except AuthenticationError:
        has = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
        what = "refused this driver's token" if has else "needs a token and this driver has none"
        raise ConfigError(f"the Ray cluster at {address} uses token authentication and {what}: set "
                          f"RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's token (`ray get-auth-token` on "
                          f"its head node prints it) and RAY_AUTH_MODE=token") from None
    except Exception:  # any other failure to connect: ray.init says it, as before
        pass


_WATCHDOG = r"""
import re, sys, threading, time, psutil
driver, ours, me = psutil.Process(int(sys.argv[1])), {}, psutil.Process()
SESSION = re.compile(r"session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_%d\b" % driver.pid)  # Ray's name for it


def rays(p):  # a process of Ray's, started after this one (never one of the caller's own, nor this one)
    try:
        return p.pid != me.pid and p.create_time() >= me.create_time() and (p.name().startswith("ray::") or
                                                        any("/ray/" in a for a in p.cmdline()[:3]))
    except psutil.Error:
        return False


def note(roots):
    for root in roots:
        try:
            ours.update((p.pid, p) for p in root.children(recursive=True) if p.pid not in ours and rays(p))
        except psutil.Error:
            pass


def of_the_instance(p):  # an orphan of this instance: its arguments name the session the driver started
    try:
        return p.pid != me.pid and p.create_time() >= me.create_time() and any(SESSION.search(a) for a in p.cmdline())
    except psutil.Error:
        return False


gone = threading.Event()
threading.Thread(target=lambda: (sys.stdin.buffer.read(), gone.set()), daemon=True).start()
while not gone.wait(0.2):  # the pipe closes when the driver ends or dies, however it dies
    note([driver])
# The driver is gone; a worker the raylet started in the last moments may not be noted yet, and the
# raylet may start one more while it dies: sweep until two rounds in a row find nothing alive.
quiet, deadline = 0, time.time() + 10
while quiet < 2 and time.time() < deadline:
    note(list(ours.values()))
    ours.update((p.pid, p) for p in psutil.process_iter() if p.pid not in ours and of_the_instance(p))
    alive = []
    for p in ours.values():
        try:
            # the same process (psutil compares its start time): a reused id is left alone
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                p.kill()
                alive.append(p)
        except psutil.Error:
            pass
    quiet = 0 if alive else quiet + 1
    if quiet < 2:
        time.sleep(0.25)
"""


def _watchdog():
    """The processes of the local instance this run started, killed when the driver is gone. Ray
    ties its GCS server and raylet to the driver's life, but its dashboard and runtime-env agents
    (~180 MB) outlive a driver killed with SIGKILL by 30-60 s. A small process, started before the
    instance, notes the driver's descendants that are Ray's five times a second and reads a pipe of
    which the driver holds the other end; the pipe closes when the driver ends or is killed, and the
    watchdog then kills those of the noted processes that are still there, their descendants, and
    any process whose arguments name the instance's session (a worker started in the last fifth of
    a second, orphaned), in rounds until two find nothing alive (psutil checks each one's start
    time, so a reused process id is never touched). Needs psutil (a dependency of Ray);
    without it, no watchdog."""
    import importlib.util
    import subprocess
    import sys
    if importlib.util.find_spec("psutil") is None:
        return None
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


class _stderr_silenced:
    """Sends file descriptor 2 to /dev/null for the block (output of C++ code included)."""

    def __enter__(self):
        import sys
        try:
            sys.stderr.flush()
            self.saved = os.dup(2)
        except (OSError, ValueError):
            self.saved = None
            return self
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            os.dup2(self.saved, 2)
            os.close(self.saved)
        return False


class _signals_kept:
    """``ray.init`` that starts a local instance installs Ray's SIGTERM handler, which waits up to
    30 s "draining" the node while the run goes on. Where the caller had chosen a handler (the
    command line's, which stops the run at the next batch and then stops Ray through the engine's
    exit), it is put back; an API caller who chose none keeps Ray's."""

    def __enter__(self):
        import signal
        import threading
        self.main = threading.current_thread() is threading.main_thread()
        self.before = signal.getsignal(signal.SIGTERM) if self.main else None
        return self

    def __exit__(self, *exc):
        import signal
        if self.main and callable(self.before) and signal.getsignal(signal.SIGTERM) is not self.before:
            signal.signal(signal.SIGTERM, self.before)
        return False


class _Misleading(logging.Filter):
    """Ray's warnings that a successful run of neardup makes without anything being wrong: Ray
    Data's "no available CPUs ... the Dataset job will hang" (a step's tasks hold every CPU while
    the next step is planned; it runs when they end), "Progress bars disabled" (neardup draws its
    own), and the notice that a local instance has token authentication on."""

    PHRASES = ("does not have any available CPUs", "Progress bars disabled",
               "Token authentication is enabled for this Ray cluster")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(p in message for p in self.PHRASES)


_MISLEADING = _Misleading()


def _quiet_misleading() -> set:
    """Puts the filter on the handlers of Ray's loggers (``ray`` and ``ray.data`` print through their
    own handlers and do not propagate); returns the handlers, for the engine's exit."""
    handlers = {h for name in ("ray", "ray.data") for h in logging.getLogger(name).handlers}
    for handler in handlers:
        handler.addFilter(_MISLEADING)
    return handlers


class Frame:
    """A step's partitions as a Ray dataset (lazy), with the progress its collect reports."""

    def __init__(self, ds, progress=None, units: Optional[Callable] = None):
        self.ds, self.progress, self.units = ds, progress, units


class Shared:
    """A value put once into Ray's object store; ``get()`` in a task fetches it."""

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
    """One call of a map: on an item (``items`` given: the table holds its index) or on one
    partition; a result that is not a table travels pickled in one row."""
    if items is not None and table.num_rows != 1:  # one item a block (from_items, one block each)
        raise RuntimeError(f"internal error: a call got {table.num_rows} items; please report this bug")
    arg = items[int(table.column("i")[0].as_py())] if items is not None else table
    if items is None and "part" in table.column_names and table.num_rows:
        part = table.column("part").combine_chunks()
        if len(part.unique()) != 1:
            raise RuntimeError("internal error: a call got several partitions; please report this bug")
    try:
        with kernel_threads(threads):
            result = fn(arg)
    except NeardupError as exc:
        result = _Failure(exc)
    if isinstance(result, pa.Table):
        return result
    return pa.table({OBJECT: pa.array([pickle.dumps(result)], pa.binary())})


def _named(fn: Callable) -> Callable:
    """:func:`_call` under the name of the stage's function, so that Ray's task names (what
    ``ray list tasks`` and the dashboard show, a worker's process title) say which step runs."""
    name = getattr(getattr(fn, "func", fn), "__name__", "call")

    def call(table, **kwargs):
        return _call(table, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


class RayEngine:
    def __init__(self, workers: Optional[int] = None, address: Optional[str] = None, quiet: bool = False,
                 paths: Sequence[str] = ()):
        ray = _import_ray()
        from ray.data.context import DataContext, ShuffleStrategy

        self.ray = ray
        self.started = False
        self._watchdog = None
        self._filtered = _quiet_misleading()  # before ray.init: it logs one of them
        self.workers = workers
        if not ray.is_initialized():
            kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=not quiet)
            if fs.any_remote(paths):  # the store's endpoint and credentials, as the driver has them
                env = {k: v for k, v in os.environ.items() if k.startswith(_STORE_ENV_PREFIXES)}
                if env:
                    kwargs["runtime_env"] = {"env_vars": env}
            if address:
                _check_reachable(address)
                _join_with_token(address)
            if not address:
                self._watchdog = _watchdog()
            try:
                with _signals_kept():
                    if address:
                        ray.init(address=address, **kwargs)
                    else:
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
        dc = self._dc = DataContext.get_current()
        self._saved = (dc.enable_progress_bars, dc.execution_options.preserve_order, dc.shuffle_strategy,
                       dc.target_max_block_size)
        dc.enable_progress_bars = False
        dc.execution_options.preserve_order = True
        # the pull-based sort shuffle puts each partition into exactly one block and needs no actors
        dc.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
        dc.target_max_block_size = 1 << 40  # a partition stays one block, however large
        self._loggers = {}
        for name in ("ray.data", "ray.data._internal.execution.streaming_executor"):
            lg = logging.getLogger(name)
            self._loggers[name] = lg.level
            lg.setLevel(logging.ERROR if quiet else logging.WARNING)
        self._filtered |= _quiet_misleading()
        self._shared: Dict[int, Shared] = {}

    def __enter__(self) -> "RayEngine":
        return self

    def __exit__(self, *exc) -> None:
        dc = self._dc
        (dc.enable_progress_bars, dc.execution_options.preserve_order, dc.shuffle_strategy,
         dc.target_max_block_size) = self._saved
        for name, level in self._loggers.items():
            logging.getLogger(name).setLevel(level)
        for handler in self._filtered:
            handler.removeFilter(_MISLEADING)
        if self.started:
            self.ray.shutdown()
        self._stop_watchdog()

    def _stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stdin.close()  # it kills what is left of the instance, if anything
            self._watchdog.wait()
            self._watchdog = None

    def partitions(self, nbytes: float) -> int:
        """Partitions for a shuffle of nbytes: at least one per CPU (and 2), at most MAX_PARTS."""
        return int(max(2, self.cpus, min(MAX_PARTS, math.ceil(nbytes / TARGET_PART_BYTES))))

    def map(self, fn: Callable, items, *, progress=None, units: Optional[Callable] = None) -> Frame:
        import ray.data

        if isinstance(items, Frame):
            ds, threads, items = items.ds, 1, None
        else:
            items = list(items)
            ds = ray.data.from_items([{"i": i} for i in range(len(items))], override_num_blocks=max(1, len(items)))
            # with fewer items than CPUs each call gets several kernel threads
            threads = max(1, min(self.cpus_per_node, self.cpus // max(1, len(items))))
            if self.workers:
                threads = min(threads, int(self.workers))
        with warnings.catch_warnings():  # max_retries has no named parameter on map_batches
            warnings.simplefilter("ignore")
            ds = ds.map_batches(_named(fn), fn_kwargs=dict(fn=fn, items=items, threads=threads), batch_size=None,
                                batch_format="pyarrow", zero_copy_batch=True, num_cpus=threads,
                                max_retries=MAX_RETRIES)
        return Frame(ds, progress, units)

    def shuffle(self, frames, key: str, parts: int) -> Frame:
        frames = [frames] if isinstance(frames, Frame) else list(frames)
        ds = frames[0].ds.union(*[f.ds for f in frames[1:]]) if len(frames) > 1 else frames[0].ds

        def keyed(t: pa.Table) -> pa.Table:
            t = t.drop_columns(["part"]) if "part" in t.column_names else t
            return t.append_column("part", arrow(partition_of(t.column(key).to_numpy(), parts)))

        return Frame(ds.map_batches(keyed, batch_size=None, batch_format="pyarrow").sort("part", boundaries=list(range(1, parts))))

    def collect(self, frame: Frame) -> List:
        """The results of a frame's calls, in order (each call's, as it ends, to the progress)."""
        out = []
        for table in frame.ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=2):
            check_interrupt()
            if OBJECT not in table.column_names:
                out.append(table)
                continue
            for blob in table.column(OBJECT).to_pylist():
                result = pickle.loads(blob)
                if isinstance(result, _Failure):
                    raise result.error
                if frame.progress is not None:
                    frame.progress.update(frame.units(result) if frame.units else 1)
                out.append(result)
        return out

    def persist(self, frame: Frame) -> Frame:
        return Frame(frame.ds.materialize(), frame.progress, frame.units)

    def share(self, value) -> Shared:
        if id(value) not in self._shared:
            self._shared[id(value)] = Shared(self.ray.put(value))
        return self._shared[id(value)]
