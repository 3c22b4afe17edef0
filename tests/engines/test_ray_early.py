"""The local Ray instance of the ``neardup`` program's run on the Ray engine, started as soon as its
arguments are parsed (:func:`neardup.engines.ray_cluster.start_early`), while the program imports
the pipeline and finds its inputs: the engine takes that instance (and its watchdog) when it
starts with the same settings, stops it when not; the run gives the local engine's bytes; a run
that fails before its engine starts leaves no process of the instance behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import psutil
import pytest

from helpers import child_env, neardup_command
from neardup.engines import ray_cluster
from test_ray_engine import assert_same, jsonl_corpus  # noqa: F401  (a fixture)

KEY = (2, True, ("dashboard_agent", "runtime_env_agent"), True, True)


@pytest.fixture
def early(monkeypatch):
    """A node of start_early that has started (a stand-in), and the nodes stopped."""
    stopped = []
    monkeypatch.setattr(ray_cluster, "stop_local", stopped.append)
    ready = threading.Event()
    ready.set()
    held = ray_cluster.HeldWarnings(quiet=True)
    monkeypatch.setattr(ray_cluster, "_early", {"key": KEY, "ready": ready, "result": {"node": "node"},
                                                "watchdog": "watchdog", "held": held})
    return stopped


def test_the_engine_takes_the_node_started_with_its_settings(early):
    assert ray_cluster.early_node(KEY) == "node"
    assert early == []
    assert ray_cluster.early_node(KEY) is None  # taken once


@pytest.mark.parametrize("other", [(4, *KEY[1:]), (2, False, *KEY[2:]), (*KEY[:2], ("dashboard_agent",), *KEY[3:]),
                                   (*KEY[:3], False, False), (*KEY[:4], False)])
def test_a_node_started_with_other_settings_is_stopped_and_not_taken(early, other):
    assert ray_cluster.early_node(other) is None
    assert early == ["node"]


def test_the_engine_takes_the_watchdog_started_before_the_node(early):
    assert ray_cluster.start_watchdog() == "watchdog"
    assert "watchdog" not in ray_cluster._early


def test_a_node_no_engine_took_is_stopped_at_exit(early):
    ray_cluster._stop_early()
    assert early == ["node"]


@pytest.mark.parametrize("argv, expected", [
    (["dedup", "in.jsonl", "-o", "out", "--engine", "ray"], (None, False)),
    (["dedup", "in.jsonl", "-o", "out", "--engine=ray", "--workers", "3", "-q"], (3, True)),
    (["dedup", "in.jsonl", "--workers=4", "--quiet", "-o", "out", "--engine", "ray"], (4, True)),
    (["dedup", "in.jsonl", "-o", "out"], None),
    (["dedup", "in.jsonl", "-o", "out", "--engine", "local"], None),
    (["dedup", "in.jsonl", "-o", "out", "--engine", "ray", "--ray-address", "h:6379"], None),
    (["dedup", "in.jsonl", "-o", "out", "--engine", "ray", "--ray-address=auto"], None),
    (["dedup", "s3://b/in.jsonl", "-o", "out", "--engine", "ray"], None),
    (["dedup", "in.jsonl", "-o", "out", "--engine", "ray", "--workers", "many"], None),
    (["audit", "in.jsonl", "--engine", "ray"], None),
    ([], None)])
def test_the_command_lines_that_start_their_instance_first(monkeypatch, argv, expected):
    import neardup
    from neardup import cli
    calls = []
    monkeypatch.setattr(neardup, "_start_ray", lambda workers, quiet: calls.append((workers, quiet)))
    cli._start_ray(argv)
    assert calls == ([expected] if expected else [])


@pytest.mark.parametrize("env, expected", [({}, {"OPENBLAS_NUM_THREADS": "1"}), ({"OMP_NUM_THREADS": "4"}, {}),
                                           ({"OPENBLAS_NUM_THREADS": "8"}, {})])
def test_the_instance_loads_openblas_with_one_thread_unless_told(monkeypatch, env, expected):
    for name in ray_cluster.BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(ray_cluster, "arena_env", lambda: {"MALLOC_ARENA_MAX": "2"})
    assert ray_cluster.instance_env() == {"MALLOC_ARENA_MAX": "2", **expected}


RUN = r"""
import json, sys
import neardup.engines.ray_cluster as C
taken = []
start_early = C.start_early
def first(*a, **k):  # what the program has imported when it starts its instance
    taken.append("numba" in sys.modules)
    return start_early(*a, **k)
C.start_early = first
early_node = C.early_node
def spy(key):
    taken.append("ready" in C._early)
    node = early_node(key)
    taken.append(node is not None)
    return node
C.early_node = spy
import atexit
atexit.register(lambda: print("EARLY " + json.dumps(taken)))
"""


@pytest.mark.slow
@pytest.mark.ray
def test_the_program_starts_its_instance_early_and_gives_the_local_bytes(tmp_path, jsonl_corpus):
    pytest.importorskip("ray")
    local = tmp_path / "local"
    subprocess.run(neardup_command("dedup", jsonl_corpus, "-o", local, "--quiet", "--on-error", "skip"), env=child_env(), check=True,
                   timeout=300)
    ray_out = tmp_path / "ray"
    r = subprocess.run(neardup_command("dedup", jsonl_corpus, "-o", ray_out, "--engine", "ray", "--workers", "2",
                                       "--quiet", "--on-error", "skip", setup=RUN), env=child_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Token authentication" not in r.stderr  # Ray's notice, held under --quiet as the engine holds it
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("EARLY "))
    # started before numba's import and the engine's start, and taken by the engine
    assert json.loads(line[6:]) == [False, True, True]
    assert_same(local, ray_out)


LEFT = r"""
import os, subprocess, sys, time, psutil
cmd = sys.argv[1:]
p = subprocess.Popen(cmd)
me = psutil.Process()
seen = {}
while p.poll() is None:  # the run's processes, while it runs
    try:
        for c in psutil.Process(p.pid).children(recursive=True):
            seen.setdefault(c.pid, c)
    except psutil.Error:
        pass
    time.sleep(0.02)
deadline = time.time() + 30
alive = [c.pid for c in seen.values()]
while alive and time.time() < deadline:
    alive = [c.pid for c in seen.values() if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    time.sleep(0.1)
print("SEEN", len(seen), "LEFT", alive, "RC", p.returncode)
"""


@pytest.mark.slow
@pytest.mark.ray
def test_a_run_that_fails_before_its_engine_leaves_no_process_behind(tmp_path):
    pytest.importorskip("ray")
    cmd = neardup_command("dedup", tmp_path / "missing.jsonl", "-o", tmp_path / "out", "--engine", "ray",
                          "--workers", "2", "--quiet")
    r = subprocess.run([sys.executable, "-c", LEFT, *map(str, cmd)], env=child_env(), capture_output=True,
                       text=True, timeout=120)
    words = r.stdout.split()
    assert words[0] == "SEEN" and int(words[1]) > 0  # the instance was started
    assert r.stdout.rstrip().endswith("LEFT [] RC 2"), r.stdout + r.stderr
