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

from ..errors import ConfigError

def import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the Ray engine needs Ray: pip install 'neardup[ray]' ({exc})") from None
    return ray


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


def join_with_token(address: str) -> None:
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
        with stderr_silenced():  # the client's C++ log line; the error below says it in words
            GcsClient(address=address).cluster_id
    except AuthenticationError:
        has = os.environ.get("RAY_AUTH_MODE", "").lower() == "token"
        what = "refused this driver's token" if has else "needs a token and this driver has none"
        raise ConfigError(f"the Ray cluster at {address} uses token authentication and {what}: set "
                          f"RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's token (`ray get-auth-token` on "
                          f"its head node prints it) and RAY_AUTH_MODE=token") from None
    except Exception:  # any other failure to connect: ray.init says it, as before
        pass


WATCHDOG = r"""
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
        try:  # a root that is gone is skipped: its process id may be another process's by now
            if root.is_running():
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


def start_watchdog():
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
    return subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


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


class Misleading(logging.Filter):
    """Ray's warnings that a successful run of neardup makes without anything being wrong: Ray
    Data's "no available CPUs ... the Dataset job will hang" (a step's tasks hold every CPU while
    the next step is planned; it runs when they end), "Progress bars disabled" (neardup draws its
    own), and the notice that a local instance has token authentication on."""

    PHRASES = ("does not have any available CPUs", "Progress bars disabled",
               "Token authentication is enabled for this Ray cluster")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(p in message for p in self.PHRASES)


MISLEADING = Misleading()


def quiet_misleading() -> set:
    """Puts the filter on the handlers of Ray's loggers (``ray`` and ``ray.data`` print through their
    own handlers and do not propagate); returns the handlers, for the engine's exit."""
    handlers = {h for name in ("ray", "ray.data") for h in logging.getLogger(name).handlers}
    for handler in handlers:
        handler.addFilter(MISLEADING)
    return handlers
