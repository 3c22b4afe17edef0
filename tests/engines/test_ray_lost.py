"""Work a Ray cluster lost and could not recompute (a node or the owner of a result gone, after
Ray's retries) stops a run with one line that says to resume, not with a traceback called a bug in
neardup; an exception raised in neardup's own code inside a task stays a bug (its traceback)."""

import pytest

ray = pytest.importorskip("ray")

from neardup.engines.ray_cluster import lost_work, lost_work_message  # noqa: E402


def owner_died():
    return ray.exceptions.OwnerDiedError("ab" * 28, None, "read_partition")


def test_the_lost_object_is_found_through_a_task_error_and_its_causes():
    lost = owner_died()
    wrapped = ray.exceptions.RayTaskError("read_partition", "Traceback ...", lost)
    try:
        try:
            raise wrapped
        except ray.exceptions.RayTaskError as inner:
            raise RuntimeError("Ray Data: a task failed") from inner
    except RuntimeError as outer:
        assert lost_work(ray, outer) is lost
    assert isinstance(lost_work(ray, ray.exceptions.NodeDiedError("node 10.0.0.3 died")), ray.exceptions.NodeDiedError)
    assert isinstance(lost_work(ray, ray.exceptions.WorkerCrashedError()), ray.exceptions.WorkerCrashedError)


def test_a_bug_in_a_task_is_not_lost_work():
    bug = ray.exceptions.RayTaskError("read_partition", "Traceback ...", ValueError("a bug"))
    assert lost_work(ray, bug) is None
    assert lost_work(ray, KeyError("x")) is None
    cycle = ValueError("a")
    cycle.__context__ = ValueError("b")
    cycle.__context__.__context__ = cycle  # a cycle in the chain ends
    assert lost_work(ray, cycle) is None


def test_the_message_is_one_line_and_says_resume():
    msg = lost_work_message("the Ray cluster at 10.0.0.1:6379", owner_died())
    assert "\n" not in msg
    assert msg.startswith("the Ray cluster at 10.0.0.1:6379 lost work it could not recompute (OwnerDiedError: ")
    assert "--resume" in msg
