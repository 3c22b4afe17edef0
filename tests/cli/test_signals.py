"""The command line's signals: Ctrl-C and SIGTERM stop a run at a safe point."""

from __future__ import annotations

import pytest


def test_sigterm_like_ctrl_c_stops_at_the_next_check_and_exits_143():
    """The command line's handler turns SIGINT and SIGTERM into a flag that the stages check
    between batches (nothing is torn in the middle of a kernel), a second one interrupts at once,
    and the exit status says which signal it was."""
    import os
    import signal

    from neardup import progress
    from neardup.cli import _interrupted

    before = signal.getsignal(signal.SIGTERM)
    with progress.interrupt_handler():
        assert signal.getsignal(signal.SIGTERM) is signal.getsignal(signal.SIGINT) is progress._on_signal
        progress.check_interrupt()  # nothing yet
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            progress.check_interrupt()
        with pytest.raises(KeyboardInterrupt):  # the second one at once
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before
    assert _interrupted() == 143
    with progress.interrupt_handler():
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            progress.check_interrupt()
    assert _interrupted() == 130
