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


def test_load_selection_loads_the_overload_the_stage_calls(tmp_path):
    """The kernel load started at the stage's start is of the selection it then makes: after
    load_selection, the stage's selection over its own arrays (pairs read back from an Arrow file,
    their positions from members_of) adds no signature to the kernel (none compiled or loaded
    again on the stage's path)."""
    import pyarrow as pa

    from neardup.kernels.components import _select_kernel
    from neardup.stages.clusters import load_selection, members_of, select_partition
    from neardup.stages.corpus import column

    if not hasattr(_select_kernel, "signatures"):
        pytest.skip("numba's JIT is off")
    load_selection()
    loaded = list(_select_kernel.signatures)
    path = str(tmp_path / "pairs.arrow")
    with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, pa.schema([("left", pa.int64()), ("right", pa.int64()),
                                                                 ("similarity", pa.float64())])) as w:
        w.write_table(pa.table({"left": [0, 4, 4], "right": [3, 9, 7], "similarity": [0.9, 0.85, 1.0]}))
    with pa.memory_map(path) as f:
        pairs = pa.ipc.open_file(f).read_all()
    left, right = column(pairs, "left"), column(pairs, "right")
    docs, positions = members_of(left, right, 10)
    attrs = {"source": np.zeros(len(docs), np.int32), "row": docs.copy()}
    members, counts = select_partition(docs, lambda: (attrs, pa.array([str(d) for d in docs])), left, right,
                                       column(pairs, "similarity", np.float64), Config(keep="first"), [], positions)
    assert counts["removed"] == 3 and members.num_rows == 5
    assert list(_select_kernel.signatures) == loaded and len(loaded) == 1


def test_the_whole_stage_loads_the_selection_kernel_in_a_thread_of_its_own(tmp_path, monkeypatch):
    """ClustersStage.whole has the kernel loaded in a thread of its own while it reads the pairs,
    and waits for it: an error of the load is the stage's."""
    import os

    import neardup.stages.clusters as cl
    from neardup import io as nio
    from neardup.engines.local import LocalEngine
    from neardup.io.storage.folder import Folder
    from neardup.stages import Run
    from neardup.stages.pairs import PairsStage
    from neardup.stages.read import ReadStage
    from neardup.stages.workdir import WorkDir

    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "corpus.jsonl")
    config = Config().resolved()
    work = WorkDir(str(tmp_path / "work"), "load-test")
    run = Run(config=config, sources=nio.discover([example]), work=work, output=Folder.of(tmp_path / "out"),
              quiet=True)
    for stage in (ReadStage(), PairsStage()):
        work.mark_done(stage.name, stage.run(run, LocalEngine()))
    threads = []

    def load():
        threads.append(threading.current_thread())
        raise RuntimeError("the kernel did not load")

    monkeypatch.setattr(cl, "load_selection", load)
    with pytest.raises(RuntimeError, match="the kernel did not load"):
        cl.ClustersStage().whole(run)
    assert len(threads) == 1 and threads[0] is not threading.current_thread()


def test_select_partition_takes_the_representatives_ids_in_a_thread(monkeypatch):
    """The representatives' ids (null for kept members) are taken in a thread of their own while
    the rest of the members' columns are made; they are those of a take in the caller's."""
    import pyarrow as pa

    import neardup.stages.clusters as cl

    threads = []
    real = cl.in_thread

    def recorded(fn, name="neardup-members"):
        return real(lambda: (threads.append(threading.current_thread()), fn())[1], name)

    monkeypatch.setattr(cl, "in_thread", recorded)
    left, right, sim = np.array([0, 4, 4, 12]), np.array([3, 9, 7, 13]), np.array([0.9, 0.85, 1.0, 0.95])
    docs, positions = cl.members_of(left, right, 14)
    ids = pa.array([f"id{d}" for d in docs])
    attrs = {"source": np.zeros(len(docs), np.int32), "row": docs.copy()}
    members, _ = cl.select_partition(docs, lambda: (attrs, ids), left, right, sim, Config(keep="first"), [], positions)
    assert [t for t in threads if t is not threading.current_thread()]
    assert members.column("representative_id").to_pylist() == [None, "id0", None, "id4", "id4", None, "id12"]
