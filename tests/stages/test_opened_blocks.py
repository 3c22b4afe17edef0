"""The clusters stage's files opened ahead (neardup.stages.corpus.OpenedBlocks) with takers in
other threads: a block claimed while its thread opens it is waited for, never opened twice."""

from __future__ import annotations

import threading
import time

import numpy as np

from neardup.stages.corpus import OpenedBlocks


class _Store:
    """Three blocks; block 0's open waits until the test lets it go; every open counted."""

    def __init__(self):
        self.block_start = np.array([0, 10, 20, 30], np.int64)
        self.row_runs = None
        self.opens = []
        self.opening_0 = threading.Event()
        self.go = threading.Event()

    def opened(self, block, columns):
        self.opens.append(block)
        if block == 0:
            self.opening_0.set()
            assert self.go.wait(60)
        return f"table {block}"


def test_a_block_claimed_while_it_is_opened_is_waited_for_not_opened_again():
    store = _Store()
    opened = OpenedBlocks(store, ["length"], False)
    assert store.opening_0.wait(60)  # the thread is inside block 0's open
    got = []
    taker = threading.Thread(target=lambda: got.append(opened.pop(0)))
    taker.start()
    deadline = time.monotonic() + 60
    while 0 not in opened.claimed and time.monotonic() < deadline:  # the taker's claim made
        time.sleep(0.001)
    store.go.set()
    taker.join(60)
    opened.job.wait()
    assert got == ["table 0"]  # the thread's table: the taker opens nothing
    assert store.opens == [0, 1, 2] and sorted(opened.tables) == [1, 2]
    assert opened.pop(1) == "table 1" and opened.pop(1) is None
    opened.close()
    assert opened.tables == {}
