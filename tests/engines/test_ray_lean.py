"""The local Ray instance a run starts for itself: without the dashboard's head, the autoscaler's
monitor and (under ``--quiet``) the log monitor, which a run never uses (``ray.init`` starts
them, and waits for the dashboard's head before it starts the raylet; ``ray.shutdown`` waits 1 s
for the monitor to exit); with the log monitor when the run is not quiet (the workers' output is
shown); ``NEARDUP_RAY_LEAN=0`` starts it with ``ray.init`` as before. Each way, the engine leaves
no process of the instance behind, and with token authentication on (Ray's default for a new
instance) or off (``RAY_AUTH_MODE=disabled``) a run gives the local engine's bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import neardup

from helpers import child_env
from test_ray_engine import assert_same, jsonl_corpus  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.ray]

PROBE = r"""
import json, sys, psutil
from neardup.engines.ray import RayEngine
me = psutil.Process()
store_env = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
def setting(_):
    import os
    return os.environ.get("NEARDUP_TEST_STORE_SETTING")
with RayEngine(2, quiet=sys.argv[1] == "quiet", store_env=store_env) as engine:
    assert engine.collect(engine.map(abs, [-1, -2])) == [1, 2]
    seen = engine.collect(engine.map(setting, [0, 1]))
    import ray
    session = ray._private.worker._global_node.get_session_dir_path()
    started = [p for p in me.children(recursive=True)]
    names = [" ".join(p.cmdline()) for p in started]
    scripts = [next((a for a in p.cmdline()[:6] if a.endswith(".py")), "") for p in started]  # what each one runs
left = [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
import os
def holds(path):
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:  # a socket
        return False
    return any(v.encode() in data for v in store_env.values())
stored = [os.path.join(d, f) for d, _, fs in os.walk(session) for f in fs
          if store_env and os.path.isfile(os.path.join(d, f)) and holds(os.path.join(d, f))]
print(json.dumps({"names": names, "scripts": scripts, "left": left, "aiohttp": "aiohttp" in sys.modules,
                  "seen": seen, "stored": stored}))
"""

HELPERS = {"dashboard head": "dashboard/dashboard.py", "monitor": "autoscaler/_private/monitor.py",
           "log monitor": "log_monitor.py"}
# the script each runs, or the name it gives itself once started
AGENTS = {"dashboard agent": ("dashboard/agent.py", "ray::DashboardAgent"),
          "runtime-env agent": ("runtime_env/agent/main.py", "ray::RuntimeEnvAgent"),
          "stand-in": ("engines/ray_agent.py", "-")}


def _started(quiet: str, *args: str, **env) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, quiet, *args], env=child_env(dict(os.environ, **env)),
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["helpers"] = {k for k, v in HELPERS.items() if any(v in n for n in res["names"])}
    res["agents"] = sorted(k for k, (script, name) in AGENTS.items() for n, s in zip(res["names"], res["scripts"])
                           if s.endswith(script) or n.startswith(name))
    return res


def test_own_instance_starts_none_of_the_helpers_a_quiet_run_does_not_use():
    res = _started("quiet")
    assert res["helpers"] == set(), res["names"]
    assert any("raylet" in n for n in res["names"]) and any("gcs_server" in n for n in res["names"])
    assert res["left"] == []


def test_own_instance_runs_stand_ins_for_the_raylets_agents():
    """The raylet registers its node only once its two agents have written their ports (each
    imports Ray first: ~1.5 s on 2 busy CPUs); the run's own instance gives it ray_agent.py
    instead, twice: tasks run, and nothing is left behind."""
    res = _started("quiet")
    assert res["agents"] == ["stand-in", "stand-in"], res["names"]
    assert res["left"] == []
    # nor does the driver check the dashboard's dependencies for them (it imports aiohttp)
    assert not res["aiohttp"]


def test_own_instance_hands_the_store_settings_by_inheritance_and_stores_them_nowhere():
    """A run's own instance gets the object stores' settings (AWS_SECRET_ACCESS_KEY, ...) in the
    environment its processes inherit, not as a runtime environment, whose agent wrote every
    variable, the secret included, into the session's runtime_env_agent.log (mode 644): the
    workers see the settings, the agents are stand-ins, no file of the session holds the value."""
    res = _started("quiet", json.dumps({"NEARDUP_TEST_STORE_SETTING": "s3cret-Value-1234"}))
    assert res["seen"] == ["s3cret-Value-1234"] * 2
    assert res["agents"] == ["stand-in", "stand-in"], res["names"]
    assert res["stored"] == [], res["stored"]
    assert res["left"] == []


def test_rays_own_agents_on_request():
    res = _started("quiet", NEARDUP_RAY_AGENTS="ray")
    assert res["agents"] == ["dashboard agent", "runtime-env agent"], res["names"]
    assert res["left"] == []
    assert res["aiohttp"]  # Ray's check of the dashboard's dependencies, which its agent's flags need


def test_own_instance_of_a_run_that_is_not_quiet_keeps_the_log_monitor():
    res = _started("loud")
    assert res["helpers"] == {"log monitor"}, res["names"]
    assert res["left"] == []


def test_lean_off_starts_the_instance_with_ray_init():
    res = _started("quiet", NEARDUP_RAY_LEAN="0")
    assert res["helpers"] == {"dashboard head", "monitor", "log monitor"}, res["names"]
    assert res["left"] == []


@pytest.mark.parametrize("auth", ["token", "disabled"])
def test_own_instance_with_and_without_token_auth_gives_the_local_bytes(tmp_path, jsonl_corpus, auth):
    neardup.dedup(str(jsonl_corpus), output=str(tmp_path / "local"), engine="local", quiet=True, workers=2,
                  on_error="skip")
    env = child_env(dict(os.environ, RAY_AUTH_MODE=auth))
    code = ("import sys, neardup; neardup.dedup(sys.argv[1], output=sys.argv[2], engine='ray', quiet=True, "
            "workers=2, on_error='skip')")
    out = subprocess.run([sys.executable, "-c", code, str(jsonl_corpus), str(tmp_path / "ray")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_same(tmp_path / "local", tmp_path / "ray")


KEPT = r"""
import json, os, time
import ray
from neardup.engines.ray import RayEngine

def pid_after(seconds):
    time.sleep(seconds)
    return os.getpid()

with RayEngine(2, quiet=True) as engine:
    config = ray._private.state.state.get_system_config()
    first = engine.collect(engine.map(pid_after, [0.5, 0.5]))
    then = []
    for _ in range(2):
        engine.collect(engine.map(pid_after, [3.0]))  # one call, both CPUs: the other worker idles
        then += engine.collect(engine.map(pid_after, [0.5, 0.5]))
print(json.dumps({"first": first, "then": then, "config": config}))
"""


def test_own_instance_keeps_its_idle_workers():
    """Ray kills a worker idle for a second (when it does depends on its timing: here, while a
    call with both CPUs runs on the other worker) and starts new ones for the next tasks, each
    importing Ray and neardup again (2 of the 4 workers of a 1M run on 2 CPUs); the run's own
    instance keeps its workers: the setting reaches the cluster, and no worker is replaced."""
    out = subprocess.run([sys.executable, "-c", KEPT], env=child_env(), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["config"].get("kill_idle_workers_interval_ms") == 0, res["config"]
    # two CPUs, two workers at most unless one was replaced (the first two calls may also have
    # run on one worker, started first: a set of the first calls' workers alone is not the bound)
    assert len(set(res["first"] + res["then"])) <= 2, res
