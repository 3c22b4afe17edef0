"""Progress bars on stderr (tqdm), silenced by ``quiet``."""

from __future__ import annotations

import sys


class _Null:
    total = None

    def update(self, n=1):
        pass

    def refresh(self):
        pass

    def set_postfix_str(self, s, refresh=True):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def bar(desc: str, total=None, unit: str = "doc", quiet: bool = False):
    if quiet:
        return _Null()
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=(unit == "doc"), file=sys.stderr, dynamic_ncols=True,
                leave=True, mininterval=0.5)


# --------------------------------------------------------------------------- Ctrl-C at safe points
# The command line replaces Python's SIGINT handler with one that only raises a flag; the
# stages check it between batches. A compiled kernel or a C library is never interrupted in the
# middle (some of them swallow or garble a KeyboardInterrupt raised inside them), and the run
# stops within one batch. A second Ctrl-C interrupts at once.

_interrupted = False


def _on_sigint(signum, frame):
    global _interrupted
    if _interrupted:
        raise KeyboardInterrupt
    _interrupted = True


class interrupt_handler:
    """Context manager: the flag-raising SIGINT handler while the block runs (main thread only)."""

    def __enter__(self):
        import signal
        import threading
        global _interrupted
        _interrupted = False
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, _on_sigint)
        return self

    def __exit__(self, *exc):
        import signal
        global _interrupted
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        _interrupted = False
        return False


def check_interrupt() -> None:
    """Raises KeyboardInterrupt when Ctrl-C was pressed since the handler was installed."""
    if _interrupted:
        raise KeyboardInterrupt
