"""What the Ray engine does around Ray without a cluster: Ray's warnings that a successful run
makes without anything being wrong are held back and shown only when the run fails; the bound
on how long a run waits for a cluster that runs none of its tasks is read from the environment,
and a bad value is one line. (The same on real clusters: test_ray_join.py.)"""

from __future__ import annotations

import io
import logging

import pytest

from neardup.engines.ray_cluster import STALL_ENV, STALL_SECONDS, HeldWarnings, stall_seconds
from neardup.errors import ConfigError

HANG = ("Warning: The Ray cluster currently does not have any available CPUs. The Dataset job will hang "
        "unless more CPUs are freed up.")


@pytest.fixture
def ray_handler():
    """A handler on the ``ray.data`` logger, as Ray puts its own there (it does not propagate); the
    only one on Ray's loggers while the test runs (Ray's own, where an earlier test imported Ray,
    are put back after it)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    lg, top = logging.getLogger("ray.data"), logging.getLogger("ray")
    saved = lg.level, lg.handlers[:], top.handlers[:]
    lg.handlers, top.handlers = [handler], []
    lg.setLevel(logging.INFO)
    yield lg, out
    lg.setLevel(saved[0])
    lg.handlers, top.handlers = saved[1], saved[2]


@pytest.mark.parametrize("failed", [False, True])
def test_misleading_warnings_are_shown_only_when_the_run_fails(ray_handler, failed):
    lg, out = ray_handler
    held = HeldWarnings(quiet=False)
    held.attach()
    lg.warning(HANG)
    lg.warning("Progress bars disabled. To enable, set ...")
    lg.warning("something else")
    assert out.getvalue() == "something else\n"
    held.release(show=failed)
    shown = out.getvalue().splitlines()
    assert shown == (["something else", HANG, "Progress bars disabled. To enable, set ..."] if failed
                     else ["something else"])
    lg.warning(HANG)  # released: the filter is gone
    assert out.getvalue().splitlines()[-1] == HANG


def test_quiet_holds_every_warning_and_lets_errors_through(ray_handler):
    lg, out = ray_handler
    held = HeldWarnings(quiet=True)
    held.attach()
    lg.warning("a warning")
    lg.error("an error")
    assert out.getvalue() == "an error\n"
    held.release(show=True)
    assert out.getvalue().splitlines() == ["an error", "a warning"]


def test_the_last_records_are_kept(ray_handler):
    """At most MAX held (a record held on each handler it meets counts once per handler: pytest's
    capture handlers are on Ray's loggers too where an earlier test imported Ray)."""
    lg, out = ray_handler
    held = HeldWarnings(quiet=True)
    held.attach()
    n = HeldWarnings.MAX + 50
    for i in range(n):
        lg.warning("warning %d", i)
    assert len(held.held) == HeldWarnings.MAX
    held.release(show=True)
    shown = out.getvalue().splitlines()
    first = n - len(shown)
    assert first >= 50 and shown == [f"warning {i}" for i in range(first, n)]


def test_stall_bound_from_the_environment(monkeypatch):
    monkeypatch.delenv(STALL_ENV, raising=False)
    assert stall_seconds() == STALL_SECONDS == 300
    monkeypatch.setenv(STALL_ENV, "12.5")
    assert stall_seconds() == 12.5
    for bad in ("0", "-3", "soon", "nan", "inf"):
        monkeypatch.setenv(STALL_ENV, bad)
        with pytest.raises(ConfigError) as ei:
            stall_seconds()
        assert STALL_ENV in str(ei.value) and "\n" not in str(ei.value)
