"""Progress on stderr, silenced by ``quiet``: tqdm bars on a terminal, plain lines elsewhere (a log
file must not fill with carriage-return redraws)."""

from __future__ import annotations

import sys


def plural(n: int, unit: str) -> str:
    """``unit`` for a count of ``n``: "1 file", "2 files", "1 match", "3 matches"."""
    if n == 1:
        return unit
    return unit + ("es" if unit.endswith(("s", "sh", "ch", "x")) else "s")


class _Null:
    total = None

    def update(self, n=1):
        pass

    def refresh(self):
        pass

    def set_postfix_str(self, s="", refresh=True):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Lines:
    """A progress "bar" for a stderr that is not a terminal (a log file, CI, a batch job): no
    carriage returns, only whole lines; one when the stage ends, and one every ``every``
    seconds while it runs, said by a timer thread when no update comes (a stage that counts
    one step at its end, or a long batch, still shows in a log that it is alive)."""

    def __init__(self, desc: str, total=None, unit: str = "doc", every: float = 30.0, file=None):
        import threading
        import time
        self.desc, self.total, self.unit, self.every = desc, total, unit, every
        self.file = file if file is not None else sys.stderr
        self.n = 0
        self.postfix = ""
        self._clock = time.monotonic
        self.start = self._last = self._clock()
        self.closed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if every > 0:
            threading.Thread(target=self._tick, name="neardup-progress", daemon=True).start()

    def _tick(self) -> None:
        """The timer: a line once ``every`` seconds have passed since the last one."""
        while True:
            wait = self._last + self.every - self._clock()
            if self._stop.wait(max(wait, 0.0)):
                return
            with self._lock:
                now = self._clock()
                if not self.closed and now - self._last >= self.every:
                    self._last = now
                    self._line(False, now)

    def _line(self, done: bool, now: float) -> None:
        secs = now - self.start
        count = f"{self.n:,}" if done or not self.total else f"{self.n:,}/{int(self.total):,}"
        unit = plural(self.n, self.unit)
        what = f"{self.desc} done: {count} {unit} in" if done else f"{self.desc}: {count} {unit} after"
        postfix = f" ({self.postfix})" if done and self.postfix else ""
        print(f"neardup: {what} {secs:.1f} s{postfix}", file=self.file, flush=True)

    def set_postfix_str(self, s="", refresh=True):
        """Said at the end of the "done" line, in brackets."""
        self.postfix = s

    def update(self, n=1):
        self.n += n
        if self.total is not None and self.n > self.total:  # an estimated total: never past 100%
            self.total = self.n
        with self._lock:
            now = self._clock()
            if now - self._last >= self.every:
                self._last = now
                self._line(False, now)

    def refresh(self):
        pass

    def close(self):
        self._stop.set()
        with self._lock:
            if not self.closed:
                self.closed = True
                self._line(True, self._clock())

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:  # the error says what happened; no "done" line before it
            self._stop.set()
            self.closed = True
        return False


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


# Set by the command line while a run compiles the kernels first: a rate measured over compile
# time would read as a slow tool ("38 doc/s"), so the bars show no rate and say why.
_compiling = False
_notice = None  # a line to print before the first bar, once: the run has got past its checks


class compiling:
    """Context manager: the bars opened inside it show no rate, and say "compiling first";
    ``notice`` is printed when the first of them opens (a run that stops at an error before any
    work shows the error alone)."""

    def __init__(self, notice: str = ""):
        self.notice = notice

    def __enter__(self):
        global _compiling, _notice
        _compiling, _notice = True, self.notice or None
        return self

    def __exit__(self, *exc):
        global _compiling, _notice
        _compiling, _notice = False, None
        return False


class compile_notice:
    """Context manager: prints ``notice`` on stderr once, when numba starts compiling a kernel
    inside the block (a miss of its disk cache: the first run of a version, or a kernel this
    command is the first to call), and nothing when every kernel comes from the cache. For the
    commands without progress bars (index add, index query, audit); numba's own
    "numba:compile" event, which fires only past the cache, says when."""

    def __init__(self, notice: str):
        self.notice = notice
        self.said = False

    def __enter__(self):
        from numba.core import event
        outer = self

        class Listener(event.Listener):
            def on_start(self, ev):
                if not outer.said:
                    outer.said = True
                    print(outer.notice, file=sys.stderr, flush=True)

            def on_end(self, ev):
                pass

        self._listener = Listener()
        event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc):
        from numba.core import event
        event.unregister("numba:compile", self._listener)
        return False


_NO_RATE = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}, compiling first]"


def bar(desc: str, total=None, unit: str = "doc", quiet: bool = False):
    """A progress bar on stderr: tqdm's on a terminal, plain lines (:class:`_Lines`) otherwise,
    nothing when ``quiet``."""
    global _notice
    if quiet:
        return _Null()
    if _notice:
        print(_notice, file=sys.stderr, flush=True)
        _notice = None
    if not _is_terminal(sys.stderr):
        return _Lines(desc + (" (compiling first)" if _compiling else ""), total=total, unit=unit)
    extra = {"bar_format": _NO_RATE} if _compiling and total else {}
    if _compiling and not total:
        desc += " (compiling first)"
    return _tqdm()(total=total, desc=desc, unit=unit, unit_scale=(unit == "doc"), file=sys.stderr,
                   dynamic_ncols=True, leave=True, mininterval=0.5, **extra)


_TQDM = None


def _tqdm():
    """tqdm's bar whose estimated total grows with the count: it never passes 100%."""
    global _TQDM
    if _TQDM is None:
        from tqdm.auto import tqdm

        class Bar(tqdm):
            def update(self, n=1):
                if self.total is not None and self.n + n > self.total:
                    self.total = self.n + n
                return super().update(n)

        _TQDM = Bar
    return _TQDM


# --------------------------------------------------------------------------- Ctrl-C at safe points
# The command line replaces Python's SIGINT and SIGTERM handlers with one that only raises a flag;
# every command checks it at its safe points (between batches, between segments, between the
# phases of an audit). A compiled kernel or a C library is never interrupted in the middle (some
# of them swallow or garble a KeyboardInterrupt raised inside them), and the command stops within
# one batch, leaving finished stages in the work directory and stopping what it started (a local
# Ray instance). A second signal interrupts at once.
#
# A command that commits something (an index's manifest switched, an output file published)
# calls commit_point() just before: a signal that came before it stops the command there, with
# nothing committed; one that comes after it is no interruption of the commit: the command
# finishes, reports and exits 0 (a second signal no longer interrupts). So exit 0 means the
# commit was made, 130 or 143 that it was not.

_interrupted = False
_committed = False    # past a commit point: signals are noted, never raised
signal_received = 0  # the signal number of the last interrupt (SIGINT or SIGTERM), 0 if none
_last_work = False   # under interrupt_handler(to_exit=True): the process ends after the command


def _on_signal(signum, frame):
    global _interrupted, signal_received
    if _committed:
        return
    signal_received = signum
    if _interrupted:
        raise KeyboardInterrupt
    _interrupted = True


class interrupt_handler:
    """Context manager: the flag-raising SIGINT and SIGTERM handler while the block runs (main
    thread only).

    ``to_exit``: the block is the process's last work (the command line run as the program):
    when it ends, the handler stays, past every commit point, until the process exits, so that a
    signal during the interpreter's shutdown (which takes a while with numba and pyarrow loaded)
    cannot turn a reported result into a death by signal (exit 143 after "added 20000
    documents")."""

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self, to_exit: bool = False):
        self.to_exit = to_exit

    def __enter__(self):
        import signal
        import threading
        global _interrupted, _committed, signal_received, _last_work
        _interrupted, _committed, signal_received = False, False, 0
        _last_work = self.to_exit
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                num = getattr(signal, name)
                self.previous[num] = signal.signal(num, _on_signal)
        return self

    def __exit__(self, *exc):
        import signal
        global _interrupted, _committed, _last_work
        if self.to_exit and self.previous:
            _committed = True  # the command is over: what comes now is no interruption of it
            return False
        for num, previous in self.previous.items():
            signal.signal(num, previous)
        _interrupted = _committed = _last_work = False
        return False


def last_work() -> bool:
    """Whether the command running is the process's last work (the command line run as the
    program: ``interrupt_handler(to_exit=True)``): what only a caller of the library needs once a
    call returns (a Ray instance stopped before it returns) may be finished while the command
    ends, or at the process's exit."""
    return _last_work


def last_signal() -> int:
    """The signal number of the last interrupt (SIGINT or SIGTERM) under the handler, 0 if none."""
    return signal_received


def check_interrupt() -> None:
    """Raises KeyboardInterrupt when Ctrl-C was pressed since the handler was installed."""
    if _interrupted:
        raise KeyboardInterrupt


def commit_point() -> None:
    """Called just before a command commits (switches an index's manifest, publishes its output):
    raises KeyboardInterrupt when a signal came before (nothing is committed); from here on,
    until the handler is removed, a signal is noted and never raised: the commit and the
    command's report run to their end."""
    global _committed
    check_interrupt()
    _committed = True
