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
    """A handler on the ``ray.data`` logger, as Ray puts its own there (it does not propagate)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    lg = logging.getLogger("ray.data")
    level = lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    yield lg, out
    lg.removeHandler(handler)
    lg.setLevel(level)


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
    lg, out = ray_handler
    held = HeldWarnings(quiet=True)
    held.attach()
    for i in range(HeldWarnings.MAX + 50):
        lg.warning("warning %d", i)
    held.release(show=True)
    assert out.getvalue().splitlines() == [f"warning {i}" for i in range(50, HeldWarnings.MAX + 50)]


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
