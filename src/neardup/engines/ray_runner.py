"""The one worker process of a run's own Ray instance on one node: every call of the run in
threads of that process, as the local engine runs them in its own.

Plain Ray tasks of one CPU each run in as many worker processes as the node has CPUs, and each
of them pays Ray's start and neardup's imports (~1.4 CPU-s a worker on 2 CPUs, ray7's profile of
2,000 documents: 4.4 CPU-s on Ray against 0.8 locally). On the instance a run starts for itself
(no other job uses it) and only one node, the run's calls go instead to one actor that holds
every CPU of the node and runs up to that many calls at once in its threads, each with the
kernel threads it asks for (:class:`Runner`), as the local engine reads a split file's ranges in
its threads. Measured on 2 loaded CPUs (bench/results/ray8_runner_2k_perf.json, all processes
of the run, medians of 5): 2,000 documents 3.79 -> 3.11 CPU-s (page faults 145k -> 111k), the
workers' memory one process of ~950 MB at 1M documents instead of two of ~820 MB. A joined
cluster is the user's: its workers are used as before. The
actor is restarted by Ray if its process dies, and the calls it was running are retried (each
call is a pure function of its input and of the work directory), each as often as a task would be.
"""

from __future__ import annotations

import os
import threading

from .ray_worker import without_pydantic

ENV = "NEARDUP_RAY_RUNNER"

# loaded by the runner's process (to make the actor) before Ray's serializer is made there
without_pydantic()


def wanted(shuffles_on_one_node: bool) -> bool:
    """Whether a run's own instance of one node runs its calls in one :class:`Runner`: unless the
    run's steps are shuffled there (Ray Data, which schedules its own tasks on the node's CPUs:
    ``NEARDUP_RAY_ONE_CALL=0``) or ``NEARDUP_RAY_RUNNER=0`` (a worker per CPU, as before)."""
    return not shuffles_on_one_node and os.environ.get(ENV, "").strip() != "0"


def concurrent_calls(cpus: int, concurrent: int) -> tuple:
    """(kernel threads, CPUs held) of each call of a map whose calls the local engine runs
    ``concurrent`` at once, each with every core's kernel threads (the ranges of a split file:
    each range's parsing is one thread, :func:`neardup.stages.read.read_concurrency`): run so in
    the one worker process too, ``concurrent`` calls at once, each holding its share of the CPUs
    and every core's kernel threads (which the other call's parsing leaves idle), not one kernel
    thread each."""
    return cpus, max(1, cpus // max(1, concurrent))


class Runner:
    """An actor (``max_concurrency``: the node's CPUs, and one more for a call that holds none:
    :func:`warm_up`) that runs ``fn(*args)`` for each call of :meth:`run`, at most ``cpus``
    CPUs' worth at once: a call that asks for ``threads`` waits until that many are free (calls
    of two steps in flight at once, as the write stage's, share the CPUs as Ray's scheduler would
    share them between tasks)."""

    def __init__(self, cpus: int):
        # the stages' package imported whole before any call: the calls' functions are unpickled
        # in the actor's threads at once, and two of them importing neardup.stages.write (a resume
        # that starts at the write stage) met its package's import of it half-done
        from .. import stages  # noqa: F401
        self.cpus = self.free = cpus
        self.changed = threading.Condition()

    def run(self, threads: int, fn, *args):
        """``fn(*args)`` once ``threads`` of the CPUs are free (held while it runs)."""
        threads = min(threads, self.cpus)
        with self.changed:
            self.changed.wait_for(lambda: self.free >= threads)
            self.free -= threads
        try:
            return fn(*args)
        finally:
            with self.changed:
                self.free += threads
                self.changed.notify_all()


def start(ray, cpus: int, retries: int):
    """The run's :class:`Runner`, holding the ``cpus`` of the node (nothing else of Ray's is
    scheduled there meanwhile). Restarted whenever its process dies, and each call it was running
    retried up to ``retries`` times: a call's retries are its own, as a plain task's are (a bound
    on the restarts would be shared by every call of the run, however long)."""
    actor = ray.remote(Runner).options(num_cpus=cpus, max_concurrency=cpus + 1, max_restarts=-1,
                                       max_task_retries=retries)
    return actor.remote(cpus)


def warm_up(runner, name: str, fn, *args):
    """``fn(*args)`` in the runner's process as a call that holds none of its CPUs (it runs in the
    one thread of the actor beside the CPUs' own), not retried: the worker's warm-up (imports,
    numba's set-up), which the first calls would otherwise wait for. Holding a CPU, it kept the
    second read call of a run waiting until it ended (Ray's timeline of a 100k run on 2 loaded
    CPUs: the second ``read_partition`` started when ``warm_worker`` ended, 6.4 s after the first)."""
    return runner.run.options(name=name, max_task_retries=0).remote(0, fn, *args)
