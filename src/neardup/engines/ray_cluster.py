"""Starting or joining the Ray cluster of a run, and leaving nothing of it behind.

What the Ray engine (:mod:`neardup.engines.ray`) does around ``ray.init``: a HOST:PORT that
nothing answers on, or a cluster whose token authentication refuses this driver, is one line at
once (Ray would retry for 20 s and say only "Failed to connect"); Ray's SIGTERM handler does not
replace the caller's; a watchdog process kills what is left of a local instance when the driver
dies, however it dies; Ray's warnings that a successful run makes without anything being wrong
are filtered out. Ray is imported only by :func:`import_ray`.
"""

from __future__ import annotations

import logging
import os
from typing import Dict, Optional

from ..errors import ConfigError

AUTH_MODE = "RAY_AUTH_MODE"

def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"the Ray engine needs Ray: pip install 'neardup[ray]' ({exc})") from None
    return ray


def import_ray_data():
    """Ray Data (its shuffles), imported only by a run that shuffles into several partitions."""
    import sys
    try:
        # Ray's pydantic_compat made without pydantic (pydantic_hidden): Ray Data's import of
        # ray.util.state (its DataContext's) must not see it either, or it fails on an assertion
        compat = sys.modules.get("ray._common.pydantic_compat")
        hide = compat is not None and getattr(compat, "pydantic", True) is None and "pydantic" not in sys.modules
        if hide:
            sys.modules["pydantic"] = None  # type: ignore[assignment]
        try:
            import ray.data
            import ray.util.state  # noqa: F401
        finally:
            if hide and sys.modules.get("pydantic", True) is None:
                del sys.modules["pydantic"]
    except ImportError as exc:
        raise ConfigError(f"the Ray engine needs Ray Data: pip install 'neardup[ray]' ({exc})") from None
    return ray.data


def check_reachable(address: str, timeout: float = 10.0) -> None:
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


def join_with_token(address: str) -> Optional[str]:
    """Token authentication exactly when the cluster at ``address`` asks for it. A driver in
    token mode requires the token of whoever calls it back, so on a cluster without authentication
    its workers cannot return their results (the run hangs, or fails with ``OwnerDiedError``);
    one without the token cannot join a cluster with authentication (Ray retries for 20 s and says
    only "Failed to connect"). So the cluster is asked first without a token: it answers, and
    the run joins it without one (``RAY_AUTH_MODE=disabled`` for this process, whatever a token
    file or the environment says); it refuses, and the run joins with the token Ray finds
    (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``) if the cluster accepts
    it, or stops at once with one line that says what to set. The token is never printed.
    Returns ``RAY_AUTH_MODE`` as it was before (None: unset), for :func:`restore_auth_mode`."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config, GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:  # a Ray without token authentication
        return os.environ.get(AUTH_MODE)
    before = os.environ.get(AUTH_MODE)

    def accepted(mode: str) -> Optional[bool]:  # None: no answer (ray.init says why, as before)
        os.environ[AUTH_MODE] = mode
        Config.initialize("")  # Ray read its settings at import; this process now uses ``mode``
        try:
            with stderr_silenced():  # the client's C++ log line; the error below says it in words
                GcsClient(address=address).cluster_id
            return True
        except AuthenticationError:
            return False
        except Exception:
            return None

    if accepted("disabled") is not False:
        return before
    has = AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True)
    if has and accepted("token") is not False:
        return before
    restore_auth_mode(before)
    what = "refused this driver's token" if has else "needs a token and this driver has none"
    raise ConfigError(f"the Ray cluster at {address} uses token authentication and {what}: set "
                      f"RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's token (`ray get-auth-token` on "
                      f"its head node prints it)") from None


def restore_auth_mode(before: Optional[str]) -> None:
    """``RAY_AUTH_MODE`` as it was before :func:`join_with_token` (for a later ``ray.init`` of the
    same process)."""
    if os.environ.get(AUTH_MODE) == before:
        return
    if before is None:
        os.environ.pop(AUTH_MODE, None)
    else:
        os.environ[AUTH_MODE] = before
    try:
        from ray._raylet import Config
        Config.initialize("")
    except ImportError:
        pass


LEAN_ENV = "NEARDUP_RAY_LEAN"


def start_local(ray, cpus: int, log_monitor: bool, one_worker: bool = False, **kwargs):
    """The local instance of a run, started the lean way, and the driver connected to it (``ray.init``
    with ``kwargs``); returns its node, for :func:`stop_local`; None: started by
    ``ray.init(address="local")`` as before (``NEARDUP_RAY_LEAN=0``, or a Ray whose internals
    differ). Ray's own start of a local instance also starts three Python processes that a run of
    neardup never uses: the dashboard's head (started even with ``include_dashboard=False``, and
    ``ray.init`` waits until it has published its address before it starts the raylet), the
    autoscaler's monitor (which, at the end, outlives its SIGTERM: ``ray.shutdown`` waits 1 s for
    it, then kills it), and the log monitor (which sends the workers' output to the driver: kept
    unless ``log_monitor`` is False, as under ``--quiet``); and its idle workers are not killed
    (a run's are as many as the node's CPUs; Ray killed one in the pair stage and started two more
    for the write stage: 2 of 4 workers started for nothing). Measured on 2 busy CPUs (load 6,
    ``bench/ray_startup.py``, medians of 3; bench/results/ray5_startup.json): the engine's start
    3.6 -> 2.3 s, its first tasks 1.1 -> 0.9 s, its stop 1.7 -> 0.7 s; 4.95 -> 3.51 CPU-s of the
    driver and the instance's processes (10 -> 7). The raylet's two agents, which it waits for
    before it registers the node, are stand-ins (:func:`lean_agents`): the node is up in ~1.0 s
    instead of ~2.6 s on 2 busy CPUs. Token authentication is set up as ``ray.init`` sets it up
    for a new instance (on by default in Ray 2.60, a token made if there is none). ``one_worker``:
    the run's calls go to one process (:mod:`.ray_runner`), so no idle worker per CPU is started
    when the driver connects (each would import Ray for nothing): the raylet starts one worker as
    it starts (``enable_worker_prestart``, its ``--num_prestart_python_workers`` 1 instead of the
    CPUs: :class:`agents_replaced`; not for a run with a runtime environment, which that worker
    would lack), which imports Ray while the driver connects and becomes the runner (Ray's
    timeline of a 100k run on 2 CPUs at load 20: the runner's first call began 0.25 s after the
    driver had connected, 2.6-3.9 s without it); and Ray's memory monitor is off:
    it kills a worker when the node's memory in use (other programs' included) passes 95%, and an
    actor's calls killed so are not retried (a run failed on a shared machine whose others held
    22.6 of 23.5 GB), where the local engine's process runs on."""
    if os.environ.get(LEAN_ENV, "").strip() == "0":
        return None
    try:
        from ray._private.authentication.authentication_token_setup import (enable_token_auth_by_default,
                                                                            ensure_token_if_auth_enabled)
        from ray._private.node import Node
        from ray._private.parameter import RayParams
    except ImportError:
        return None

    stubbed = lean_agents(kwargs.get("runtime_env"))
    # a worker started before the job's runtime environment is known cannot take the job's calls
    prestart = one_worker and not (kwargs.get("runtime_env") or job_runtime_env())

    class LeanNode(Node):
        def start_api_server(self, *args, **kw):  # no dashboard head: nothing of neardup's asks it anything
            self._webui_url = None

        def start_raylet(self, *args, **kw):  # its agents replaced by ray_agent.py (lean_agents)
            with agents_replaced(self._session_dir, self._node_id, stubbed, prestart=1 if prestart else None):
                return super().start_raylet(*args, **kw)

    # the raylet kills a worker idle for 1 s (the second one, while the pair stage's one call holds
    # both CPUs of a 2-CPU node), then starts two fresh ones for the write stage's tasks, each paying
    # Ray's import again (and neardup's, unwarmed): the instance's workers are the run's, kept.
    # Ray starts its workers at nice 15 (its daemons stay responsive beside other jobs' tasks); the
    # instance's workers do the run's work and run it at the run's priority, as the local engine's
    # process does: at nice 15 every process at 0 comes first (the driver, the daemons; where the
    # kernel does not group a session's processes, sched_autogroup off, any program of the machine)
    system_config: dict = {"kill_idle_workers_interval_ms": 0, "worker_niceness": 0}
    if one_worker:
        system_config.update(prestart_worker_first_driver=False, memory_monitor_refresh_ms=0,
                             enable_worker_prestart=prestart)
    enable_token_auth_by_default()
    ensure_token_if_auth_enabled(system_config, create_token_if_missing=True)
    try:
        params = RayParams(num_cpus=cpus, include_dashboard=False, no_monitor=True, include_log_monitor=log_monitor,
                           _system_config=system_config, env_vars=arena_env())
    except TypeError:  # a Ray whose parameters differ: its own start
        return None
    node = LeanNode(params, head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True)
    try:
        ray.init(address=node.address, **kwargs)
    except BaseException:
        stop_local(node)
        raise
    return node


ARENA_ENV = "MALLOC_ARENA_MAX"
WORKER_THREADS = 32  # about the threads of a worker of the instance: Ray's ~20, numba's, the read's own
SMALL_NODE_ARENAS = 2


def arena_env() -> dict:
    """``MALLOC_ARENA_MAX`` for the raylet of the local instance, which its workers inherit, on a
    node where glibc's own bound (8 arenas a core) is below the threads of a worker: 2, unless the
    environment sets it. A worker of such a node has every arena taken by Ray's threads before a
    task runs, and glibc gives each thread that starts later (a read block's prefetch and writer
    threads, one set a block) one of them in turn, not the arena of the block's threads that
    ended: the 64 MiB a range reads its blocks into was new memory in every task (~16,800 pages
    faulted in and zeroed a task; each worker's RSS 430 -> 1,080 MB over the read stage of 1M
    documents), where the local engine's process (a few threads, arenas free to be taken again)
    reuses it. With 2 arenas each task's buffers are the last one's (~0 pages a task, RSS flat at
    480 MB). On a larger node glibc's bound is above the threads and nothing is set: there
    numba's threads allocating at once (the verification's) each keep an arena of their own."""
    if ARENA_ENV in os.environ:
        return {}
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: not glibc
        return {}
    return {ARENA_ENV: str(SMALL_NODE_ARENAS)} if 8 * cores < WORKER_THREADS else {}


AGENTS_ENV = "NEARDUP_RAY_AGENTS"
# the raylet's agents, by the flag that gives the raylet its command, with the ports each writes
# into the session folder before the raylet registers its node
AGENT_PORTS = {"dashboard_agent": ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port"),
               "runtime_env_agent": ("runtime_env_agent_port",)}


def lean_agents(runtime_env) -> tuple:
    """The agents of the raylet that the lean instance replaces by :mod:`.ray_agent` (a script
    that writes the ports the raylet waits for, as "not served", and serves nothing): the
    dashboard agent always (the instance has no dashboard), the runtime-env agent where the run
    has no runtime environment (``runtime_env``: what the driver gives ``ray.init``; none unless
    it hands an object store's settings to the workers) and Ray is not told to use one by the
    environment. ``NEARDUP_RAY_AGENTS=ray``: Ray's own agents, as before. Measured on 2 CPUs
    (bench/ray_startup.py): see :func:`start_local`."""
    if os.environ.get(AGENTS_ENV, "").strip().lower() == "ray":
        return ()
    if runtime_env or job_runtime_env():
        return ("dashboard_agent",)
    return ("dashboard_agent", "runtime_env_agent")


def job_runtime_env() -> bool:
    """Whether Ray may give the run's job a runtime environment of its own making: a hook
    (``RAY_RUNTIME_ENV_HOOK``), a job's settings in the environment, or a driver under ``uv run``
    (Ray then runs the workers through uv); True where this Ray cannot be asked."""
    if any(os.environ.get(v) for v in ("RAY_RUNTIME_ENV_HOOK", "RAY_JOB_CONFIG_JSON_ENV_VAR")):
        return True
    try:
        from ray._private import ray_constants
        if not ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV:
            return False
        from ray._private.runtime_env.uv_runtime_env_hook import _get_uv_run_cmdline
        return bool(_get_uv_run_cmdline())
    except Exception:
        return True


class agents_replaced:
    """While the raylet is started (``services.start_raylet``, which builds its command), the
    commands of the ``agents`` it starts are :mod:`.ray_agent`'s (this module's ``start_ray_process``
    rewrites the raylet's ``--NAME_command=`` arguments; put back after), and with ``prestart``
    the workers it starts as it starts (when ``enable_worker_prestart`` is on) that many, not one
    per CPU. With the dashboard agent replaced, Ray's check of the dashboard's dependencies is
    not made: it only chooses a flag of that agent's command (``--minimal``), and it imports
    aiohttp (and makes two SSL contexts, reading the system's certificates) in the driver before
    the raylet starts: 0.3-0.7 s of the driver's CPU in the start of every run (cProfile of
    ``RayEngine.__enter__`` on 2 loaded CPUs), which nothing else of a run imports."""

    def __init__(self, session_dir: str, node_id: str, agents, prestart: Optional[int] = None):
        self.session_dir, self.node_id, self.agents = session_dir, node_id, tuple(agents)
        self.prestart = prestart

    def command(self, agent: str) -> str:
        import subprocess
        import sys
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ray_agent.py")
        return subprocess.list2cmdline([sys.executable, "-S", "-E", "-s", script, f"--session-dir={self.session_dir}",
                                        f"--node-id={self.node_id}", f"--ports={','.join(AGENT_PORTS[agent])}"])

    def __enter__(self):
        from ray._private import services, utils
        self.services, self.original = services, getattr(services, "start_ray_process", None)
        self.utils, self.checked = utils, None
        if "dashboard_agent" in self.agents and hasattr(utils, "get_dashboard_dependency_error"):
            self.checked = utils.get_dashboard_dependency_error
            utils.get_dashboard_dependency_error = _no_dependency_error
        flags = {f"--{agent}_command=": self.command(agent) for agent in self.agents}
        if self.prestart is not None:
            flags["--num_prestart_python_workers="] = str(self.prestart)
        if not flags or self.original is None:  # a Ray that starts its raylet otherwise: as it does
            return self

        def start_ray_process(command, *args, **kw):
            if any(str(a).startswith("--dashboard_agent_command=") for a in command):  # the raylet's
                command = [next((flag + new for flag, new in flags.items() if str(a).startswith(flag)), a)
                           for a in command]
            return self.original(command, *args, **kw)

        services.start_ray_process = start_ray_process
        return self

    def __exit__(self, *exc):
        if self.original is not None:
            self.services.start_ray_process = self.original
        if self.checked is not None:
            self.utils.get_dashboard_dependency_error = self.checked
        return False


def _no_dependency_error():
    """Ray's check of the dashboard's dependencies, for a raylet whose dashboard agent is a stand-in:
    none missing (the agent's flags are not used)."""
    return None


def stop_local(node) -> None:
    """The processes of a node of :func:`start_local` stopped (the driver disconnected before)."""
    if node is not None:
        node.kill_all_processes(check_alive=False, allow_graceful=True)


def instance_processes(watchdog) -> list:
    """The processes this one started (the instance's, their workers), less the ``watchdog``
    (a ``Popen``, or None), for :func:`end_processes`: taken before the instance is stopped, while
    its workers are still the raylet's children (once it is gone they are nobody's)."""
    import psutil
    try:
        return [p for p in psutil.Process().children(recursive=True) if watchdog is None or p.pid != watchdog.pid]
    except psutil.Error:
        return []


def end_processes(procs, timeout: float = 10.0) -> None:
    """``procs`` (psutil processes) killed if still alive and waited for until each one has ended
    (a zombie has: its parent, gone, cannot reap it; psutil compares each one's start time, so a
    reused process id is left alone): a worker notices the raylet's end only at its next check."""
    import time

    import psutil
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    for p in procs:
        try:
            while p.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
                time.sleep(0.002)
        except psutil.Error:  # gone (reaped)
            pass


STALL_ENV = "NEARDUP_RAY_STALL_SECONDS"
STALL_SECONDS = 300.0


def stall_seconds() -> float:
    """How long a run waits on a cluster that runs none of its tasks (no CPU of it held, no
    result arriving) before it stops: ``NEARDUP_RAY_STALL_SECONDS``, 300 by default."""
    value = os.environ.get(STALL_ENV, "").strip()
    if not value:
        return STALL_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise ConfigError(f"{STALL_ENV}={value!r}: give a number of seconds above 0")
    return seconds


def cluster_busy(ray) -> bool:
    """Some task holds a CPU of the cluster (Ray's own count, kept by its control service: no
    dashboard needed). A run whose tasks cannot be scheduled (no node with the CPUs a task asks
    for, every node with CPUs lost) leaves them all free while its results never come."""
    try:
        return ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0)
    except Exception:  # the control service does not answer: nothing is known to run
        return False


def stalled_message(ray, where: str, waited: float, cpus_then: int, need: int) -> str:
    """The one line of a run stopped because nothing of it ran for ``waited`` seconds: what the
    cluster offers now, what it offered when the run started, what one task asks for."""
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
    except Exception:
        nodes = []
    per_node = [int(n.get("Resources", {}).get("CPU", 0)) for n in nodes]
    most = max(per_node or [0])
    offers = (f"it offers {sum(per_node)} CPUs now, at most {most} on one of its {len(nodes)} nodes "
              f"({cpus_then} when the run started), and a task of the run needs {need} on one node")
    fix = "add nodes with CPUs" + (" or lower --workers" if 0 < most < need else "")
    return (f"{where} ran none of neardup's tasks for {waited:.0f} s: {offers}; {fix} (a run waits "
            f"{stall_seconds():g} s for a cluster that runs nothing: {STALL_ENV}); the finished stages are kept "
            f"in the work directory (use --resume)")



# Ray's errors for work the cluster lost and could not recompute after its retries: a node or a
# worker gone, an object whose owner died or whose lineage is gone. Not the run's fault, nor the
# user's: the finished stages are in the work directory, and --resume goes on from them. (A
# RayTaskError whose cause is none of these is an exception raised in neardup's own code: a bug,
# shown with its traceback; so is a RaySystemError, which also says that a worker could not load
# what a task needs; a task that failed in a worker with another neardup than the driver's is said
# to be that, in one line: other_neardup.)
LOST_WORK = ("ObjectLostError", "OwnerDiedError", "ObjectReconstructionFailedError", "ObjectFetchTimedOutError",
             "NodeDiedError", "WorkerCrashedError", "LocalRayletDiedError", "ActorDiedError",
             "ActorUnavailableError", "OutOfMemoryError", "TaskUnschedulableError")


_CODE_IDENTITY: Optional[str] = None


def code_identity() -> str:
    """This process's neardup: its version and a digest of its modules' bytes (two checkouts of
    one version differ), made once per process (~120 files, a few ms)."""
    global _CODE_IDENTITY
    if _CODE_IDENTITY is None:
        import hashlib
        from pathlib import Path
        from .. import __version__
        root = Path(__file__).resolve().parent.parent
        digest = hashlib.sha1()
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        _CODE_IDENTITY = f"{__version__} ({digest.hexdigest()[:12]})"
    return _CODE_IDENTITY


def other_neardup(ray, probes, timeout: float = 10.0) -> Optional[str]:
    """The one line saying that the cluster's workers import another neardup than this driver,
    from the answers of :func:`~.ray_worker.warm_worker` tasks (``probes``: their object refs, each
    ``(code_identity, where)``), or None when they run the same one or cannot tell in ``timeout``
    seconds. A task of the run that fails in a worker with another neardup fails for that reason
    (a function or module of the driver's that the worker's neardup lacks), not for a bug."""
    import re
    try:
        ready, _ = ray.wait(list(probes), num_returns=len(probes), timeout=timeout)
    except Exception:
        return None
    answers = []
    for ref in ready:
        try:
            answer = ray.get(ref, timeout=timeout)
        except Exception as exc:  # a worker without neardup cannot load the probe itself
            missing = re.search(r"No module named '(neardup[\w.]*)'", str(exc))
            if missing:
                return (f"the Ray cluster's workers cannot import neardup (No module named '{missing.group(1)}'); "
                        f"install the same neardup on every node and the driver")
            return None
        if answer:
            answers.append(answer)
    ours = code_identity()
    for theirs, where in answers:
        if theirs != ours:
            here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            return (f"the Ray cluster's workers import another neardup than this driver: neardup {theirs} "
                    f"on {where}, neardup {ours} here ({here}); install the same neardup on every node "
                    f"and the driver")
    return None


def lost_work(ray, exc: BaseException) -> Optional[BaseException]:
    """The error of Ray's in ``exc``'s chain (its causes, its context, a task error's cause)
    that says the cluster lost work (:data:`LOST_WORK`), or None."""
    kinds = tuple(k for k in (getattr(ray.exceptions, n, None) for n in LOST_WORK) if isinstance(k, type))
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen or len(seen) > 20:
            continue
        seen.add(id(e))
        if isinstance(e, kinds):
            return e
        todo += [e.__cause__, e.__context__, getattr(e, "cause", None)]
    return None


def lost_work_message(where: str, error: BaseException) -> str:
    """The one line of a run stopped by work its cluster lost (:func:`lost_work`)."""
    from ..errors import one_line
    return (f"{where} lost work it could not recompute ({type(error).__name__}: {one_line(error, 200)}); "
            f"the finished stages are kept in the work directory: run the same command again with "
            f"--resume once the cluster has its nodes")


MARK_ENV = "NEARDUP_RAY_DRIVER"  # in the environment of every process of a run's own instance: the driver's id

WATCHDOG = r"""
import re, sys, time, psutil
driver, ours, me = psutil.Process(int(sys.argv[1])), {}, psutil.Process()
SESSION = re.compile(r"session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_%d\b" % driver.pid)  # Ray's name for it
MARK = ("MARK_ENV", str(driver.pid))


def of_the_instance(p):  # started after this one, with the driver's mark in its environment (every process
    # the instance started: they inherit it) or the session in its arguments (a process started otherwise)
    try:
        if p.pid == me.pid or p.create_time() < me.create_time():
            return False
        if any(SESSION.search(a) for a in p.cmdline()):
            return True
        if p.environ().get(MARK[0]) == MARK[1]:
            return True
        if any(SESSION.search(f.path) for f in p.open_files()):  # its logs in the session's folder
            return True
        # a process that renamed itself (setproctitle: ray::RuntimeEnvAgent) may have blanked the
        # start of its environment block, of which psutil then reads nothing: the block's bytes
        with open("/proc/%d/environ" % p.pid, "rb") as f:
            return ("\0%s=%s\0" % MARK).encode() in b"\0" + f.read()
    except (psutil.Error, OSError):
        return False


def note(roots):  # the descendants of the instance's processes
    for root in roots:
        try:  # a root that is gone is skipped: its process id may be another process's by now
            if root.is_running():
                ours.update((p.pid, p) for p in root.children(recursive=True) if p.pid not in ours)
        except psutil.Error:
            pass


sys.stdin.buffer.read()  # returns when the pipe closes: the driver ended or died, however it died
# Sweep until two rounds in a row find nothing alive (the raylet may start one more worker while it dies).
quiet, deadline = 0, time.time() + 10
while quiet < 2 and time.time() < deadline:
    ours.update((p.pid, p) for p in psutil.process_iter() if p.pid not in ours and of_the_instance(p))
    note(list(ours.values()))
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
        time.sleep(0.1)
""".replace("MARK_ENV", MARK_ENV)


def start_watchdog():
    """The processes of the local instance this run started, killed when the driver is gone. Ray
    ties its GCS server and raylet to the driver's life, but its dashboard and runtime-env agents
    (~180 MB) outlive a driver killed with SIGKILL by 30-60 s. A small process, started before the
    instance, blocks on a pipe of which the driver holds the other end; the pipe closes when the
    driver ends or is killed, and the watchdog then kills every process started after it whose
    environment carries the driver's mark (:data:`MARK_ENV`, set while the instance starts:
    :class:`instance_marked`; the instance's processes inherit it, workers and agents that renamed
    themselves ``ray::...`` included) or whose arguments name the instance's session, and their
    descendants, in rounds 0.1 s apart until two find nothing alive (psutil checks each one's
    start time, so a reused process id is never touched). Nothing runs in it while the driver
    lives (it noted the driver's descendants twice a second before, a walk of /proc each: most of
    its 0.12 CPU-s in a 1M run, bench/results/plan_runs42_r2.json). Needs psutil (a dependency of
    Ray); without it, no watchdog."""
    import importlib.util
    import subprocess
    import sys
    if importlib.util.find_spec("psutil") is None:
        return None
    return subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


class instance_marked:
    """The driver's mark (:data:`MARK_ENV`: its process id) in this process's environment while
    the block starts the run's own instance, which its processes inherit (and theirs), for the
    watchdog, with ``settings`` (the object stores' ``AWS_*``, ...: the workers inherit them, as
    no runtime environment is needed, whose agent writes its variables, secrets included, into
    its log file); the environment as it was afterwards."""

    def __init__(self, settings: Optional[Dict[str, str]] = None):
        self.settings = {MARK_ENV: str(os.getpid()), **(settings or {})}

    def __enter__(self):
        self.before = {k: os.environ.get(k) for k in self.settings}
        os.environ.update(self.settings)
        return self

    def __exit__(self, *exc):
        for k, v in self.before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False


class pydantic_hidden:
    """pydantic not importable for the block, in the ``neardup`` program (``program``: the
    process's last work, :func:`neardup.progress.last_work`) where nothing has imported it: the
    serialization context Ray makes for the driver (at its first task or actor) then registers
    no serializers for pydantic's models, which neardup never sends, as a Ray installed without
    pydantic does (``ray._common.pydantic_compat`` keeps that for the process, which exits after
    the run), instead of importing pydantic, pydantic.v1 and their dependencies on the start's
    critical path (0.065 CPU-s, 0.36-0.9 s of wall at load 12-18); importable again after. A
    library caller's process is left alone: its other uses of Ray may want pydantic."""

    def __init__(self, program: bool):
        import sys
        self.hide = program and "pydantic" not in sys.modules and "ray._common.pydantic_compat" not in sys.modules

    def __enter__(self):
        import sys
        if self.hide:
            sys.modules["pydantic"] = None  # type: ignore[assignment]  # import pydantic -> ImportError
        return self

    def __exit__(self, *exc):
        import sys
        if self.hide and "pydantic" in sys.modules and sys.modules["pydantic"] is None:
            del sys.modules["pydantic"]
        return False


class stderr_silenced:
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


class signals_kept:
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


class Held(logging.Filter):
    """Holds back, on one of Ray's log handlers, the warnings that a successful run of neardup
    makes without anything being wrong: Ray Data's "no available CPUs ... the Dataset job will
    hang" (a step's tasks hold every CPU while the next step is planned; it runs when they end),
    "Progress bars disabled" (neardup draws its own), the notice that a local instance has token
    authentication on; under ``--quiet`` every record below ERROR. Held, not dropped: a run that
    fails or is interrupted shows them (:meth:`HeldWarnings.release`), since there the "will hang"
    warning may be the one that says why."""

    PHRASES = ("does not have any available CPUs", "Progress bars disabled",
               "Token authentication is enabled for this Ray cluster")

    def __init__(self, handler: logging.Handler, held, everything: bool):
        super().__init__()
        self.handler, self.held, self.everything = handler, held, everything

    def filter(self, record: logging.LogRecord) -> bool:
        if (self.everything and record.levelno < logging.ERROR) or any(p in record.getMessage() for p in self.PHRASES):
            self.held.append((self.handler, record))
            return False
        return True


class HeldWarnings:
    """The :class:`Held` filters of a run on the handlers of Ray's loggers (``ray`` and ``ray.data``
    print through their own handlers and do not propagate). The last ``MAX`` records are kept (a
    long run under ``--quiet`` may log many)."""

    MAX = 200

    def __init__(self, quiet: bool):
        import collections
        self.quiet, self.held, self.filters = quiet, collections.deque(maxlen=self.MAX), {}

    def attach(self) -> None:
        """On every handler of Ray's loggers not yet covered (again after ``ray.init``, which may add some)."""
        for name in ("ray", "ray.data"):
            for handler in logging.getLogger(name).handlers:
                if handler not in self.filters:
                    self.filters[handler] = Held(handler, self.held, self.quiet)
                    handler.addFilter(self.filters[handler])

    def release(self, show: bool) -> None:
        """The filters taken off; ``show``: the run failed, the held records are written now (in
        their order, through their handlers), else they are forgotten."""
        for handler, flt in self.filters.items():
            handler.removeFilter(flt)
        self.filters = {}
        held = list(self.held)
        self.held.clear()
        for handler, record in held if show else ():
            try:
                handler.handle(record)
            except Exception:  # a handler closed by Ray's shutdown: nothing more to show there
                pass
