"""Stage ``pairs``: buckets -> verified pairs, one partition at a time.

A partition is a set of buckets (runs of documents sharing a key in one band, formed by
:func:`neardup.kernels.bands.bucket_runs`). When the engine wants one partition, it is every bucket of
the corpus, formed from the band keys a few bands at a time (:meth:`PairsStage.whole`). Otherwise
the (band, key, doc) rows of every block are shuffled on the key (:func:`band_rows`), each
partition forms its buckets (:func:`form_buckets`), the buckets are shuffled on their anchor (so
that the buckets of a group of near-duplicates sharing several bands are searched together and
their common pairs verified once), searched (:func:`search_buckets`), and the checked pairs
shuffled on the pair (:func:`distinct_partition`). Either way each partition is searched by
:func:`neardup.kernels.bands.find_pairs` (members in keep order, star pairs on the anchor,
verification, re-anchoring of the members that failed): one partition writes its verified pairs
as they are (distinct already); many go through :func:`search_partition`, and the checked pairs
through :func:`distinct_pairs` (a pair met in two partitions is verified in each, with the same
result).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow, empty_table, to_numpy
from ..progress import bar, check_interrupt
from .clusters import compute_ahead, load_ahead, start_ahead
from .corpus import DocStore, column, fixed_binary_numpy
from .records import PairsInfo
from .workdir import PAIRS_SCHEMA, part_name, write_record

VERIFY_CHUNK = 1 << 16  # pairs verified at a time (verify estimate | none: bounds the signatures held; exact: Ctrl-C heard)
VERIFY_BYTES = 256 << 20  # bytes of fingerprint codes held (copied) or of the blocks' code files mapped at a time (verify exact)
# a local work dir's codes read in place while that maps its code files at most this many times over: a
# pass over them cost ~0.08 CPU-s per GB of files in page faults, and the kernel reads mapped pages a
# little slower; copying cost ~0.7-0.9 CPU-s per GB of codes (40 % of the files at 1M) and its buffer
# (1M: 35 blocks, 3 passes, in place; 2M: ~5.5; 10M: ~25, copied)
IN_PLACE_PASSES = 4

CHECKED_SCHEMA = pa.schema([("code", pa.uint64()), ("passed", pa.bool_()), ("similarity", pa.float64())])


def make_verifier(store: DocStore, config) -> Callable[[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]]:
    """verify(left, right) -> (passed, similarity) over document indices, for the configured
    mode; the data of the pairs' documents is read from the store a chunk of pairs at a time.
    Exact, on a local work dir of few blocks: the codes read where they lie, in the blocks'
    memory-mapped files, a window of them at a time (:func:`block_windows`: at 1M documents,
    0.3-0.5 CPU-s less than copying them, the copy's buffer of ~256 MB made and its pages zeroed);
    else copied in chunks of whole groups of connected pairs (:func:`locality_chunks`), so that a
    document's codes are read once."""
    from ..kernels.verify import estimated_jaccard
    threshold = config.threshold

    def verify(left, right):
        sim = np.empty(len(left), dtype=np.float64)
        if config.verify == "exact":
            if not (store.work.os_path is not None and verify_in_place(store, left, right, sim)):
                verify_copied(store, left, right, sim)
        else:
            for lo in range(0, len(left), VERIFY_CHUNK):
                check_interrupt()
                hi = min(lo + VERIFY_CHUNK, len(left))
                docs, inverse = np.unique(np.concatenate([left[lo:hi], right[lo:hi]]), return_inverse=True)
                m = hi - lo
                sim[lo:hi] = estimated_jaccard(store.signatures(docs), inverse[:m], inverse[m:])
        if config.verify == "none":  # every candidate pair is a duplicate; the estimate is reported
            return np.ones(len(left), dtype=bool), sim
        return sim >= threshold, sim

    return verify


def verify_in_place(store: DocStore, left: np.ndarray, right: np.ndarray, out: np.ndarray) -> bool:
    """The exact similarity of each pair into ``out``, read from a local work dir's code files
    where they lie, in the steps of :func:`block_windows` (the files of one step mapped, the
    others' maps closed: at a time, no more bytes of them than the codes wanted, which a copy
    would hold, and VERIFY_BYTES at most; two blocks at the least); False, ``out`` untouched,
    when the steps would map the files too many times over."""
    from ..kernels.eliasfano import code_bytes
    from ..kernels.verify import exact_jaccard_coded
    m = len(left)
    docs, inverse = dense_unique(np.concatenate([left, right]))
    block, starts, counts, sizes = store.code_places(docs)
    budget = min(VERIFY_BYTES, int(code_bytes(counts).sum()))  # 100k documents: 47 MB of codes in 120 MB of files
    steps = block_windows(block[inverse[:m]], block[inverse[m:]], sizes, budget)
    if steps is None:
        return False
    maps = {}
    nothing = np.zeros(0, np.uint8)
    for blocks, sel in steps:
        for b in [b for b in maps if b not in blocks]:
            del maps[b]  # closed: its pages leave the resident set
        maps.update((b, store.code_map(b)) for b in blocks if b not in maps)
        data = [maps.get(b, nothing) for b in range(max(sizes) + 1)]
        for lo in range(0, len(sel), VERIFY_CHUNK):
            check_interrupt()
            part = sel[lo:lo + VERIFY_CHUNK]
            out[part] = exact_jaccard_coded(starts, data, counts, inverse[part], inverse[m + part], block=block)
        del data
    return True


# the lookup's documents at most this many times the ids: its 9 bytes a document stay within
# what np.unique's sort of the ids takes (~30 bytes an id), whatever the corpus's size
DENSE_SPAN = 4


def dense_unique(ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``np.unique(ids, return_inverse=True)`` of document indices (>= 0), by a lookup over the
    documents up to the largest instead of a sort: at 1M documents (534k ids), half the time.
    Sorted as numpy does where the largest id is over :data:`DENSE_SPAN` times their number (a
    few pairs of a large corpus: the lookup would be the corpus's size)."""
    if len(ids) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = int(ids.max()) + 1
    if span > DENSE_SPAN * len(ids):
        docs, inverse = np.unique(ids, return_inverse=True)
        return docs.astype(np.int64, copy=False), inverse.astype(np.int64, copy=False).reshape(-1)
    present = np.zeros(span, bool)
    present[ids] = True
    docs = np.flatnonzero(present)
    place = np.empty(len(present), np.int64)
    place[docs] = np.arange(len(docs))
    return docs, place[ids]


def verify_copied(store: DocStore, left: np.ndarray, right: np.ndarray, out: np.ndarray) -> None:
    """The exact similarity of each pair into ``out``, the codes copied out of the store a chunk
    at a time (:func:`locality_chunks`)."""
    from ..kernels.verify import exact_jaccard_coded
    room = [None]  # the largest chunk's code buffer so far, reused by the next chunk
    for sel in locality_chunks(store, left, right):
        check_interrupt()
        m = len(sel)
        docs, inverse = np.unique(np.concatenate([left[sel], right[sel]]), return_inverse=True)
        starts, data, counts = store.codes(docs, room)
        out[sel] = exact_jaccard_coded(starts, data, counts, inverse[:m], inverse[m:])
        del starts, data, counts  # before the next chunk's are read: one chunk's held (in the room)


def block_windows(first: np.ndarray, second: np.ndarray, sizes: Dict[int, int],
                  budget: Optional[int] = None) -> Optional[List[Tuple[List[int], np.ndarray]]]:
    """Pairs of documents lying in the blocks ``first[i]`` and ``second[i]``, whose code files
    take ``sizes[block]`` bytes, in steps ``(blocks, pairs)`` whose files take at most ``budget``
    bytes together (default VERIFY_BYTES; two blocks when two are larger), so that the codes are
    read where they lie with no more than that of them mapped. The blocks, in order, form groups
    taking up to ``budget`` less the largest block; for each group, a step of the pairs between it
    and each later block (the group's blocks kept mapped through its steps, the later block mapped
    for its step alone); the pairs inside a group go with the first step that maps its blocks
    (:func:`_inside_pairs_joined`), or make a step of their own. None when the steps would map the files
    more than IN_PLACE_PASSES times over (the later blocks are mapped once for each group before
    them: with many blocks, copying the codes is cheaper, :func:`locality_chunks`)."""
    if len(first) == 0:
        return []
    budget = VERIFY_BYTES if budget is None else budget
    present = sorted(sizes)
    room = budget - max(sizes.values())
    group_of = np.zeros(present[-1] + 1, np.int64)
    members: List[List[int]] = [[]]
    held = 0
    for b in present:
        if members[-1] and held + sizes[b] > room:
            members.append([])
            held = 0
        members[-1].append(b)
        group_of[b] = len(members) - 1
        held += sizes[b]
    low, high = np.minimum(first, second), np.maximum(first, second)
    group = group_of[low]
    later = np.where(group_of[high] == group, -1, high)  # the later block of a pair between groups, or -1
    key = group * (len(group_of) + 1) + later + 1
    # numpy's stable sort of 16-bit keys is a radix sort (1M documents, 35 blocks: 0.017 -> 0.003 CPU-s)
    order = np.argsort(key.astype(np.uint16) if key.max() < 1 << 16 else key, kind="stable")
    bounds = np.flatnonzero(np.diff(key[order])) + 1
    steps = []
    inside = []  # the steps of the pairs inside a group
    mapped = sum(sizes.values())  # each group's files mapped once, each later block's once per step
    for sel in np.split(order, bounds):
        g, b = int(group[sel[0]]), int(later[sel[0]])
        steps.append((members[g] + ([b] if b >= 0 else []), sel))
        mapped += sizes[b] if b >= 0 else 0
        if b < 0:
            inside.append(len(steps) - 1)
    if mapped > IN_PLACE_PASSES * sum(sizes.values()):
        return None
    return _inside_pairs_joined(steps, inside)


def _inside_pairs_joined(steps: List[Tuple[List[int], np.ndarray]], inside: List[int]
                         ) -> List[Tuple[List[int], np.ndarray]]:
    """``steps`` with the pairs of each step of ``inside`` (a group's own pairs) moved into the
    first step between groups that maps every block of that group (an earlier group's step with
    a one-block group's block, else the group's first step with a later block), where there is
    one: the same files mapped at a time, one kernel call fewer each (100k documents, 4 blocks
    of one group each: 6 steps instead of 10)."""
    steps = list(steps)
    joined = set()
    for i in inside:
        blocks = set(steps[i][0])
        host = next((j for j, (bl, _) in enumerate(steps) if j not in inside and blocks.issubset(bl)), None)
        if host is not None:
            steps[host] = (steps[host][0], np.concatenate((steps[host][1], steps[i][1])))
            joined.add(i)
    return [step for i, step in enumerate(steps) if i not in joined]


def locality_chunks(store: DocStore, left: np.ndarray, right: np.ndarray, budget: Optional[int] = None):
    """The pairs (indices into left, right) in chunks whose documents' codes take about
    ``budget`` bytes (default VERIFY_BYTES): all at once when they fit; else whole connected
    components of the pairs (a near-duplicate group and its chance partners) one after another,
    so that each document is read in one chunk, a component larger than the budget cut into
    pieces of VERIFY_CHUNK pairs.
    Reading a chunk costs a pass over the blocks' codes (nearby documents are read together): a
    chunk of pairs in code order would make every chunk a pass over the whole corpus."""
    from ..kernels.components import connected_components
    from ..kernels.eliasfano import code_bytes
    m = len(left)
    if m == 0:
        return []
    budget = VERIFY_BYTES if budget is None else budget
    docs, inverse = np.unique(np.concatenate([left, right]), return_inverse=True)
    size = code_bytes(store.columns(docs, ["count"])["count"].astype(np.int64))
    if int(size.sum()) <= budget:
        return [np.arange(m)]
    label = connected_components(len(docs), inverse[:m], inverse[m:])
    comp_bytes = np.bincount(label, weights=size, minlength=len(docs))
    order = np.argsort(label[inverse[:m]], kind="stable")
    pair_label = label[inverse[:m]][order]
    firsts = np.flatnonzero(np.concatenate(([True], pair_label[1:] != pair_label[:-1])))
    ends = np.append(firsts[1:], m)
    held = comp_bytes[pair_label[firsts]]
    big = held > budget
    small = np.flatnonzero(~big)
    # the components that fit, in order, cut where their running bytes pass a multiple of the budget
    chunk_of = np.zeros(len(firsts), np.int64)
    chunk_of[small] = (np.cumsum(held[small]) - held[small]) // budget
    pair_chunk = np.repeat(chunk_of, ends - firsts)
    keep = np.repeat(~big, ends - firsts)
    cuts = np.flatnonzero(np.diff(pair_chunk[keep])) + 1
    chunks = [c for c in np.split(order[keep], cuts) if len(c)]
    for a, b in zip(firsts[big].tolist(), ends[big].tolist()):
        chunks.extend(order[lo:min(lo + VERIFY_CHUNK, b)] for lo in range(a, b, VERIFY_CHUNK))
    return chunks


def keep_rank(docs: np.ndarray, store: DocStore, config) -> np.ndarray:
    """The keep order (0 = kept first) of ascending ``docs``; among the corpus' documents it orders
    them as the rank of the whole corpus does, so partitions agree with one global sort."""
    from ..kernels.components import keep_order
    columns = (["length"] if config.keep == "longest" else []) + (["score"] if config.score_column else [])
    values = store.columns(docs, columns) if columns else {}
    return keep_order(len(docs), config.keep, lengths=values.get("length"), scores=values.get("score"))


def search_partition(run_offsets: np.ndarray, members: np.ndarray, verify, config) -> Tuple[pa.Table, PairsInfo]:
    """Buckets (``members[run_offsets[i]:run_offsets[i+1]]``, document indices in keep order)
    -> every distinct pair checked (code, passed, similarity) and what the search did."""
    from ..kernels.bands import find_pairs, pair_codes
    checked = []

    def recording(left, right):
        passed, sim = verify(left, right)
        checked.append((pair_codes(left, right), np.asarray(passed, bool), np.asarray(sim, np.float64)))
        return passed, sim

    search = find_pairs(run_offsets, members, recording, max_rounds=config.max_anchor_rounds)
    if checked:
        codes, passed, sim = (np.concatenate(x) for x in zip(*checked))
    else:
        codes, passed, sim = np.zeros(0, np.uint64), np.zeros(0, bool), np.zeros(0, np.float64)
    table = pa.table({"code": arrow(codes), "passed": arrow(passed), "similarity": arrow(sim)},
                     schema=CHECKED_SCHEMA)
    return table, search_counts(search, verifications=len(codes))


def search_counts(search, **more) -> PairsInfo:
    """What a partition's search (:func:`neardup.kernels.bands.find_pairs`) did, as the stage
    counts it, with ``more`` of the counts the caller knows."""
    return PairsInfo(buckets=search.buckets, anchor_rounds=search.rounds,
                     truncated_buckets=search.truncated_buckets, **more)


def distinct_pairs(checked: pa.Table) -> Tuple[pa.Table, int]:
    """Checked pairs of one pair-code partition -> (verified pairs in PAIRS_SCHEMA order of
    (left, right), distinct candidate pairs)."""
    from ..kernels.bands import split_codes
    codes = to_numpy(checked.column("code"))
    passed = to_numpy(checked.column("passed"))
    sim = to_numpy(checked.column("similarity"))
    uniq, first = np.unique(codes, return_index=True)
    keep = passed[first]
    left, right = split_codes(uniq[keep])
    return pairs_table(left, right, sim[first][keep]), int(len(uniq))


def pairs_table(left, right, similarity) -> pa.Table:
    """PAIRS_SCHEMA rows of numpy arrays, of its types as built (``Table.cast`` imports
    pyarrow.compute: issue 32)."""
    return pa.table([arrow(np.asarray(left, np.int64)), arrow(np.asarray(right, np.int64)),
                     arrow(np.asarray(similarity, np.float64))], schema=PAIRS_SCHEMA)


# --------------------------------------------------------------------------- the stage

BUCKET_BITS = 40  # a bucket's id: its band-key partition << 40 | its ordinal there
# bytes a partition holds per eligible document, to choose how many partitions a shuffle gets:
BAND_ROW_BYTES = 24        # one (band int32, key uint64, doc int64) row for each of its bands
CHECKED_EXACT_BYTES = 2400  # the pairs checked for it, with its shingle fingerprints read (verify exact)


class PairsStage:
    name = "pairs"

    def run(self, run, engine) -> PairsInfo:
        cfg = run.config
        run.work.stage_dir("pairs", fresh=True)
        excluded = run.excluded_from_pairs()
        eligible = run.corpus.n - len(excluded)
        if eligible < 2:
            return PairsInfo()
        parts = engine.partitions(eligible * cfg.bands * BAND_ROW_BYTES)
        compute_ahead(engine, eligible, run.store)  # for the clusters stage's takes by Arrow, beside this stage's kernels
        with bar("candidates + verify", total=1, unit="step", quiet=run.quiet) as progress:
            if parts == 1:
                # the clusters stage's files opened once the candidates are found, beside the verification's kernels
                results = [self.whole(run, excluded, partial(start_ahead, run, engine, eligible))]
            elif engine.one_call(eligible * cfg.bands * BAND_ROW_BYTES):  # the same path, in a task
                results = engine.collect(engine.map(partial(whole_call, run=run.for_call(engine), excluded=excluded),
                                                    [0]))
            else:
                task = run.task(engine)
                rows = engine.map(partial(band_rows, task=task, excluded=excluded), range(len(run.corpus.blocks)))
                buckets = engine.map(partial(form_buckets, task=task), engine.shuffle(rows, "key", parts))
                pair_parts = engine.partitions(eligible * (CHECKED_EXACT_BYTES if cfg.verify == "exact"
                                                           else 4 * cfg.num_perm))
                checked = engine.map(partial(search_buckets, task=task), engine.shuffle(buckets, "anchor", pair_parts))
                results = engine.collect(engine.map(partial(distinct_partition, task=task),
                                                    engine.shuffle(checked, "code", pair_parts)))
                results += run.work.records("pairs", "search-", PairsInfo)  # each search's counts
            progress.update(1)
        info = PairsInfo.merge(results)
        load_ahead(run, engine, info.verified_pairs)  # the clusters stage's kernel (and files), beside the stages' switch
        return info

    def whole(self, run, excluded: np.ndarray, verifying: Optional[Callable[[], object]] = None) -> PairsInfo:
        """Every bucket of the corpus as one partition, in this process: the band keys are read
        where they lie, or a few bands at a time (:func:`neardup.kernels.bands.bucket_runs`), never as rows.
        ``verifying``: called once the candidates are found, before they are verified
        (:func:`neardup.stages.clusters.start_ahead`)."""
        from ..kernels.bands import bucket_runs, find_pairs
        from ..kernels.components import keep_order
        cfg, corpus = run.config, run.corpus
        eligible = corpus.column("count") > 0
        run.store.hold_counts(corpus.column("count"))  # the codes' places found without the blocks' files
        eligible[excluded] = False
        rank = keep_order(corpus.n, cfg.keep, lengths=corpus.column("length") if cfg.keep == "longest" else None,
                          scores=corpus.column("score") if cfg.score_column else None)
        # a local work dir's keys read where they lie (its blocks' memory-mapped files); a remote one's a few bands at a time
        keys = corpus.key_parts() if run.work.folder.os_path is not None else corpus.band_keys
        offsets, members = bucket_runs(keys, eligible, rank=rank, bands=cfg.bands)
        del keys  # the key maps closed before the codes are mapped
        if verifying is not None:  # (the search's kernels hold no GIL)
            verifying()
        search = find_pairs(offsets, members, make_verifier(run.store, cfg), max_rounds=cfg.max_anchor_rounds)
        # the search's own verified pairs, distinct and in code order: as distinct_pairs would give
        # them from its checks (the pairs' codes made again, sorted again: ~0.02 CPU-s at 1M)
        pairs = pairs_table(search.left, search.right, search.similarity)
        run.work.folder.write_arrow(part_name("pairs", 0), pairs)
        return search_counts(search, candidate_pairs=search.candidate_pairs, verified_pairs=pairs.num_rows,
                             verifications=search.candidate_pairs)


def whole_call(_item, *, run, excluded: np.ndarray) -> PairsInfo:
    """:meth:`PairsStage.whole` as one call of an engine (a task with every core of a node)."""
    return PairsStage().whole(run.in_call(), excluded)


def band_rows(block: int, *, task, excluded: np.ndarray) -> pa.Table:
    """One row (band, key, doc) per band of every eligible document of a block."""
    store, bands = task.store, task.config.bands
    t = store.table(block, ["count", "keys"])
    doc = np.arange(store.block_start[block], store.block_start[block + 1], dtype=np.int64)
    ok = to_numpy(t.column("count").combine_chunks()) > 0
    if len(excluded):
        ok &= ~np.isin(doc, excluded)
    keys = fixed_binary_numpy(t.column("keys"), np.uint64, bands)[ok]
    doc = doc[ok]
    return pa.table({"band": arrow(np.tile(np.arange(bands, dtype=np.int32), len(doc))),
                     "key": arrow(keys.reshape(-1)), "doc": arrow(np.repeat(doc, bands))})


def form_buckets(table: pa.Table, *, task) -> pa.Table:
    """One partition of band rows (every row of a bucket is here) -> (bucket, doc, anchor) of
    every bucket of two or more, members in keep order, anchor the first of them."""
    from ..kernels.bands import bucket_runs_of_rows
    if table.num_rows == 0:
        return pa.table({"bucket": arrow([], pa.int64()), "doc": arrow([], pa.int64()), "anchor": arrow([], pa.int64())})
    doc = column(table, "doc", np.int64)
    docs, inverse = np.unique(doc, return_inverse=True)
    rank = keep_rank(docs, task.store, task.config)[inverse]
    offsets, members = bucket_runs_of_rows(column(table, "band", np.int32), column(table, "key", np.uint64), doc, rank)
    sizes = np.diff(offsets)
    ids = (np.int64(column(table, "part", np.int64)[0]) << np.int64(BUCKET_BITS)) + np.arange(len(sizes), dtype=np.int64)
    return pa.table({"bucket": arrow(np.repeat(ids, sizes)), "doc": arrow(members),
                     "anchor": arrow(np.repeat(members[offsets[:-1]], sizes))})


def search_buckets(table: pa.Table, *, task) -> pa.Table:
    """One partition of whole buckets -> every pair checked (code, passed, similarity); what the
    search did is written beside, as ``pairs/search-PPPPP.json`` (:class:`.records.PairsInfo`)."""
    if table.num_rows == 0:
        return empty_table(CHECKED_SCHEMA)
    bucket, doc = column(table, "bucket", np.int64), column(table, "doc", np.int64)
    docs, inverse = np.unique(doc, return_inverse=True)
    order = np.lexsort((keep_rank(docs, task.store, task.config)[inverse], bucket))
    starts = np.flatnonzero(np.concatenate(([True], bucket[order][1:] != bucket[order][:-1])))
    offsets = np.append(starts, len(order)).astype(np.int64)
    checked, counts = search_partition(offsets, doc[order], make_verifier(task.store, task.config), task.config)
    part = int(column(table, "part", np.int64)[0])
    write_record(task.work, f"pairs/search-{part:05d}.json", counts)
    return checked


def distinct_partition(table: pa.Table, *, task) -> PairsInfo:
    """One partition of checked pairs (every check of a pair is here): the verified pairs
    written as its pairs file; its counts."""
    if table.num_rows == 0:
        return PairsInfo()
    checked = table.select(CHECKED_SCHEMA.names)
    if checked.schema != CHECKED_SCHEMA:
        checked = checked.cast(CHECKED_SCHEMA)
    pairs, candidates = distinct_pairs(checked)
    if pairs.num_rows:
        part = int(column(table, "part", np.int64)[0])
        task.work.write_arrow(part_name("pairs", part), pairs)
    return PairsInfo(candidate_pairs=candidates, verified_pairs=pairs.num_rows)
