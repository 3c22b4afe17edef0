"""Joining a Ray cluster started the usual way, and leaving nothing behind.

A cluster without authentication (three raylets of ``ray.cluster_utils.Cluster``) is joined as
one whether a token file exists on the driver's machine or not (in token mode the driver refused
its workers' calls back: the run hung, silently under --quiet); a run whose tasks cannot be
scheduled any more (the nodes with CPUs removed mid-run) stops with one line within its bound
(``NEARDUP_RAY_STALL_SECONDS``) and shows Ray's warnings it held back. A head started with ``ray start --head`` (token authentication on, as Ray 2.59+ does where a
token exists) is joined with ``--ray-address`` whether the token is found where Ray keeps it or
not: found, the run gives the local bytes; missing or wrong, one line says what to set, at once
(Ray itself retries for 20 s and says only "Failed to connect"). A run terminated with SIGTERM
stops at the next batch, exits 143 and stops the local Ray instance it started (Ray's own
handler would "drain" for 30 s while the run went on) and shows Ray's warnings that it held back;
one killed with SIGKILL leaves no process of it behind. Successful runs print none of Ray's
misleading warnings.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import neardup

from helpers import child_env, neardup_command, run_process
from test_ray_engine import assert_same

import psutil  # noqa: E402  test dependencies: a missing one fails the suite, it is not skipped

pytestmark = [pytest.mark.slow, pytest.mark.ray]

RAY = str(Path(sys.executable).parent / "ray")
MISLEADING = ("does not have any available CPUs", "Progress bars disabled",
              "Token authentication is enabled for this Ray cluster")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _corpus(path: Path, n: int) -> Path:
    from neardup.testing.synth import generate_corpus, write_jsonl
    c = generate_corpus(n, seed=3)
    write_jsonl(path, c[0] if isinstance(c, tuple) else c.texts)
    return path


@pytest.fixture(scope="module")
def token_head(tmp_path_factory):
    """A one-node cluster started with ``ray start --head --block`` and token authentication, its
    token in ``HOME/.ray/auth_token`` of a home of its own; yields (address, home)."""
    home = tmp_path_factory.mktemp("home")
    env = dict(os.environ, HOME=str(home), RAY_AUTH_MODE="token", RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0")
    env.pop("RAY_AUTH_TOKEN", None), env.pop("RAY_AUTH_TOKEN_PATH", None)
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, capture_output=True, check=True, timeout=60)
    assert (home / ".ray" / "auth_token").is_file()
    port = _free_port()
    head = subprocess.Popen([RAY, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
                             "--include-dashboard=false", "--disable-usage-stats"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    time.sleep(3)  # the raylet registers after the GCS answers
    yield address, home
    head.terminate()
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        head.kill()


def _env(home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return dict(env, HOME=str(home), **extra)


def test_token_cluster_is_joined_with_the_token_ray_keeps(token_head, tmp_path):
    address, home = token_head
    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus.jsonl"
    local = tmp_path / "local"
    neardup.dedup(str(corpus), output=str(local))
    r = run_process("dedup", corpus, "-o", tmp_path / "joined", "--engine", "ray", "--ray-address", address,
                    env=_env(home), timeout=600)
    assert r.returncode == 0, r.stderr
    assert_same(local, tmp_path / "joined")
    assert "Traceback" not in r.stderr
    assert not [m for m in MISLEADING if m in r.stderr], r.stderr


def test_missing_or_wrong_token_is_one_line_that_says_what_to_set(token_head, tmp_path):
    address, home = token_head
    corpus = Path(__file__).resolve().parents[2] / "examples" / "corpus.jsonl"
    token = (home / ".ray" / "auth_token").read_text().strip()
    empty = tmp_path / "empty-home"
    empty.mkdir()
    wrong = "0" * len(token)
    for env, says in ((_env(empty), "needs a token and this driver has none"),
                      (_env(empty, RAY_AUTH_TOKEN=wrong), "refused this driver's token")):
        r = run_process("dedup", corpus, "-o", tmp_path / "out", "--engine", "ray", "--ray-address", address,
                        env=env, timeout=120)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and "RAY_AUTH_TOKEN" in lines[0], r.stderr
        assert token not in r.stderr and wrong not in r.stderr
        assert not (tmp_path / "out" / "stats.json").exists()


CLUSTER = r"""
import sys
from ray.cluster_utils import Cluster
NODE = dict(num_cpus=1, object_store_memory=80 << 20)
c = Cluster(initialize_head=True, connect=False, head_node_args=dict(NODE, num_cpus=0, include_dashboard=False))
def add():
    for _ in range(2):
        c.add_node(**NODE)
    c.wait_for_nodes()
add()
print(c.address, flush=True)
for line in sys.stdin:
    if line.strip() == "remove":
        for node in list(c.worker_nodes):
            c.remove_node(node)
    elif line.strip() == "add":
        add()
    print("done", flush=True)
c.shutdown()
"""


class OpenCluster:
    """A cluster without authentication in a process of its own (a head without CPUs, two nodes
    of one CPU): ``remove()`` removes the nodes with CPUs, ``add()`` adds two again."""

    def __init__(self, home: Path):
        env = dict(_env(home), RAY_AUTH_MODE="disabled")
        self.proc = subprocess.Popen([sys.executable, "-c", CLUSTER], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.proc.stdout.readline().strip()
        assert self.address, "the cluster did not start"

    def _say(self, what: str) -> None:
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"

    def remove(self) -> None:
        self._say("remove")

    def add(self) -> None:
        self._say("add")

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def open_cluster(tmp_path_factory):
    c = OpenCluster(tmp_path_factory.mktemp("cluster-home"))
    yield c
    c.close()


@pytest.fixture(scope="module")
def corpus_6k(tmp_path_factory):
    """6,000 documents and their output under the local engine."""
    folder = tmp_path_factory.mktemp("c6k")
    corpus = _corpus(folder / "c.jsonl", 6000)
    neardup.dedup(str(corpus), output=str(folder / "local"), quiet=True)
    return corpus, folder / "local"


def test_open_cluster_is_joined_with_or_without_a_token_file(open_cluster, corpus_6k, tmp_path):
    """Guards join_with_token's probe without a token: turning token mode on wherever a token
    file exists (the code before) made this run hang (the driver refused its workers' calls)."""
    corpus, local = corpus_6k
    empty, with_token = tmp_path / "empty", tmp_path / "token"
    empty.mkdir()
    (with_token / ".ray").mkdir(parents=True)
    (with_token / ".ray" / "auth_token").write_text("b" * 64)
    for home in (with_token, empty):
        out = tmp_path / f"out-{home.name}"
        r = run_process("dedup", corpus, "-o", out, "--engine", "ray", "--ray-address", open_cluster.address,
                        "--quiet", env=_env(home, NEARDUP_RAY_STALL_SECONDS="120"), timeout=400)
        assert r.returncode == 0, (home.name, r.stderr[-3000:])
        assert r.stderr == "", r.stderr[-3000:]
        assert_same(local, out)


def test_a_run_the_cluster_cannot_schedule_stops_with_one_line(open_cluster, corpus_6k, tmp_path):
    """The nodes with CPUs removed once the run has joined: its tasks can never be scheduled.
    Before the stall watch the run waited forever (silently under --quiet); now it stops within
    NEARDUP_RAY_STALL_SECONDS of an idle cluster, in one line that says what is missing (a
    failed run shows the warnings of Ray's it held back first: test_ray_held; this run makes
    none since its calls are plain tasks, not Ray Data's, whose "Progress bars disabled" was)."""
    corpus, _ = corpus_6k
    work, bound = tmp_path / "work", 10
    cmd = neardup_command("dedup", corpus, "-o", tmp_path / "out", "--work-dir", work, "--engine", "ray",
                          "--ray-address", open_cluster.address, "--quiet")
    proc = subprocess.Popen(cmd, env=child_env(_env(tmp_path, NEARDUP_RAY_STALL_SECONDS=str(bound))),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and not (work / "read").is_dir():
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        open_cluster.remove()
        removed = time.time()
        _, err = proc.communicate(timeout=bound + 120)
        took = time.time() - removed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        open_cluster.add()
    assert proc.returncode == 2, err[-3000:]
    assert took < bound + 60, took
    assert "Traceback" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("neardup:")]
    assert errors == [err.strip().splitlines()[-1]], err[-3000:]
    assert f"the Ray cluster at {open_cluster.address} ran none of neardup's tasks" in errors[0]
    assert "offers 0 CPUs" in errors[0] and "NEARDUP_RAY_STALL_SECONDS" in errors[0], errors[0]
    assert not (tmp_path / "out" / "stats.json").exists()


@pytest.fixture(scope="module")
def corpus_20k(tmp_path_factory):
    """20,000 documents: a run long enough to be stopped while it runs (made once, read only)."""
    return _corpus(tmp_path_factory.mktemp("c20k") / "c.jsonl", 20000)


def test_sigterm_stops_the_run_and_the_ray_it_started(tmp_path, corpus_20k):
    corpus = corpus_20k
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("a" * 64)  # a token exists: Ray starts with authentication on
    work = tmp_path / "work"
    cmd = neardup_command("dedup", corpus, "-o", tmp_path / "out", "--work-dir", work, "--engine", "ray",
                          "--workers", "2", "--batch-size", "500")
    proc = subprocess.Popen(cmd, env=child_env(_env(home)), stderr=subprocess.PIPE, text=True)
    driver = psutil.Process(proc.pid)
    deadline = time.time() + 240
    started = []
    while time.time() < deadline and proc.poll() is None:
        started = [p for p in driver.children(recursive=True) if "raylet" in " ".join(_cmdline(p))]
        if started and (work / "read").is_dir() and any((work / "read").iterdir()):
            break
        time.sleep(0.2)
    assert started, "the run never started its Ray instance"
    ours = driver.children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal arrived")
    assert proc.returncode == 143, err
    assert "terminated" in err and "--resume" in err and "Traceback" not in err, err
    # an interrupted run shows the warnings held back (here the notice that the local instance has
    # token authentication on), before the last line
    assert "Token authentication is enabled for this Ray cluster" in err, err
    assert err.strip().splitlines()[-1].startswith("neardup: terminated"), err
    deadline = time.time() + 30
    while time.time() < deadline and [p for p in ours if _alive(p)]:
        time.sleep(0.5)
    assert not [p for p in ours if _alive(p)], [" ".join(_cmdline(p)[1:3])[-120:] for p in ours if _alive(p)]
    assert not (tmp_path / "out" / "stats.json").exists()


def test_kill_9_of_the_driver_leaves_no_ray_process_behind(tmp_path, corpus_20k):
    """Without the watchdog, the dashboard and runtime-env agents of the instance outlive a driver
    killed with SIGKILL by 30-60 s (Ray's agents: the run's own stand-ins for them are checked
    the same way, with the rest of the instance)."""
    corpus = corpus_20k
    cmd = neardup_command("dedup", corpus, "-o", tmp_path / "out", "--engine", "ray", "--workers", "2")
    proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    driver = psutil.Process(proc.pid)
    deadline = time.time() + 240
    ours = []
    while time.time() < deadline and proc.poll() is None:
        ours = [p for p in driver.children(recursive=True) if _agent(p)]
        if len(ours) >= 2:
            break
        time.sleep(0.2)
    assert len(ours) >= 2, "the run never started its Ray instance's agents"
    time.sleep(1)  # the watchdog notes them twice a second
    ours = driver.children(recursive=True)
    proc.kill()
    proc.wait(timeout=60)
    deadline = time.time() + 15
    while time.time() < deadline and [p for p in ours if _alive(p)]:
        time.sleep(0.5)
    assert not [p for p in ours if _alive(p)], [" ".join(_cmdline(p)[1:3])[-120:] for p in ours if _alive(p)]


def _agent(p) -> bool:
    """One of the raylet's two agents: Ray's (named ``ray::...Agent`` once started) or the run's
    stand-in (:mod:`neardup.engines.ray_agent`)."""
    args = _cmdline(p)
    return "Agent" in " ".join(args) or any(a.endswith("ray_agent.py") for a in args[:6])


def _cmdline(p) -> list:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


SLEEPER = [sys.executable, "-c", "import time, sys; time.sleep(120)"]


def _watched_driver():
    """A stand-in driver (a sleeping process) and the watchdog of its instance, started before the
    processes a test makes next (the watchdog's start time comes before theirs)."""
    from neardup.engines import ray_cluster
    driver = subprocess.Popen(SLEEPER)
    watchdog = subprocess.Popen([sys.executable, "-c", ray_cluster.WATCHDOG, str(driver.pid)], stdin=subprocess.PIPE)
    time.sleep(0.5)
    return driver, watchdog


def _driver_killed(driver, watchdog, orphan) -> None:
    """The driver killed with SIGKILL, the watchdog done with what it kills, ``orphan`` among it."""
    driver.kill()
    driver.wait()
    watchdog.stdin.close()
    watchdog.wait(timeout=30)
    assert orphan.wait(timeout=10) == -signal.SIGKILL


def _stopped(*procs) -> None:
    """The test's processes gone, whatever the watchdog did."""
    for p in procs:
        p.kill()
        p.wait()


def test_the_watchdog_kills_an_orphan_of_the_instance_and_nothing_else(tmp_path):
    """A worker the raylet starts in the last moments before the driver dies is not yet noted as
    the driver's descendant, and is orphaned: the final sweep finds it by the session its arguments
    name (the session Ray names after the driver's process id), and leaves alone a process that
    names another driver's session."""
    driver, watchdog = _watched_driver()
    stamp = "/tmp/ray/session_2026-12-02_06-40-09_877036_"
    orphan = subprocess.Popen(SLEEPER + [f"--session-dir={stamp}{driver.pid}"], start_new_session=True)
    other = subprocess.Popen(SLEEPER + [f"--session-dir={stamp}{driver.pid}1"], start_new_session=True)
    try:
        time.sleep(0.5)
        _driver_killed(driver, watchdog, orphan)
        assert other.poll() is None, "a process of another session was killed"
    finally:
        _stopped(driver, orphan, other)


def test_the_watchdog_kills_what_carries_the_drivers_mark_and_nothing_else(tmp_path):
    """A process of the instance that renamed itself (Ray's workers and agents: ``ray::...``, no
    session in their arguments) and was orphaned is found by the driver's mark in its environment
    (:class:`~neardup.engines.ray_cluster.instance_marked`); one with another driver's mark, or
    with none, is left alone."""
    from neardup.engines import ray_cluster
    driver, watchdog = _watched_driver()

    def started(mark):
        env = dict(os.environ, **({ray_cluster.MARK_ENV: mark} if mark else {}))
        return subprocess.Popen(SLEEPER, env=env, start_new_session=True)

    orphan, other, unmarked = started(str(driver.pid)), started(f"{driver.pid}1"), started(None)
    try:
        _driver_killed(driver, watchdog, orphan)
        assert other.poll() is None and unmarked.poll() is None, "a process without the driver's mark was killed"
    finally:
        _stopped(driver, orphan, other, unmarked)


def test_the_watchdog_kills_a_marked_process_whose_environment_starts_blanked(tmp_path):
    """A process that renamed itself with a title longer than its arguments (Ray's ``ray::RuntimeEnvAgent``,
    kept for a run with a runtime environment, AWS_* set) blanks the start of its environment
    block: psutil's environ() then reads nothing, and the agent outlived a driver killed with
    SIGKILL (here: the first entry zeroed in place, as setproctitle does)."""
    from neardup.engines import ray_cluster
    blanked = [sys.executable, "-c",
               "import ctypes, time\n"
               "env = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), 'environ')\n"
               "first = ctypes.string_at(env[0])\n"
               "ctypes.memset(env[0], 0, len(first))\n"
               "print(first[:6].decode(), flush=True)\n"
               "time.sleep(120)\n"]
    driver, watchdog = _watched_driver()
    env = {"AAAAAA": "x" * 64, **os.environ, ray_cluster.MARK_ENV: str(driver.pid)}
    orphan = subprocess.Popen(blanked, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert orphan.stdout.readline().strip() == "AAAAAA"  # its first entry, now zeroed
        import psutil
        assert ray_cluster.MARK_ENV not in psutil.Process(orphan.pid).environ()
        _driver_killed(driver, watchdog, orphan)
    finally:
        _stopped(driver, orphan)


def test_the_watchdog_kills_an_orphan_that_holds_a_file_of_the_session_open(tmp_path):
    """An agent whose new title blanked its whole environment block (the driver's mark with it)
    and whose arguments name no session is still found by its log files, open in the session's
    folder (Ray names it after the driver's process id); one holding another session's is left alone."""
    from neardup.engines import ray_cluster
    holder = [sys.executable, "-c", "import os, time; f = open(os.environ['LOG'], 'w'); print('open', flush=True); "
              "time.sleep(120)"]  # the file's name in no argument
    driver, watchdog = _watched_driver()
    env = {k: v for k, v in os.environ.items() if k != ray_cluster.MARK_ENV}
    procs = []
    for pid in (driver.pid, f"{driver.pid}1"):
        logs = tmp_path / f"session_2026-12-02_06-40-09_877036_{pid}" / "logs"
        logs.mkdir(parents=True)
        procs.append(subprocess.Popen(holder, env=dict(env, LOG=str(logs / "runtime_env_agent.log")),
                                      stdout=subprocess.PIPE, text=True, start_new_session=True))
    orphan, other = procs
    try:
        assert orphan.stdout.readline().strip() == "open" and other.stdout.readline().strip() == "open"
        _driver_killed(driver, watchdog, orphan)
        assert other.poll() is None, "a process of another session was killed"
    finally:
        _stopped(driver, orphan, other)


def test_the_instance_is_marked_only_while_it_starts(monkeypatch):
    """The driver's mark is in the environment while the instance starts, as it was afterwards."""
    from neardup.engines import ray_cluster
    monkeypatch.delenv(ray_cluster.MARK_ENV, raising=False)
    with ray_cluster.instance_marked():
        assert os.environ[ray_cluster.MARK_ENV] == str(os.getpid())
    assert ray_cluster.MARK_ENV not in os.environ
    monkeypatch.setenv(ray_cluster.MARK_ENV, "7")
    with ray_cluster.instance_marked():
        pass
    assert os.environ[ray_cluster.MARK_ENV] == "7"


def _neardup_copy(tmp_path):
    """A folder holding a copy of this neardup (its sources), for a test to change and put first on
    the workers' PYTHONPATH."""
    import shutil
    other = tmp_path / "other"
    shutil.copytree(Path(neardup.__file__).parent, other / "neardup", ignore=shutil.ignore_patterns("__pycache__"))
    return other


def _run_on_workers_with(tmp_path, pythonpath):
    """``neardup dedup`` of a small corpus on a Ray instance the calling process started, whose
    workers have ``pythonpath`` first on their PYTHONPATH: (the finished process, its
    ``neardup: error:`` lines)."""
    corpus = _corpus(tmp_path / "c.jsonl", 400)
    code = ("import sys, ray; ray.init(address='local', num_cpus=2, include_dashboard=False, log_to_driver=False, "
            f"runtime_env={{'env_vars': {{'PYTHONPATH': {str(pythonpath)!r}}}}}); "
            "from neardup.cli import main; sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "dedup", str(corpus), "-o", str(tmp_path / "out"),
                        "--engine", "ray", "--quiet"], capture_output=True, text=True, env=child_env(), timeout=300)
    return r, [ln for ln in r.stderr.splitlines() if ln.startswith("neardup: error:")]


def test_workers_with_another_neardup_are_named_in_one_line(tmp_path):
    """A cluster whose workers import another neardup than the driver (here: a copy of this one
    without the read stage's task function, put first on the workers' PYTHONPATH) stops the run
    with one line that says so and names both, not with "a bug in neardup" and a traceback. (The
    read stage's, so that the copy fails before it compiles its kernels: it has no cache.)"""
    other = _neardup_copy(tmp_path)
    read = other / "neardup" / "stages" / "read.py"
    read.write_text(read.read_text().replace("def read_partition(", "def read_partition_gone("))
    r, lines = _run_on_workers_with(tmp_path, other)
    assert r.returncode != 0
    assert len(lines) == 1 and "another neardup than this driver" in lines[0], r.stderr[-3000:]
    assert str(other) in lines[0] and str(Path(neardup.__file__).parent) in lines[0]
    assert "bug in neardup" not in r.stderr  # Ray's own log lines held during the run are shown (it failed)


def test_workers_with_another_neardup_that_works_are_refused_before_any_work(tmp_path):
    """Workers that import a neardup other than the driver's but able to run its tasks (here: a
    copy with one comment added) ran the run to the end and exit 0, their bytes perhaps not the
    driver's; the probes' answers are now checked before any work: one line naming both, exit 2."""
    other = _neardup_copy(tmp_path)
    errors = other / "neardup" / "errors.py"
    errors.write_text(errors.read_text() + "# another neardup\n")
    r, lines = _run_on_workers_with(tmp_path, other)
    assert r.returncode == 2, r.stderr[-3000:]
    assert len(lines) == 1 and "another neardup than this driver" in lines[0], r.stderr[-3000:]
    assert str(other) in lines[0] and not (tmp_path / "out" / "stats.json").exists()


def test_workers_without_neardup_are_told_in_one_line(tmp_path):
    """A cluster whose workers cannot import neardup at all (here: a neardup on their PYTHONPATH
    that raises what a missing one raises) stops the run with one line that says so, exit 2, not
    with "a bug in neardup" and a traceback (the probes failed too, so nothing was said)."""
    stub = tmp_path / "none" / "neardup"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'neardup'\", name='neardup')\n")
    r, lines = _run_on_workers_with(tmp_path, stub.parent)
    assert r.returncode == 2, r.stderr[-3000:]
    assert len(lines) == 1 and "workers cannot import neardup" in lines[0], r.stderr[-3000:]
    assert "bug in neardup" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "stats.json").exists()
