"""Stage ``clusters``: verified pairs of whole clusters -> members with their representative.

A partition holds whole connected components. When the engine wants one partition, it is every
verified pair (:meth:`ClustersStage.whole`). Otherwise the components are found first by the
star steps of :mod:`neardup.kernels.components` (:func:`~neardup.kernels.components.large_star`,
:func:`~neardup.kernels.components.small_star`), each step a shuffle of the edges on their node, until
every component is a star; each pair then takes its component's label (a shuffle on the
document) and whole components meet in the partition of their label (a shuffle on the label).
:func:`select_partition` renumbers a partition's documents in ascending order, so that keep
order and ties are those of the whole corpus, and runs the chain-guarded selection of
:func:`neardup.kernels.components.select_representatives`.
"""

from __future__ import annotations

import dataclasses
import importlib
import queue
from functools import partial
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow, arrow_take, empty_table, system_pool, take_array, to_numpy, unique
from .. import io as nio
from ..io.storage import tables
from ..io.storage.fs import atomic_write
from ..progress import bar, check_interrupt
from .against import matched_members
from .background import Background
from .corpus import MemberColumns, column, document_ids
from .records import ClustersInfo, StarStep
from .workdir import MEMBERS_SCHEMA, PAIRS_SCHEMA, members_table, part_name, write_record

MAX_CC_ROUNDS = 200

Columns = Tuple[Dict[str, np.ndarray], Optional[pa.Array]]  # members' columns and user ids (DocStore.columns_and_ids)

TOP_CLUSTERS = 20      # clusters shown in the report
TOP_MEMBERS = 5        # members shown of each


def select_partition(docs: np.ndarray, columns: Callable[[], Columns], left: np.ndarray, right: np.ndarray,
                     similarity: np.ndarray, config, sources: Sequence[nio.Source],
                     positions=None, write: Optional[Callable[[Iterable[pa.Table]], None]] = None,
                     arrow_takes: bool = False) -> Tuple[Optional[pa.Table], dict]:
    """``docs``: the partition's documents, ascending; ``columns()``: their columns
    (:func:`member_columns`) and user ids (:meth:`DocStore.columns_and_ids`), asked for once the
    selection is made, unless the keep order needs them first (``longest``, ``score:COLUMN``): a
    caller that gathers them in a thread (:func:`in_thread`) has them gathered while the
    selection's kernel runs; ``left``/``right``: its verified pairs (document indices);
    ``positions``: their positions in ``docs`` when the caller has them (:func:`members_of`).
    Returns the members (MEMBERS_SCHEMA, document order) and the counts with the partition's
    largest clusters, ``top``: [{"head", "size", "members": [[doc, id, source, row], ...]}].
    ``write``: the members given to it instead, as tables of ROW_GROUP rows each (the last
    fewer; one table of all where ROW_GROUP is not a multiple of WHOLE_PAGES), in a thread of its own (:func:`members_writer`: the record batches of the file
    the whole table would make), each written while the next one's representative ids are
    taken (and its cluster ids, in a third thread) (None returned for the members; an error here ends the batches with it, so
    that no file is made). ``arrow_takes``: the batches' ids taken by Arrow's take (the store's
    :attr:`DocStore.arrow_takes`: pyarrow.compute imported for it), else by :func:`take_array`."""
    from ..kernels.components import keep_order, select_representatives
    m = len(docs)
    li, ri = positions if positions is not None else (np.searchsorted(docs, left), np.searchsorted(docs, right))
    by = columns()[0] if config.keep != "first" else {}  # the lengths or scores the keep order reads
    rank = keep_order(m, config.keep, lengths=by.get("length"), scores=by.get("score"))
    sel = select_representatives(m, li, ri, similarity, rank)
    # what needs no column first: a gathering thread may not be done yet
    head = sel.cluster
    removed = sel.removed
    # the kept's representative -1 (the selection's): -1 picks the -1 put after the documents
    cluster, representative = docs[head], np.append(docs, -1)[sel.representative]
    best, sizes, clusters = largest_clusters(head, TOP_CLUSTERS, sel.sizes)
    attrs, user_ids = columns()
    source = attrs["source"].astype(np.int32, copy=False)
    row = attrs["row"].astype(np.int64, copy=False)
    ids = document_ids(source, row, user_ids, sources)
    if write is None or tables.ROW_GROUP % WHOLE_PAGES:
        # the clusters' ids taken in a thread beside the representatives' (numpy's gathers release the GIL)
        cluster_ids: List[pa.Array] = []
        taking = Background(lambda: cluster_ids.append(take_array(ids, head)), "neardup-cluster-ids")
        representative_ids = taken_where(ids, sel.representative, removed)
        taking.join()
        members = members_table(docs, source, row, cluster, representative, sel.similarity, removed,
                                ids, cluster_ids[0], representative_ids, pa.nulls(m, pa.string()))
        counts = partition_counts(docs, head, removed, best, sizes, clusters, ids, source, row)
        if write is None:
            return members, counts
        write([members])
        return None, counts
    take = arrow_take if arrow_takes else take_array  # (a batch's ~65,000 ids ~8x faster by Arrow's)
    batches: "queue.SimpleQueue" = queue.SimpleQueue()
    writing = Background(partial(write, _until_done(batches)), "neardup-members-write")
    starts = range(0, m, tables.ROW_GROUP)
    cluster_batches: "queue.SimpleQueue" = queue.SimpleQueue()  # each batch's cluster ids, from a thread of their own
    Background(partial(_take_each, ids, head, starts, take, cluster_batches), "neardup-cluster-ids")
    try:
        held: List[list] = []  # batches made, not yet given: [a, b, cluster ids, representative ids]
        for a in starts:
            b = min(a + tables.ROW_GROUP, m)
            representative_ids = taken_where(ids, sel.representative[a:b], removed[a:b], take)
            held.append([a, b, next(_until_done(cluster_batches)), representative_ids])
            # a batch is given once the batches after it hold the bytes its strings' data reaches into
            # in the whole file's (:func:`_with_tail`), or at the end
            while held and (b == m or all(sum(_data_size(h[k]) for h in held[1:]) >= TAIL_BYTES for k in (2, 3))):
                a0, b0, cluster_ids, representative_ids = held[0]
                batches.put(members_table(docs[a0:b0], source[a0:b0], row[a0:b0], cluster[a0:b0],
                                          representative[a0:b0], sel.similarity[a0:b0], removed[a0:b0],
                                          ids.slice(a0, b0 - a0), _with_tail(cluster_ids, [h[2] for h in held[1:]]),
                                          _with_tail(representative_ids, [h[3] for h in held[1:]]),
                                          pa.nulls(b0 - a0, pa.string())))
                held.pop(0)
        counts = partition_counts(docs, head, removed, best, sizes, clusters, ids, source, row)
    except BaseException:
        batches.put(_Stopped())  # the writer raises it: no file made
        writing.wait()
        raise
    batches.put(None)
    writing.join()
    return None, counts


# Arrow's IPC writer writes each buffer of a slice up to its padded length (a multiple of 64
# bytes) where the buffer goes on: a record batch of the members file is a slice of the whole
# table's columns. Batches of a multiple of WHOLE_PAGES rows fill whole multiples of 64 bytes of
# every fixed-width column (8, 4 and 1/8 bytes a row) and of the bitmaps, so that a batch's own
# columns are written as those slices are; a string's data is padded from the next rows'
# strings, as many as there are (TAIL_BYTES of them), put after each batch's (:func:`_with_tail`)
TAIL_BYTES = 64
WHOLE_PAGES = 8 * TAIL_BYTES


def _data_size(strings: pa.Array) -> int:
    """The bytes of a string array's data its offsets reach (its offset 0, as a take makes it)."""
    return int(np.frombuffer(strings.buffers()[1], np.int32, 1, 4 * len(strings))[0]) if len(strings) else 0


def _with_tail(strings: pa.Array, after: Sequence[pa.Array]) -> pa.Array:
    """``strings`` (a batch's cluster or representative ids, offset 0) with their data buffer
    followed by the first TAIL_BYTES of the data of the ``after`` batches' (as many as they
    hold): the array whose record batch Arrow's IPC writer writes as it writes the slice of the
    whole column (made by one take) that these rows are, the same bytes, padding and all."""
    tail = []
    left = TAIL_BYTES
    for later in after:
        if left <= 0:
            break
        n = min(_data_size(later), left)
        if n:
            tail.append(np.frombuffer(later.buffers()[2], np.uint8, n))
            left -= n
    if not tail:
        return strings
    end = _data_size(strings)
    data = np.concatenate([np.frombuffer(strings.buffers()[2], np.uint8, end) if end else np.zeros(0, np.uint8)] + tail)
    return pa.Array.from_buffers(pa.string(), len(strings), [strings.buffers()[0], strings.buffers()[1],
                                                            pa.py_buffer(data)], null_count=strings.null_count)


def partition_counts(docs, head, removed, best, sizes, clusters: int, ids: pa.Array, source, row) -> dict:
    """A partition's counts (:func:`select_partition`), its largest clusters (``best``, of
    :func:`largest_clusters`) shown with their first members."""
    marked = np.zeros(len(docs), dtype=np.bool_)
    marked[best] = True
    shown_members = np.flatnonzero(marked[head])  # the members of the largest clusters, in one pass
    top: List[dict] = []
    for h in best.tolist():
        ms = shown_members[head[shown_members] == h]
        shown = np.concatenate([[h], ms[ms != h]])[:TOP_MEMBERS]
        top.append({"head": int(docs[h]), "size": int(sizes[h]),
                    "members": [[int(docs[i]), ids[i].as_py(), int(source[i]), int(row[i])] for i in shown.tolist()]})
    return {"members": len(docs), "removed": int(removed.sum()), "clusters": clusters, "top": top}


def _take_each(ids: pa.Array, at: np.ndarray, starts: range, take, out: "queue.SimpleQueue") -> None:
    """``ids`` taken at each batch of ``at`` (from each of ``starts``, ROW_GROUP long), each put
    on ``out`` in order (an error put there in its place: the taker raises it)."""
    try:
        for a in starts:
            out.put(take(ids, at[a:a + tables.ROW_GROUP]))
    except BaseException as e:  # noqa: B902 (the caller's to raise)
        out.put(e)


class _Stopped(Exception):
    """The members' batches ended by an error of their making (raised by the caller)."""


def _until_done(batches: "queue.SimpleQueue") -> Iterator[pa.Table]:
    """The tables put on ``batches`` until None; an error put there is raised."""
    while True:
        item = batches.get()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def members_writer(folder, name: str) -> Callable[[Iterable[pa.Table]], None]:
    """What writes a partition's members (:func:`select_partition`'s ``write``) as the Arrow IPC
    file ``name`` of ``folder``, atomically: each table given written as one record batch (of
    ROW_GROUP rows, the last fewer), the bytes :meth:`Folder.write_arrow` writes of them all
    as one table (the same batches), written as the next batch is made."""
    def write(parts: Iterable[pa.Table]) -> None:
        with atomic_write(folder.join(name)) as f:
            with pa.ipc.new_file(f, MEMBERS_SCHEMA) as w:
                for t in parts:
                    w.write_table(t, max_chunksize=tables.ROW_GROUP)
    return write


def largest_clusters(head: np.ndarray, k: int, sizes: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray, int]:
    """``head``: each member's cluster head (a position among the members: every member is in a
    cluster of two or more). Returns the heads of the ``k`` largest clusters (larger first, ties to
    the smaller head), the size of the cluster each position heads (0: none) and how many clusters
    there are. By a histogram of the sizes, which gives the size the k-th largest has: only the
    clusters at least that large are sorted (a sort of every cluster took 1 ms of the 1M corpus's
    102,715, a test of membership in the largest ones 1.7 ms more). ``sizes``: those sizes where
    the caller has them (:attr:`Selection.sizes`, counted in the selection kernel's last pass: no
    bincount of the members here)."""
    m = len(head)
    if sizes is None:
        sizes = np.bincount(head, minlength=m)
    if m == 0:
        return head[:0], sizes, 0
    hist = np.bincount(sizes)  # clusters of each size; hist[0]: positions that head none
    clusters = m - int(hist[0])
    k = min(k, clusters)
    cut = len(hist) - 1 - int(np.searchsorted(np.cumsum(hist[:0:-1]), k))  # the k-th largest size
    candidates = np.flatnonzero(sizes >= max(cut, 1))
    return candidates[np.argsort(-sizes[candidates], kind="stable")][:k], sizes, clusters


def in_thread(gathering: MemberColumns) -> Callable[[], Columns]:
    """``gathering`` (:class:`MemberColumns`) started in a thread of its own (:class:`Background`);
    the function returned gives its result (raising its error), once every block is read: the
    caller's thread takes the blocks not yet taken (of a local work dir), so that a caller that
    asks once the selection's kernel is done (which releases the GIL) gathers beside the thread
    rather than waiting for it (at 1M documents, under load: ~25 CPU-ms of gathering beside ~10
    of the kernel, on two cores)."""
    job = Background(gathering.take, "neardup-members")
    result: List[Columns] = []

    def wait() -> Columns:
        if not result:
            if gathering.shared:
                gathering.take()
            job.join()
            result.append(gathering.result())
        return result[0]
    return wait


def load_ahead(run, engine, verified: int) -> Optional[Background]:
    """The selection's kernel loaded from numba's cache (or compiled) in a thread of its own, and
    the blocks' files opened in another (:meth:`DocStore.open_ahead`), where the clusters stage
    will run in this process (one partition) on ``verified`` pairs: called at the pair stage's
    end, so that the stage does not pay the load on its clock (3-5 ms at 1M), nor wait for the
    opens (~0.15-0.3 ms a block, 36 blocks at 1M).
    The load is a call on one pair, typed as the stage's call is (:func:`select_representatives`
    casts the indices), so that no second version is compiled; an error of it is the stage's own
    call's to raise. Not in a Ray driver: its calls run in the worker (and the driver imports no
    numba)."""
    if not verified or not engine.in_process or engine.partitions(verified * EDGE_BYTES) != 1:
        run.store.close()  # (files opened from the pair stage's verification: :func:`start_ahead`)
        return None
    from ..kernels.components import select_representatives
    loading = Background(partial(select_representatives, 2, np.zeros(1, np.int64), np.ones(1, np.int64), np.ones(1)),
                         "neardup-kernel-load")
    if not run.store.opened_early:  # (else opened from the pair stage's verification: :func:`start_ahead`)
        run.store.open_ahead(member_columns(run.config), run.user_ids_wanted())  # (the load started first: the longer)
    return loading


def start_ahead(run, engine, eligible: int) -> bool:
    """The blocks' files opened for the clusters stage (:meth:`DocStore.open_ahead`) from the
    pair stage's verification (once its candidates are found: :meth:`PairsStage.whole`), not its
    end, where that stage will run in this process (one partition, as a pair's worth of bytes
    gives it) on a corpus of more than NUMPY_UP_TO ``eligible`` documents: the opens (36 blocks
    at 1M documents, ~4.5 thread-CPU-ms) run beside the verification's kernels, which hold no
    GIL, not beside the clusters stage's first steps on its two cores (the stage alone on a 1M
    work dir, files opened before it against from its start, 30 runs each, load 4.5: median
    wall 39.8 -> 32.9 ms, CPU 37.1 -> 31.2). Not at the pair stage's start: its first steps
    read the blocks' columns in Python, the GIL's. :func:`load_ahead` at the pair stage's end
    then opens none again, and lets go of them where the stage will not take them (no
    verified pair, several partitions). The kernel's load stays there: from the pair stage's
    start it held the stage's first steps up (~40-60 ms under load), and a run without pairs
    loads none. A smaller corpus's files are opened at the pair stage's end, as before.
    Returns whether they were opened here."""
    from ..kernels.arrays import NUMPY_UP_TO
    if eligible <= NUMPY_UP_TO or not engine.in_process or engine.partitions(EDGE_BYTES) != 1:
        return False
    run.store.open_ahead(member_columns(run.config), run.user_ids_wanted())
    run.store.opened_early = True
    return True


def compute_ahead(engine, documents: int, store=None) -> Optional[Background]:
    """``pyarrow.compute`` imported in a thread of its own from the pair stage's start, where the
    clusters stage will run in this process on a corpus of more than NUMPY_UP_TO ``documents``
    (:mod:`neardup.kernels.arrays`): its takes of more values than that go through Arrow's,
    which imports it (25-31 CPU-ms at 1M documents: 0.04 -> 0.09-0.11 s of the stage's wall when
    it did so on the stage's clock); the pair stage's kernels hold no GIL. The ``store``'s
    blocks' rows and the members' ids are then taken by Arrow's take too
    (:attr:`DocStore.arrow_takes` set). None otherwise: a run of fewer documents never imports
    it, nor does a Ray driver."""
    from ..kernels.arrays import NUMPY_UP_TO
    if documents <= NUMPY_UP_TO or not engine.in_process:
        return None
    if store is not None:
        store.arrow_takes = True
    return Background(partial(importlib.import_module, "pyarrow.compute"), "neardup-arrow-compute")


def taken_where(ids: pa.Array, at: np.ndarray, valid: np.ndarray, take=take_array) -> pa.Array:
    """``ids`` (strings) taken at ``at``, null where not ``valid`` (the representatives' ids of
    the members, null for the kept; ``at`` is not read there, nor checked by Arrow's take under a
    null index: -1, as the selection has it): the same array as a take with null indices there, made by
    taking the valid ones alone and spreading their offsets, each null an empty slot (at 1M
    documents, 107,349 of 214,229 members removed: ~1.5 ms against ~3.5 under load). A take of
    ids with nulls of their own is the take with null indices (what its null slots hold is
    the take's)."""
    where = np.flatnonzero(valid)
    taken = take(ids, at[where])
    if taken.null_count or taken.type != pa.string():
        return ids.take(pa.Array.from_buffers(pa.int64(), len(at), [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                                                   pa.py_buffer(np.ascontiguousarray(at, np.int64))]))
    lengths = np.zeros(len(at), np.int32)
    lengths[where] = np.diff(np.frombuffer(taken.buffers()[1], np.int32, len(where) + 1))
    offsets = np.zeros(len(at) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(at), [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                                        pa.py_buffer(offsets), taken.buffers()[2]])


def member_columns(config) -> List[str]:
    """The columns of the read stage's shards the selection reads of each member: where it lies,
    and what its keep order needs (the length for ``longest``, the score for ``score:COLUMN``)."""
    return (["source", "row"] + (["length"] if config.keep == "longest" else [])
            + (["score"] if config.score_column else []))


def merge_counts(parts: Sequence[dict]) -> dict:
    """The counts of every partition together (the largest clusters over all of them)."""
    top = sorted((c for p in parts for c in p["top"]), key=lambda c: (-c["size"], c["head"]))[:TOP_CLUSTERS]
    return {"members": sum(p["members"] for p in parts), "removed": sum(p["removed"] for p in parts),
            "clusters": sum(p["clusters"] for p in parts), "top": top}


# --------------------------------------------------------------------------- the stage


def whole_call(_item, *, run) -> ClustersInfo:
    """:meth:`ClustersStage.whole` as one call of an engine (a task with every core of a node)."""
    return ClustersStage().whole(run.in_call())


class ClustersStage:
    name = "clusters"

    def run(self, run, engine) -> ClustersInfo:
        run.work.stage_dir("clusters", fresh=True)
        verified = run.info("pairs").verified_pairs
        info = ClustersInfo()
        if verified:
            parts = engine.partitions(verified * EDGE_BYTES)
            if parts == 1:
                with bar("clusters", total=verified, unit="verified pair", quiet=run.quiet) as progress:
                    info = self.whole(run)
                    progress.update(verified)
            elif engine.one_call(verified * EDGE_BYTES):  # the same path, in a task
                with bar("clusters", total=verified, unit="verified pair", quiet=run.quiet) as progress:
                    info, = engine.collect(engine.map(partial(whole_call, run=run.for_call(engine)), [0]))
                    progress.update(verified)
            else:
                info = self.by_components(run, engine, parts)
        return self.finish(run, info, engine)

    def whole(self, run) -> ClustersInfo:
        """Every verified pair as one partition, in this process, Arrow's allocations (the pairs
        read, the members' ids taken, the members file written, in four threads) by the system
        allocator (:func:`~neardup.kernels.arrays.system_pool`): glibc's malloc takes them from
        what the read stage freed and it keeps (:func:`neardup.stages.read.tune_malloc`), where
        Arrow's default pool (mimalloc, whose memory the kernel backs with transparent huge
        pages) faulted fresh ones in, 2 MB zeroed each. 1M documents, whole runs, 8 pairs under
        load 5: the stage's CPU 75 -> 40 ms (system time 42 -> 6), its minor faults 468 -> 224,
        its seconds 0.077 -> 0.040; the stage alone, resumed (no freed memory to reuse), not
        slower (CPU 51 -> 46 ms)."""
        with system_pool():
            return self._whole(run)

    def _whole(self, run) -> ClustersInfo:
        cfg, store = run.config, run.store
        # the blocks' files opened ahead (a local work dir): from the pair stage's end (:func:`load_ahead`),
        # else from now, while the pairs are read and their documents found
        opened = store.opened_blocks(member_columns(cfg), run.user_ids_wanted())
        pairs = _pairs_table(run.work.folder, run.work.parts("pairs"))
        left, right = column(pairs, "left"), column(pairs, "right")
        # the members' columns and ids gathered block by block (not the whole corpus's first),
        # from as soon as the members are known (while their positions are found) and while the
        # selection is made
        gathering: List[Callable[[], Columns]] = []
        docs, positions = members_of(left, right, run.corpus.n, lambda docs: gathering.append(
            in_thread(MemberColumns(store, docs, member_columns(cfg), run.user_ids_wanted(), opened))))
        columns = gathering[0]
        _, counts = select_partition(docs, columns, left, right, to_numpy(pairs.column("similarity").combine_chunks()),
                                     cfg, run.sources, positions, members_writer(run.work.folder, part_name("clusters", 0)),
                                     store.arrow_takes)
        return ClustersInfo(**counts)

    def by_components(self, run, engine, parts: int) -> ClustersInfo:
        """The components first (star steps, a round of two shuffles on the node each), then the
        selection over partitions of whole components."""
        work = run.work.folder
        pairs = engine.map(work.read_table, run.work.parts("pairs"))
        edges = engine.map(pair_edges, pairs)
        with bar("clusters", total=None, unit="round", quiet=run.quiet) as progress:
            for rounds in range(1, MAX_CC_ROUNDS + 1):
                check_interrupt()
                nodes = engine.shuffle(engine.map(partial(node_rows, both=True), edges), "node", parts)
                stars = engine.persist(engine.map(partial(large_star_partition, work=work, round=rounds), nodes))
                progress.update(1)
                if not sum(s.nonstar for s in run.work.records("clusters", f"star-{rounds:03d}-", StarStep)):
                    break
                edges = engine.map(small_star_partition,
                                   engine.shuffle(engine.map(partial(node_rows, both=False), stars), "node", parts))
            else:
                raise RuntimeError("internal error: connected components did not converge; please report this bug")
        rows = engine.shuffle([engine.map(label_rows, stars), engine.map(pair_rows, pairs)], "doc", parts)
        task = run.task(engine)
        counts = engine.collect(engine.map(partial(select_components, task=task, with_ids=run.user_ids_wanted()),
                                           engine.shuffle(engine.map(relabel, rows), "label", parts)))
        return ClustersInfo(**merge_counts(counts), cc_rounds=rounds)

    def finish(self, run, info: ClustersInfo, engine) -> ClustersInfo:
        """The documents an index holds (``--against``) join the members, removed: a call per
        block writes its own (``clusters/part-against-BBBBBB.arrow``); the driver gets counts."""
        if not run.config.against:
            return info
        task = run.task(engine)
        blocks = list(range(len(run.corpus.block_start) - 1))
        matched = sum(engine.collect(engine.map(partial(against_members, task=task, with_ids=run.user_ids_wanted()),
                                                blocks))) if blocks else 0
        return dataclasses.replace(info, removed=info.removed + matched, removed_against_index=matched)


def against_members(block: int, *, task, with_ids: bool) -> int:
    """One block's documents an index holds, as removed members (written when there are any)."""
    members = matched_members(task.work, task.store, with_ids, task.sources, blocks=[block])
    if members.num_rows:
        task.work.write_arrow(f"clusters/part-against-{block:06d}.arrow", members)
    return members.num_rows


def members_of(left: np.ndarray, right: np.ndarray, n: int,
               found: Optional[Callable[[np.ndarray], None]] = None) -> Tuple[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
    """The documents of the pairs, ascending, and the positions of ``left`` and ``right`` among
    them: by a mark per document of the corpus (``n`` of them; O(n + pairs), where sorting the
    pairs' documents and searching them took O(pairs log pairs)), then each document's position
    written at its index (the members' entries only: a running count over all ``n`` cost 3x more),
    of that index's type (int32 up to 2**31 members: what the selection's kernel takes, not copied).
    ``found(docs)``: called with the documents before their positions are found (the clusters
    stage starts gathering their columns there)."""
    seen = np.zeros(n, dtype=np.bool_)
    seen[left] = True
    seen[right] = True
    docs = np.flatnonzero(seen)
    if found is not None:
        found(docs)
    at = np.empty(n, dtype=np.int32 if len(docs) < 2 ** 31 else np.int64)  # only the members' entries are read
    at[docs] = np.arange(len(docs), dtype=at.dtype)
    return docs, (at[left], at[right])


def _pairs_table(work, names: List[str]) -> pa.Table:
    return pa.concat_tables([work.read_table(name) for name in names] or [empty_table(PAIRS_SCHEMA)])


EDGE_SCHEMA = pa.schema([("hi", pa.int64()), ("lo", pa.int64())])
EDGE_BYTES = 48  # bytes an edge takes in a shuffle of the components (both directions, two int64 each)
LABEL_SCHEMA = pa.schema([("kind", pa.int8()), ("doc", pa.int64()), ("label", pa.int64()), ("right", pa.int64()),
                          ("similarity", pa.float64())])  # kind 0: a document's label; 1: a pair (doc = left)


def _edges(hi: np.ndarray, lo: np.ndarray) -> pa.Table:
    return pa.table({"hi": arrow(hi), "lo": arrow(lo)}, schema=EDGE_SCHEMA)


def pair_edges(pairs: pa.Table) -> pa.Table:
    return _edges(column(pairs, "right"), column(pairs, "left"))


def node_rows(edges: pa.Table, *, both: bool) -> pa.Table:
    """(node, neighbour) rows of edges (both directions, or from hi only), to shuffle on the node."""
    hi, lo = column(edges, "hi"), column(edges, "lo")
    node, nbr = (np.concatenate([hi, lo]), np.concatenate([lo, hi])) if both else (hi, lo)
    return pa.table({"node": arrow(node), "nbr": arrow(nbr)})


def large_star_partition(table: pa.Table, *, work, round: int) -> pa.Table:
    """One partition's large-star step: its new edges; how many of its nodes are not yet in a
    star is written beside (``clusters/star-RRR-PPPPP.json``), for the driver to see whether the
    components converged."""
    from ..kernels.components import large_star
    hi, lo, nonstar = large_star(column(table, "node"), column(table, "nbr"))
    if table.num_rows:
        part = int(column(table, "part")[0])
        write_record(work, f"clusters/star-{round:03d}-{part:05d}.json", StarStep(nonstar=nonstar))
    return _edges(hi, lo)


def small_star_partition(table: pa.Table) -> pa.Table:
    from ..kernels.components import small_star
    return _edges(*small_star(column(table, "node"), column(table, "nbr")))


def label_rows(edges: pa.Table) -> pa.Table:
    """Converged stars -> a label row (kind 0) for each document of a component."""
    from ..kernels.components import star_labels
    doc, label = star_labels(column(edges, "hi"), column(edges, "lo"))
    n = len(doc)
    return pa.table({"kind": arrow(np.zeros(n, np.int8)), "doc": arrow(doc), "label": arrow(label),
                     "right": arrow(np.full(n, -1, np.int64)), "similarity": arrow(np.zeros(n))}, schema=LABEL_SCHEMA)


def pair_rows(pairs: pa.Table) -> pa.Table:
    """A pair row (kind 1) for each verified pair, keyed by its left document."""
    n = pairs.num_rows
    return pa.table({"kind": arrow(np.ones(n, np.int8)), "doc": arrow(column(pairs, "left")),
                     "label": arrow(np.full(n, -1, np.int64)), "right": arrow(column(pairs, "right")),
                     "similarity": arrow(column(pairs, "similarity", np.float64))}, schema=LABEL_SCHEMA)


def relabel(table: pa.Table) -> pa.Table:
    """One partition of documents: each pair gets the label of its left document."""
    table = table.select(LABEL_SCHEMA.names)
    kind, doc, label = column(table, "kind", np.int8), column(table, "doc"), column(table, "label")
    is_label = kind == 0
    ldoc, first = np.unique(doc[is_label], return_index=True)
    labels = label.copy()
    labels[~is_label] = label[is_label][first][np.searchsorted(ldoc, doc[~is_label])]
    return table.set_column(2, "label", arrow(labels))


def select_components(table: pa.Table, *, task, with_ids: bool) -> dict:
    """One partition of whole components: the selection, written as its members file."""
    if table.num_rows == 0:
        return merge_counts([])
    kind = column(table, "kind", np.int8)
    docs = unique(column(table, "doc")[kind == 0])
    pairs = table.filter(arrow(kind == 1))
    cfg, store = task.config, task.store
    columns = in_thread(MemberColumns(store, docs, member_columns(cfg), with_ids))
    _, counts = select_partition(docs, columns, column(pairs, "doc"), column(pairs, "right"),
                                 column(pairs, "similarity", np.float64), cfg, task.sources, None,
                                 members_writer(task.work, part_name("clusters", int(column(table, "part")[0]))),
                                 store.arrow_takes)
    return counts
