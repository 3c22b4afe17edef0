"""The read stage's prefetch thread (:func:`neardup.stages.read.prefetch`): at most ``depth``
items made ahead of the one the consumer holds (each item of the read stage holds a 16 MB block
buffer until hashed: an item made early is a buffer more), in order, its errors re-raised."""

import threading
import time

import pytest

from neardup.stages.read import prefetch


def _counted(n, made):
    for i in range(n):
        made.append(i)
        yield i


@pytest.mark.parametrize("depth", [1, 2])
def test_at_most_depth_items_made_ahead(depth):
    made = []
    got = []
    for item in prefetch(_counted(8, made), depth=depth):
        time.sleep(0.05)  # time for the thread to run ahead as far as it may
        got.append(item)
        assert len(made) <= len(got) + depth, (len(made), len(got))
    assert got == list(range(8))


def test_errors_reach_the_consumer():
    def failing():
        yield 1
        raise ValueError("bad line")

    with pytest.raises(ValueError, match="bad line"):
        list(prefetch(failing(), depth=1))


def test_consumer_that_stops_early_stops_the_thread():
    before = threading.active_count()
    it = prefetch(iter(range(100)), depth=1)
    assert next(it) == 0
    it.close()
    time.sleep(0.3)
    assert threading.active_count() == before
