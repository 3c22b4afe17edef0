"""The one worker process of a run's own Ray instance (:mod:`neardup.engines.ray_runner`): a call
waits for the CPUs it asks for; on the instance a run starts for itself the calls run at once in
one process, on a joined cluster in Ray's workers as before; a run whose one process is killed
while it reads gives the local engine's bytes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

import neardup
from neardup.engines import ray_runner
from neardup.engines.ray_cluster import MARK_ENV
from neardup.engines.ray_runner import Runner

from helpers import child_env, neardup_command


def test_a_call_waits_until_the_cpus_it_asks_for_are_free():
    runner, release, ran = Runner(2), threading.Event(), []
    holders = [threading.Thread(target=runner.run, args=(1, release.wait, 60)) for _ in range(2)]
    for t in holders:
        t.start()
    while runner.free:  # both CPUs taken by the calls of one thread each
        time.sleep(0.01)
    wide = threading.Thread(target=runner.run, args=(2, ran.append, "both CPUs"))
    wide.start()
    wide.join(0.3)
    assert ran == [] and wide.is_alive()
    release.set()
    wide.join(60)
    for t in holders:
        t.join(60)
    assert ran == ["both CPUs"] and runner.free == 2


def test_more_threads_than_cpus_take_every_cpu_and_wait_for_nothing_else():
    runner = Runner(2)
    assert runner.run(8, lambda: runner.free) == 0
    assert runner.free == 2


@pytest.mark.parametrize("env,shuffled,expected", [("", False, True), ("0", False, False), ("", True, False),
                                                   ("1", False, True)])
def test_wanted_unless_shuffled_or_turned_off(monkeypatch, env, shuffled, expected):
    monkeypatch.setenv(ray_runner.ENV, env)
    assert ray_runner.wanted(shuffled) is expected


class FakeRay:
    """What :func:`ray_runner.start` asks of Ray: ``remote(Runner)``, its ``options``, then
    ``remote(*arguments)`` (answered with the arguments)."""

    def remote(self, *args):
        return self if args == (Runner,) else args

    def options(self, **options):
        self.given = options
        return self


def test_the_runner_holds_the_cpus_and_each_call_keeps_its_own_retries():
    fake = FakeRay()
    assert ray_runner.start(fake, 3, 4) == (3,)
    # restarted however often its process dies (no bound shared by the run's calls), each call
    # retried 4 times as a task would be; the node's CPUs held, as many calls at once and one
    # more that holds none (the warm-up)
    assert fake.given == {"num_cpus": 3, "max_concurrency": 4, "max_restarts": -1, "max_task_retries": 4}


def test_the_warm_up_holds_no_cpu_and_runs_while_every_cpu_is_held():
    """The warm-up is a call that asks for no CPU (it kept the second read call waiting when it
    held one), not retried; such a call runs while the CPUs are all held."""
    fake = FakeRay()
    fake.run = fake
    assert ray_runner.warm_up(fake, "warm_worker", print, False) == (0, print, False)
    assert fake.given == {"name": "warm_worker", "max_task_retries": 0}
    runner, release = Runner(2), threading.Event()
    holder = threading.Thread(target=runner.run, args=(2, release.wait, 60))
    holder.start()
    while runner.free:
        time.sleep(0.01)
    try:
        assert runner.run(0, lambda: "warm") == "warm"
    finally:
        release.set()
        holder.join(60)


WITHOUT_PANDAS = r"""
import json, sys
import numpy as np, pyarrow.compute as pc
from neardup.engines.ray_worker import warm_worker
from neardup.kernels.arrays import arrow
warm_worker(False, pandas=sys.argv[1] == "1")
# what Ray's serializer does to a table's string column (the read stage's id rows): a Python int
# subtracted from its offsets, a conversion that imports pandas where it can
offsets = pc.subtract(arrow(np.arange(4, dtype=np.int32)), 1)
print(json.dumps({"pandas": "pandas" in sys.modules, "offsets": offsets.to_pylist(),
                  "read": "neardup.stages.read" in sys.modules}))
"""


@pytest.mark.parametrize("pandas", [False, True])
@pytest.mark.slow
def test_the_runners_warm_up_keeps_pandas_out_of_its_process(pandas):
    """The run's one worker process (``pandas=False``) never imports pandas, which none of its calls
    needs (0.2-0.25 CPU-s in the read stage): not in the warm-up, not when Ray's serializer makes
    pyarrow convert a Python int (the same result); a worker of Ray's own (``pandas=True``) warms
    it as before."""
    pytest.importorskip("pandas")
    out = subprocess.run([sys.executable, "-c", WITHOUT_PANDAS, "1" if pandas else "0"], env=child_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"pandas": pandas, "offsets": [-1, 0, 1, 2],
                                                               "read": True}


@pytest.mark.slow
def test_the_warm_up_imports_numba_through_the_module_each_call_does():
    """Through another module (numba's set-up) while a call imported it through
    neardup.kernels.hashing (:func:`neardup.engines.ray._apply`), the two threads' imports
    deadlocked: the API's run of a DataFrame failed with Python's _DeadlockError in a read call."""
    code = ("import sys\nfirst = []\n"
            "sys.addaudithook(lambda ev, a: ev == 'import' and a[0].partition('.')[0] == 'numba' and not first"
            " and first.append([m for m in sys.modules if m.startswith('neardup.kernels.hashing')]))\n"
            "from neardup.engines.ray_worker import warm_worker\nwarm_worker(False, pandas=False)\nprint(first)")
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["[['neardup.kernels.hashing']]"], out.stdout  # numba's first import: inside it


WITHOUT_PYDANTIC = r"""
import json, os, sys
import ray
from neardup.engines.ray_cluster import MARK_ENV
mark, mode = sys.argv[1], sys.argv[2]
if mark:
    os.environ[MARK_ENV] = str(os.getpid()) if mark == "own" else "1"
if mode == "worker":
    ray._private.worker.global_worker.mode = ray.WORKER_MODE
import neardup.engines.ray_runner  # what the runner's process loads before Ray's serializer is made
import ray._common.pydantic_compat as compat
print(json.dumps(compat.PYDANTIC_INSTALLED))
"""


@pytest.mark.parametrize("mark, mode, kept", [("other", "worker", False), ("own", "worker", True),
                                              ("", "worker", True), ("other", "driver", True)])
@pytest.mark.slow
def test_a_worker_of_the_runs_own_instance_makes_rays_serializer_without_pydantic(mark, mode, kept):
    """A worker of the run's own instance (the driver's mark, not its own id, in its environment;
    Ray's worker mode) has pydantic hidden as the runner's module is loaded, before Ray's
    serializer (``ray._common.pydantic_compat``) imports it (0.06 CPU-s a run); the driver that
    starts the instance (its own id), a joined cluster's worker (no mark) and a process that is
    not a worker keep it."""
    pytest.importorskip("pydantic")
    env = child_env()
    env.pop(MARK_ENV, None)
    out = subprocess.run([sys.executable, "-c", WITHOUT_PYDANTIC, mark, mode], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) is kept


def test_a_split_files_ranges_run_two_at_once_each_with_every_cores_kernel_threads():
    """As the local engine reads them (:func:`neardup.stages.read.read_concurrency` ranges at
    once, each with every core's kernel threads), not with one kernel thread each."""
    from neardup.engines.ray import RayEngine, _task
    assert ray_runner.concurrent_calls(2, 2) == (2, 1)
    assert ray_runner.concurrent_calls(8, 2) == (8, 4)
    assert ray_runner.concurrent_calls(2, 4) == (2, 1)
    engine = RayEngine(2)
    engine.cpus = engine.cpus_per_node = 2
    frame = engine.map(print, range(35))
    assert (frame.threads, frame.share) == (1, 1)  # no runner: a task of one CPU each, as before
    engine._runner = fake = FakeRay()
    fake.run, fake.put = fake, lambda value: "ref"
    engine.ray = fake
    frame = engine.map(print, range(3), concurrent=2)
    assert (frame.threads, frame.share) == (2, 1)
    # each call holds one CPU of the runner and runs with two kernel threads
    assert [call[:4] for call in engine._refs(frame)] == [(1, _task, "ref", 2)] * 3
    frame = engine.map(print, range(35))
    assert (frame.threads, frame.share) == (1, 1)


MEET = r"""
import json, os, sys, time
import psutil, ray
from neardup.engines.ray import RayEngine

def meet(arg):  # returns once both calls have started (or after 60 s): they ran at the same time
    folder, i = arg
    open(os.path.join(folder, str(i)), "w").close()
    deadline = time.time() + 60
    while len(os.listdir(folder)) < 2 and time.time() < deadline:
        time.sleep(0.01)
    import numpy as np, pyarrow.compute as pc
    pc.subtract(np.arange(3), 1)  # a Python int converted by pyarrow (as Ray's serializer of a table does)
    import ray._common.pydantic_compat as compat  # Ray's serializer imported it: pydantic's serializers or none
    return os.getpid(), len(os.listdir(folder)) == 2, "pandas" in sys.modules, compat.PYDANTIC_INSTALLED

address = sys.argv[2] or None
with RayEngine(2, address=address, quiet=True) as engine:
    engine.ray.get(engine._warming)
    out = engine.collect(engine.map(meet, [(sys.argv[1], 0), (sys.argv[1], 1)]))
    workers = [p for p in psutil.Process().children(recursive=True) if p.cmdline()[:1] > [""]
               and p.cmdline()[0].startswith("ray::")]  # the workers of an instance started here
    config = ray._private.state.state.get_system_config()
    nice = sorted({p.nice() for p in workers})
print(json.dumps({"pids": sorted({p for p, _, _, _ in out}), "met": all(m for _, m, _, _ in out),
                  "pandas": any(pd for _, _, pd, _ in out), "pydantic": any(py for _, _, _, py in out),
                  "workers": len(workers),
                  "nice": nice, "niceness": config.get("worker_niceness"),
                  "config": {k: config.get(k) for k in ("prestart_worker_first_driver", "memory_monitor_refresh_ms",
                                                                 "enable_worker_prestart")}}))
"""


def _meet(tmp_path, address: str = "", **env) -> dict:
    folder = tmp_path / "meet"
    folder.mkdir()
    out = subprocess.run([sys.executable, "-c", MEET, str(folder), address], env=child_env(dict(os.environ, **env)),
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.ray
def test_own_instance_runs_calls_at_once_in_one_process(tmp_path):
    res = _meet(tmp_path)
    assert res["met"] and len(res["pids"]) == 1, res
    assert res["workers"] == 1, res  # no idle worker per CPU started beside it (one prestarted: the runner's)
    assert not res["pandas"], res  # its warm-up kept pandas out (engines.ray_worker.without_pandas)
    assert not res["pydantic"], res  # and Ray's serializer without pydantic (engines.ray_worker.without_pydantic)
    # nor Ray's memory monitor, which would kill that process (its calls not retried) on a node
    # whose memory others fill
    assert res["config"] == {"prestart_worker_first_driver": False, "memory_monitor_refresh_ms": 0,
                             "enable_worker_prestart": True}, res
    # at the run's priority, not Ray's nice 15 for workers (the other programs of the machine took
    # the CPUs from it)
    assert res["nice"] == [os.nice(0)] and res["niceness"] == 0, res


@pytest.mark.slow
@pytest.mark.ray
def test_own_instance_with_the_runner_off_runs_a_worker_per_cpu(tmp_path):
    res = _meet(tmp_path, **{ray_runner.ENV: "0"})
    assert res["met"] and len(res["pids"]) == 2 and res["workers"] == 2, res
    assert res["nice"] == [os.nice(0)], res
    assert res["config"] == {"prestart_worker_first_driver": None, "memory_monitor_refresh_ms": None,
                             "enable_worker_prestart": None}, res


@pytest.mark.slow
@pytest.mark.ray
def test_a_joined_cluster_runs_calls_in_its_own_workers(tmp_path, ray_local):
    res = _meet(tmp_path, ray_local)
    assert res["met"] and len(res["pids"]) == 2, res


def _parts(folder, docs, seed, parts):
    """A folder of ``parts`` JSONL files holding a synthetic corpus of ``docs`` documents, dealt in turn."""
    from neardup.testing.synth import generate_corpus
    folder.mkdir()
    texts = generate_corpus(docs, seed=seed).texts
    for i in range(parts):
        (folder / f"p{i}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[i::parts]))
    return folder


@pytest.mark.slow
@pytest.mark.ray
def test_the_one_process_killed_while_it_reads_gives_the_local_bytes(tmp_path):
    from test_ray_engine import assert_same
    d = _parts(tmp_path / "in", 8000, 14, 8)
    neardup.dedup(str(d), output=str(tmp_path / "local"), quiet=True)
    proc = subprocess.Popen(neardup_command("dedup", d, "-o", tmp_path / "ray", "--engine", "ray", "--quiet",
                                            "--workers", "2", "--batch-size", "256"),
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = []
    while proc.poll() is None and not killed:
        for p in psutil.Process(proc.pid).children(recursive=True):
            try:
                if " ".join(p.cmdline()).startswith("ray::read_partition"):
                    p.send_signal(signal.SIGKILL)
                    killed.append(p.pid)
                    break
            except psutil.Error:
                pass
        time.sleep(0.002)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert killed, "the run's process was not killed while it read"
    assert_same(tmp_path / "local", tmp_path / "ray")


@pytest.mark.slow
@pytest.mark.ray
def test_a_resume_that_starts_at_the_write_stage_gives_the_local_bytes(tmp_path):
    """A --resume whose first calls are the write stage's: the runner's fresh process unpickled
    write_kept_partition in several threads at once, and their imports of neardup.stages.write
    met its package's own import of it half-done (ImportError "partially initialized module",
    a traceback, exit 1)."""
    from test_ray_engine import assert_same
    d = _parts(tmp_path / "in", 2000, 5, 4)
    neardup.dedup(str(d), output=str(tmp_path / "local"), quiet=True)
    args = ("dedup", d, "-o", tmp_path / "ray", "--work-dir", tmp_path / "work", "--engine", "ray", "--quiet",
            "--workers", "2")
    first = subprocess.run(neardup_command(*args), env=child_env(), capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    again = subprocess.run(neardup_command(*args, "--resume"), env=child_env(), capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert_same(tmp_path / "local", tmp_path / "ray")


def test_the_drivers_collection_runs_once_a_steps_calls_are_submitted(monkeypatch):
    """Each step's calls are submitted first, then the driver's garbage collected while they run
    (before their results are fetched), not the calls kept waiting for it."""
    from neardup.engines import ray as ray_engine
    events = []

    class Ray(FakeRay):
        def put(self, value):
            return "ref"

        def wait(self, refs, timeout=None):
            return refs, []

        def get(self, ref):
            events.append("result")
            return ref[0]

    fake = Ray()
    fake.run = fake
    remote = fake.remote
    fake.remote = lambda *args: events.append("submitted") or remote(*args)
    monkeypatch.setattr(ray_engine, "release_driver_memory", lambda: events.append("collected"))
    engine = ray_engine.RayEngine(2)
    engine.cpus = engine.cpus_per_node = 2
    engine.ray, engine._runner = fake, fake
    assert engine.collect(engine.map(print, ["a", "b"])) == [1, 1]
    assert events == ["submitted", "submitted", "collected", "result", "result"]
    events.clear()
    engine.persist(engine.map(print, ["c"]))
    assert events == ["submitted", "collected"]


def test_the_raylet_prestarts_one_worker_for_the_runner(monkeypatch):
    """The raylet of the run's own instance starts one worker as it starts (the runner's, which
    then imports Ray while the driver connects), not one per CPU; its agents' commands as before."""
    pytest.importorskip("ray")
    from ray._private import services
    from neardup.engines.ray_cluster import agents_replaced
    started = []
    monkeypatch.setattr(services, "start_ray_process", lambda command, *a, **kw: started.append(command))
    raylet = ["raylet", "--dashboard_agent_command=ray's", "--num_prestart_python_workers=8", "--other=1"]
    with agents_replaced("/tmp/s", "n", (), prestart=1):
        services.start_ray_process(raylet)
        services.start_ray_process(["gcs_server", "--num_prestart_python_workers=8"])  # not the raylet's
    with agents_replaced("/tmp/s", "n", ()):
        services.start_ray_process(raylet)
    assert started == [["raylet", "--dashboard_agent_command=ray's", "--num_prestart_python_workers=1", "--other=1"],
                       ["gcs_server", "--num_prestart_python_workers=8"], raylet]


KEPT = r"""
import sys
from neardup import io as nio
from neardup.config import Config
from neardup.engines.ray import RayEngine
from neardup.io.storage.folder import Folder
from neardup.stages import Run
from neardup.stages.read import ReadStage
from neardup.stages.workdir import WorkDir

def kept(_):  # in the run's one worker process: the kernels' buffers the read left there
    from neardup.stages import read
    return len(read._scratches)

folder, corpus = sys.argv[1], sys.argv[2]
run = Run(config=Config(engine="ray").resolved(), sources=nio.discover([corpus]),
          work=WorkDir(folder + "/work", "kept-test"), output=Folder.of(folder + "/out"), quiet=True)
with RayEngine(2, quiet=True) as engine:
    info = ReadStage().run(run, engine)
    print(info.documents, *engine.collect(engine.map(kept, [None])))
"""


@pytest.mark.slow
@pytest.mark.ray
def test_the_read_leaves_no_buffers_in_the_runners_process(tmp_path):
    """The kernels' buffers that the read's calls kept for one another are let go where those
    calls ran (the runner's process) once the stage has read every block, not held there through
    the later stages (the driver's own release does not reach them)."""
    corpus = tmp_path / "in.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document number {i} of the corpus, word{i % 7}"}) + "\n"
                              for i in range(50)))
    out = subprocess.run([sys.executable, "-c", KEPT, str(tmp_path), str(corpus)], env=child_env(),
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-2:] == ["50", "0"], out.stdout
