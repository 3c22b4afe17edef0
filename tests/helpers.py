"""Helpers several test modules share (imported by name: tests/ is on sys.path under pytest's
default import mode)."""

from __future__ import annotations

import contextlib
import io
import os

import pytest

from neardup.errors import InputError
from neardup.io import read_source


def run_in_process(*args, cwd=None):
    """``neardup ARGS`` in this process (what ``python -m neardup`` runs): (exit code, stderr)."""
    from neardup.cli import main

    err = io.StringIO()
    old = os.getcwd()
    try:
        if cwd:
            os.chdir(cwd)
        with contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        os.chdir(old)
    return code, err.getvalue()


def fail_message(src, **kw) -> str:
    """The one-line InputError that reading ``src`` to its end raises."""
    with pytest.raises(InputError) as ei:
        for _ in read_source(src, **kw):
            pass
    msg = str(ei.value)
    assert "\n" not in msg and "\r" not in msg
    return msg
