"""The clusters stage's own steps around the selection: the largest clusters for the report, the
members' columns it reads, and their gathering in a thread while the selection is made."""

import threading

import numpy as np
import pytest
from hypothesis import example, given, settings
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


class _Gathering:
    """A MemberColumns of four blocks: the thread that takes block 0 holds it until ``release``."""

    def __init__(self, shared=True, error=None):
        self.shared, self.error = shared, error
        self.left = iter(range(4))
        self.by = {}
        self.holding, self.release = threading.Event(), threading.Event()

    def take(self):
        for j in self.left:
            self.by[j] = threading.current_thread().name
            if j == 0:
                self.holding.set()
                self.release.wait(10)
                if self.error:
                    raise self.error
        if threading.current_thread().name != "neardup-members":  # the caller: the thread may go on
            self.release.set()

    def result(self):
        return dict(self.by)


def test_in_thread_the_caller_takes_the_blocks_left_and_gets_the_result_or_error():
    """The gathering runs beside the caller; a caller asking for the result while the thread is
    still on a block takes the blocks no one has taken (a local work dir's), then has the result
    of every block, as often as asked; the thread's error is raised in the caller."""
    gathering = _Gathering()
    wait = in_thread(gathering)
    assert gathering.holding.wait(10)
    by = wait()
    assert by[0] == "neardup-members" and [by[j] for j in (1, 2, 3)] == [threading.current_thread().name] * 3
    assert wait() is by

    remote = _Gathering(shared=False)  # a remote work dir's cache is one thread's: the caller waits
    wait = in_thread(remote)
    assert remote.holding.wait(10)
    remote.release.set()
    assert set(wait().values()) == {"neardup-members"}

    failing = _Gathering(error=OSError("a block file is gone"))
    wait = in_thread(failing)
    assert failing.holding.wait(10)
    with pytest.raises(OSError, match="a block file is gone"):
        wait()

def _ipc_bytes(array):
    import io
    import pyarrow as pa
    out = io.BytesIO()
    with pa.ipc.new_file(out, pa.schema([("x", array.type)])) as writer:
        writer.write_batch(pa.record_batch([array], ["x"]))
    return out.getvalue()


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(0, 12), min_size=1, max_size=60), m=st.integers(0, 80),
       share=st.floats(0, 1), nulls=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_taken_where_is_a_take_with_null_indices(lengths, m, share, nulls, seed):
    """The representatives' ids (taken_where): the array a take with null indices where not
    valid gives, and the same bytes in an Arrow IPC file (the clusters stage's work file), from
    ids of any lengths (empty ones), a slice of a larger array, with nulls of their own or none."""
    import pyarrow as pa
    from neardup.stages.clusters import taken_where
    rng = np.random.default_rng(seed)
    values = ["x" * k + str(i) * (k > 0) for i, k in enumerate(lengths)]
    ids = pa.array(["lead"] + values, mask=np.array([False] + [nulls and k == 3 for k in lengths]))[1:]
    at = rng.integers(0, len(ids), m)
    valid = rng.random(m) < share
    indices = pa.Array.from_buffers(pa.int64(), m, [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                                    pa.py_buffer(np.ascontiguousarray(at, np.int64))])
    want, got = ids.take(indices), taken_where(ids, np.where(valid, at, -1), valid)  # -1 where not valid (the selection's)
    got.validate(full=True)
    assert got.equals(want) and _ipc_bytes(got) == _ipc_bytes(want)


@settings(max_examples=50, deadline=None)
@given(m=st.integers(2, 60), pairs=st.integers(1, 120), seed=st.integers(0, 2 ** 32 - 1))
def test_select_partition_members_are_the_selections(m, pairs, seed):
    """A partition's members (select_partition) as the plain-Python selection makes them: each
    member's cluster and representative as documents (-1: kept) and as ids (null: kept), its
    similarity and whether it is removed; the counts."""
    import pyarrow as pa
    from neardup.kernels.components import select_representatives_python
    from neardup.stages.clusters import select_partition
    rng = np.random.default_rng(seed)
    left = rng.integers(0, m, pairs)
    right = (left + rng.integers(1, m, pairs)) % m  # no pair of a document with itself
    docs = np.sort(rng.choice(10 * m, m, replace=False)).astype(np.int64)
    docs = docs[np.unique(np.concatenate([left, right]))]  # the documents of the pairs alone
    at = np.full(m, -1)
    at[np.unique(np.concatenate([left, right]))] = np.arange(len(docs))
    left, right = at[left], at[right]
    sim = rng.choice([0.8, 0.9, 1.0], pairs)
    ids = pa.array([f"id-{d}" for d in docs.tolist()])
    columns = lambda: ({"source": np.zeros(len(docs), np.int32), "row": docs.copy()}, ids)  # noqa: E731
    members, counts = select_partition(docs, columns, docs[left], docs[right], sim, Config(keep="first"), [])
    cluster, rep, rsim, removed = select_representatives_python(len(docs), list(zip(left.tolist(), right.tolist())),
                                                                sim.tolist())
    got = members.to_pydict()
    assert got["doc"] == docs.tolist() and got["removed"] == removed
    assert got["cluster"] == [int(docs[c]) for c in cluster]
    assert got["representative"] == [int(docs[r]) if r >= 0 else -1 for r in rep]
    assert got["cluster_id"] == [f"id-{docs[c]}" for c in cluster]
    assert got["representative_id"] == [f"id-{docs[r]}" if r >= 0 else None for r in rep]
    assert np.allclose(got["similarity"], rsim, equal_nan=True)
    assert counts["members"] == len(docs) and counts["removed"] == sum(removed)


@settings(max_examples=100, deadline=None)
@given(m=st.integers(2, 3000), pairs=st.integers(1, 2000), group=st.sampled_from([7, 512, 1024]), lengths=st.sampled_from([0, 1, 2, 3, 8]),
       share=st.sampled_from([0.0, 0.02, 0.05, 1.0]),
       arrow_takes=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
@example(m=3000, pairs=3000, group=512, lengths=3, share=0.02, arrow_takes=True, seed=1)  # tails over batches
@example(m=3000, pairs=3000, group=512, lengths=8, share=1.0, arrow_takes=True, seed=2)  # longer ids, every row's
@pytest.mark.slow
def test_members_written_batch_by_batch_are_the_bytes_of_the_whole_table(tmp_path_factory, m, pairs, group, lengths,
                                                                         share, arrow_takes, seed):
    """The members file written as select_partition makes its batches (members_writer: each
    batch's cluster and representative ids taken on their own, while the one before is written)
    has the bytes of the whole members table written at once (Folder.write_arrow): the same
    record batches, and the strings' data of each written to its padded length as Arrow's writer
    writes a slice of the whole column, for batches of whole pages (ROW_GROUP a multiple of
    WHOLE_PAGES; 7: the whole table given at once), ids of any length (short and empty ones:
    batches whose data is shorter than the padding; longer ones, and of letters drawn at random:
    the bytes after a batch are those of the rows after it), taken by Arrow or by numpy."""
    from neardup.io.storage import tables
    from neardup.io.storage.folder import Folder
    from neardup.stages import clusters
    from neardup.stages.clusters import members_writer, select_partition
    import pyarrow as pa
    rng = np.random.default_rng(seed)
    left = rng.integers(0, m, pairs)
    right = (left + rng.integers(1, m, pairs)) % m
    used = np.unique(np.concatenate([left, right]))
    docs = np.sort(rng.choice(10 * m, m, replace=False)).astype(np.int64)[used]
    at = np.full(m, -1)
    at[used] = np.arange(len(docs))
    left, right = docs[at[left]], docs[at[right]]
    sim = rng.choice([0.8, 0.9, 1.0], pairs)
    # ids of letters drawn at random: the bytes a batch's data is followed by are those of the rows after it
    ids = pa.array(["".join(rng.choice(list("abcdefgh"), int(rng.integers(0, lengths + 1)))) * (rng.random() < share)
                    for _ in docs.tolist()])
    columns = lambda: ({"source": np.zeros(len(docs), np.int32), "row": docs.copy()}, ids)  # noqa: E731
    folder = Folder.of(tmp_path_factory.mktemp("members"))
    saved = tables.ROW_GROUP
    tables.ROW_GROUP = group
    try:
        members, counts = select_partition(docs, columns, left, right, sim, Config(keep="first"), [])
        folder.write_arrow("whole.arrow", members)
        none, written = select_partition(docs, columns, left, right, sim, Config(keep="first"), [], None,
                                         members_writer(folder, "batches.arrow"), arrow_takes)
    finally:
        tables.ROW_GROUP = saved
    assert none is None and written == counts
    with open(folder.join("whole.arrow"), "rb") as a, open(folder.join("batches.arrow"), "rb") as b:
        assert a.read() == b.read()


def test_members_writer_makes_no_file_when_the_batches_fail(tmp_path, monkeypatch):
    """An error while the batches are made (here the representatives' ids) reaches the caller
    and leaves no members file (the writer's atomic file is not put in place)."""
    import pyarrow as pa
    from neardup.io.storage.folder import Folder
    from neardup.stages import clusters
    docs = np.arange(4, dtype=np.int64)
    columns = lambda: ({"source": np.zeros(4, np.int32), "row": docs.copy()}, pa.array(list("abcd")))  # noqa: E731

    def failing(*a, **k):
        raise OSError("no ids")
    monkeypatch.setattr(clusters, "taken_where", failing)
    folder = Folder.of(tmp_path)
    with pytest.raises(OSError, match="no ids"):
        clusters.select_partition(docs, columns, np.array([0, 2]), np.array([1, 3]), np.ones(2), Config(keep="first"),
                                  [], None, clusters.members_writer(folder, "m.arrow"))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_whole_stage_allocates_from_the_system_pool_and_puts_the_pool_back(tmp_path, monkeypatch):
    """The clusters stage of one partition makes Arrow's allocations (the pairs read, the members'
    ids, the members file) from the system allocator, which reuses what the read stage freed (the
    default pool, mimalloc, faulted fresh huge pages in: issue 32), its own thread's and the
    gathering thread's; Arrow's default pool is the caller's again afterwards, also when the stage
    fails."""
    import json
    import os

    import pyarrow as pa

    import neardup.stages.clusters as clusters
    from neardup import io as nio
    from neardup.engines.local import LocalEngine
    from neardup.io.storage.folder import Folder
    from neardup.stages import Run
    from neardup.stages.corpus import MemberColumns
    from neardup.stages.pairs import PairsStage
    from neardup.stages.read import ReadStage
    from neardup.stages.workdir import WorkDir

    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "corpus.jsonl")
    src = tmp_path / "in.jsonl"
    with open(src, "w") as f:
        for i, line in enumerate(open(example)):
            f.write(json.dumps({"id": f"d{i}", "text": json.loads(line)["text"]}) + "\n")
    work = WorkDir(str(tmp_path / "work"), "pool-test")
    run = Run(config=Config().resolved(), sources=nio.discover([str(src)]), work=work,
              output=Folder.of(tmp_path / "out"), quiet=True)
    for stage in (ReadStage(), PairsStage()):
        work.mark_done(stage.name, stage.run(run, LocalEngine()))
    before = pa.default_memory_pool().backend_name
    seen = []
    select, take = clusters.select_partition, MemberColumns.take
    monkeypatch.setattr(clusters, "select_partition", lambda *a, **k: (
        seen.append(("select", pa.default_memory_pool().backend_name)), select(*a, **k))[1])
    monkeypatch.setattr(MemberColumns, "take", lambda self: (
        seen.append(("take", pa.default_memory_pool().backend_name)), take(self))[1])
    info = clusters.ClustersStage().run(run, LocalEngine())
    assert info.members and ("select", "system") in seen and ("take", "system") in seen
    assert {pool for _, pool in seen} == {"system"}
    assert pa.default_memory_pool().backend_name == before

    def fails(*a, **k):
        raise RuntimeError("selection")
    monkeypatch.setattr(clusters, "select_partition", fails)
    with pytest.raises(RuntimeError):
        clusters.ClustersStage().run(run, LocalEngine())
    assert pa.default_memory_pool().backend_name == before
