"""The clusters stage's own steps around the selection: the largest clusters for the report, the
members' columns it reads, and their gathering in a thread while the selection is made."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.config import Config
from neardup.stages.clusters import in_thread, largest_clusters, member_columns


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(2, 6), max_size=40), k=st.integers(0, 25), seed=st.integers(0, 2 ** 32 - 1))
def test_largest_clusters_are_those_of_a_sort_of_every_cluster(sizes, k, seed):
    """Clusters of the given sizes (many ties), their heads anywhere among the members: the k
    largest (larger first, ties to the smaller head), every head's size and the count are those
    of sorting every cluster by (-size, head)."""
    rng = np.random.default_rng(seed)
    m = sum(sizes)
    slots = rng.permutation(m)
    head = np.empty(m, np.int64)
    at = 0
    for size in sizes:
        members = slots[at:at + size]
        head[members] = members.min() if rng.random() < 0.5 else members.max()
        at += size
    best, got_sizes, clusters = largest_clusters(head, k)
    heads, counts = np.unique(head, return_counts=True)
    want = heads[np.lexsort((heads, -counts))][:k]
    assert best.tolist() == want.tolist()
    assert clusters == len(sizes)
    assert np.array_equal(got_sizes[heads], counts) and got_sizes.sum() == m


def test_member_columns_are_those_the_keep_order_reads():
    assert member_columns(Config(keep="first")) == ["source", "row"]
    assert member_columns(Config(keep="longest")) == ["source", "row", "length"]
    assert member_columns(Config(keep="score:q")) == ["source", "row", "score"]


def test_in_thread_gathers_while_the_caller_goes_on_and_gives_its_result_or_error():
    """The gathering runs beside the caller: it sees what the caller does after starting it
    (an event set before the result is asked for); its result is given as often as asked, its
    error raised in the caller."""
    caller_went_on = threading.Event()
    wait = in_thread(lambda: caller_went_on.wait(10))
    caller_went_on.set()
    assert wait() is True and wait() is True

    def fails():
        raise OSError("a block file is gone")
    with pytest.raises(OSError, match="a block file is gone"):
        in_thread(fails)()
