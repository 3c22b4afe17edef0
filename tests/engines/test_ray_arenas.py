"""glibc's malloc arenas of the local Ray instance's workers (:func:`neardup.engines.ray_cluster.arena_env`):
on a node whose glibc bound (8 arenas a core) is below a worker's threads, the raylet, and so every
worker, gets ``MALLOC_ARENA_MAX=2`` (each read task's block buffers are then the last task's, not
new pages), unless the environment sets it; on a larger node nothing is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from neardup.engines import ray_cluster

from helpers import child_env


@pytest.mark.parametrize("cores, user, expected", [
    (2, None, {"MALLOC_ARENA_MAX": "2"}),   # 16 arenas: below a worker's threads
    (3, None, {"MALLOC_ARENA_MAX": "2"}),
    (4, None, {}),                          # 32 arenas: enough for every thread
    (64, None, {}),
    (2, "8", {}),                           # the user's setting stands (the raylet inherits it)
])
def test_arena_env_small_nodes_only_and_never_over_the_users(monkeypatch, cores, user, expected):
    monkeypatch.setattr(ray_cluster.os, "sched_getaffinity", lambda pid: set(range(cores)))
    if user is None:
        monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    else:
        monkeypatch.setenv("MALLOC_ARENA_MAX", user)
    assert ray_cluster.arena_env() == expected


PROBE = r"""
import json, sys
from neardup.engines import ray_cluster
from neardup.engines.ray import RayEngine
ray_cluster.WORKER_THREADS = int(sys.argv[1])  # any node small (a huge count) or none (0)

def arenas(_):
    import os
    return os.environ.get("MALLOC_ARENA_MAX")

with RayEngine(2, quiet=True) as engine:
    print(json.dumps(engine.collect(engine.map(arenas, [0, 1]))))
"""


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.parametrize("threads, user, expected", [(10 ** 6, None, "2"), (0, None, None), (10 ** 6, "5", "5")])
def test_workers_of_the_own_instance_get_the_arena_bound(threads, user, expected):
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if user is not None:
        env["MALLOC_ARENA_MAX"] = user
    out = subprocess.run([sys.executable, "-c", PROBE, str(threads)], env=child_env(env), capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [expected, expected]
