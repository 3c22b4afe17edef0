"""The end of a run's own Ray instance: the ``neardup`` program (which exits after the run) stops
it in a helper thread while it draws the report and publishes, joined at its exit, and nothing of
the instance outlives the program; a library call stops it before it returns, in its own thread.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import psutil
import pytest

from neardup.engines import ray as ray_engine
from neardup.engines.ray import RayEngine
from neardup.engines.ray_cluster import end_processes, instance_processes

from helpers import child_env, neardup_command


def _stopped_in(monkeypatch, *, last_work: bool, failed: bool = False):
    """(the thread that ran the engine's stop, the functions registered to run at exit) after
    ``__exit__`` of an engine that had started its own instance (Ray itself not started)."""
    ran, registered = [], []
    monkeypatch.setattr(ray_engine, "last_work", lambda: last_work)
    monkeypatch.setattr(ray_engine.atexit, "register", registered.append)
    monkeypatch.setattr(RayEngine, "_stop", lambda self, program=False: ran.append((threading.current_thread(), program)))
    engine = RayEngine(2, quiet=True)
    engine.started, engine._node = True, object()  # as _start leaves them with an instance of its own
    exc = (RuntimeError, RuntimeError("failed"), None) if failed else (None, None, None)
    engine.__exit__(*exc)
    for join in registered:
        join()
    return ran[0], registered


def test_the_programs_own_instance_is_stopped_in_a_helper_thread_joined_at_exit(monkeypatch):
    (thread, program), registered = _stopped_in(monkeypatch, last_work=True)
    assert thread.name == "neardup-ray-stop" and thread.daemon and program
    assert registered == [thread.join]


@pytest.mark.parametrize("last_work,failed", [(False, False), (True, True)])
def test_a_library_call_or_a_failed_run_stops_the_instance_before_it_returns(monkeypatch, last_work, failed):
    """A library caller may start Ray again at once; a failed run shows Ray's held warnings and
    its error after the instance is gone, as before."""
    (thread, program), registered = _stopped_in(monkeypatch, last_work=last_work, failed=failed)
    assert thread is threading.current_thread() and not program and registered == []


def test_last_work_only_under_the_programs_handler():
    """``interrupt_handler(to_exit=True)`` (the command line run as the program) says the process
    ends after the command; a handler without it (or none) does not. In a fresh Python: the
    program's handler stays installed until the process exits."""
    code = ("from neardup.progress import interrupt_handler, last_work\n"
            "print(last_work())\n"
            "with interrupt_handler():\n    print(last_work())\n"
            "with interrupt_handler(to_exit=True):\n    print(last_work())\n"
            "print(last_work())\n")
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "True", "True"]


def _sleepers(n: int) -> list:
    return [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(n)]


def test_the_instances_processes_are_this_ones_descendants_but_the_watchdog():
    (worker, watchdog) = procs = _sleepers(2)
    try:
        found = {p.pid for p in instance_processes(watchdog)}
        assert worker.pid in found and watchdog.pid not in found
        assert {worker.pid, watchdog.pid} <= {p.pid for p in instance_processes(None)}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_end_processes_kills_each_one_and_returns_once_it_has_ended():
    procs = _sleepers(2)
    try:
        end_processes([psutil.Process(p.pid) for p in procs])
        # ended: a zombie until this process (their parent) reaps them
        assert [psutil.Process(p.pid).status() for p in procs] == [psutil.STATUS_ZOMBIE] * 2
    finally:
        for p in procs:
            p.kill()
            p.wait()


STOP_THREAD = """
import sys, threading
import neardup.engines.ray as R
stop = R.RayEngine._stop
def _stop(self, *args):
    sys.stderr.write(f"stopped in {threading.current_thread().name}\\n")
    stop(self, *args)
R.RayEngine._stop = _stop
"""


@pytest.mark.slow
@pytest.mark.ray
def test_the_program_leaves_no_process_of_its_instance_behind(tmp_path):
    """Every process of the run's instance has ended when the program has exited, though it
    stopped the instance while it drew the report; the watchdog (which the program does not wait
    for: its last sweep finds nothing) ends on its own."""
    from neardup.testing.synth import generate_corpus, write_jsonl
    corpus = tmp_path / "c.jsonl"
    write_jsonl(corpus, generate_corpus(1000, seed=3).texts)
    cmd = neardup_command("dedup", corpus, "-o", tmp_path / "out", "--engine", "ray", "--workers", "2", "--quiet",
                          setup=STOP_THREAD)
    proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    driver, seen, names = psutil.Process(proc.pid), {}, {}
    while proc.poll() is None:
        try:
            for p in driver.children(recursive=True):
                seen.setdefault(p.pid, p)
                names[p.pid] = " ".join(_cmdline(p)) or names.get(p.pid, "")  # as it runs (after its exec)
        except psutil.Error:
            pass
        time.sleep(0.02)
    _, err = proc.communicate(timeout=300)
    watchdogs = {pid: p for pid, p in seen.items() if "sys.stdin.buffer.read()" in names[pid]}
    left = [p for pid, p in seen.items() if pid not in watchdogs and _alive(p)]  # at once
    assert proc.returncode == 0, err[-3000:]
    assert "stopped in neardup-ray-stop" in err, err[-3000:]
    assert any("raylet" in n for n in names.values()), "the run's instance was not seen"
    assert not left, [" ".join(_cmdline(p))[:120] for p in left]
    assert len(watchdogs) == 1, list(names.values())
    deadline = time.time() + 30
    while time.time() < deadline and any(_alive(p) for p in watchdogs.values()):
        time.sleep(0.05)
    assert not any(_alive(p) for p in watchdogs.values())
    assert (tmp_path / "out" / "stats.json").exists() and (tmp_path / "out" / "report.html").exists()


OUT_OF_FILES = """
import atexit, os, resource
from neardup.engines.ray import RayEngine
from neardup.progress import interrupt_handler
limits = resource.getrlimit(resource.RLIMIT_NOFILE)
with interrupt_handler(to_exit=True):  # as the program runs a command: the stop in its helper thread
    with RayEngine(1, quiet=True) as engine:
        atexit.register(resource.setrlimit, resource.RLIMIT_NOFILE, limits)  # runs after the stop's join
        fd = os.open(os.devnull, os.O_RDONLY)
        os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd, limits[1]))  # no file descriptor left to open
print("run done", flush=True)
"""


@pytest.mark.slow
@pytest.mark.ray
def test_a_failed_stop_in_the_programs_helper_thread_is_one_line_and_the_run_succeeds():
    """The helper thread's stop fails for real (the driver has no file descriptor left when it
    lists the instance's processes): one line on stderr, what failed and how to end what may
    remain, no thread's traceback; the exit status is the run's."""
    out = subprocess.run([sys.executable, "-c", OUT_OF_FILES], env=child_env(), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout == "run done\n", out.stderr[-3000:]
    said = [line for line in out.stderr.splitlines() if "stopping the run's own Ray instance failed" in line]
    assert len(said) == 1 and "Too many open files" in said[0] and "ray stop" in said[0], out.stderr[-3000:]
    assert said[0].startswith("neardup: warning: ")
    assert "Traceback" not in out.stderr and "Exception in thread" not in out.stderr, out.stderr[-3000:]


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmdline(p) -> list:
    try:
        return p.cmdline()
    except psutil.Error:
        return []
