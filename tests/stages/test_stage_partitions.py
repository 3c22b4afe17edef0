"""The stages as units: each stage run on its own over a work dir, its partition functions called
directly, and the same work cut into P partitions by the local engine (the distributed path of
every stage, in one process, without Ray): the outputs are those of one partition, byte for byte."""

import itertools
import json
import os
from functools import partial

import numpy as np
import pyarrow as pa
import pytest

import neardup
from neardup import io as nio
from neardup.kernels.bands import bucket_runs
from neardup.config import Config
from neardup.engines.local import LocalEngine, LocalFrame
from neardup.kernels.hashing import partition_of
from neardup.io.storage.folder import Folder
from neardup.stages import Run
from neardup.stages.clusters import ClustersStage, in_thread
from neardup.stages.corpus import DocStore, MemberColumns, OpenedBlocks
from neardup.stages.workdir import WorkDir
from neardup.stages.pairs import PairsStage, band_rows, dense_unique, form_buckets
from neardup.stages.read import ReadStage

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "corpus.jsonl")


def _texts():
    return [json.loads(line)["text"] for line in open(EXAMPLE)]


@pytest.fixture
def corpus(tmp_path):
    """The example corpus in two files, with repeated ids (three of them) and a bad line."""
    texts = _texts()
    d = tmp_path / "in"
    d.mkdir()
    with open(d / "a.jsonl", "w") as f:
        for i, t in enumerate(texts[:170]):
            f.write(json.dumps({"id": f"d{i}" if i % 61 else "same", "text": t, "score": (i * 7919) % 101}) + "\n")
        f.write("{not json\n")
    with open(d / "b.jsonl", "w") as f:
        for i, t in enumerate(texts[170:]):
            f.write(json.dumps({"id": f"e{i}", "text": t, "score": i % 13}) + "\n")
    return d


def _files(folder):
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [x for x in dirs if not x.startswith(".neardup")]
        for name in files:
            if name.startswith(".neardup"):
                continue
            path = os.path.join(root, name)
            data = open(path, "rb").read()
            if name == "stats.json":
                stats = json.loads(data)
                stats.pop("seconds")
                data = json.dumps(stats, sort_keys=True).encode()
            out[os.path.relpath(path, folder)] = data
    return out


def _dedup(monkeypatch, partitions, inputs, output, **options):
    monkeypatch.setattr(LocalEngine, "partitions", lambda self, nbytes: partitions)
    options.setdefault("id_column", "")  # the corpus's id field repeats: positions unless a case names it
    neardup.dedup(inputs, output=str(output), quiet=True, **options)
    return _files(output)


CASES = {
    "default": dict(),
    "estimate-longest": dict(verify="estimate", keep="longest", threshold=0.6),
    "ids-skip-score": dict(id_column="id", on_error="skip", keep="score:score"),
    "char": dict(char_ngrams=True, ngram=6, threshold=0.7, on_error="skip"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_partitions_give_the_outputs_of_one_partition(monkeypatch, tmp_path, corpus, case):
    inputs = [str(corpus / "a.jsonl"), str(corpus / "b.jsonl")]
    options = dict(CASES[case])
    options.setdefault("on_error", "skip")
    one = _dedup(monkeypatch, 1, inputs, tmp_path / "one", **options)
    stats = json.loads(one["stats.json"])
    assert stats["counts"]["removed"] > 0
    for parts in (2, 7):
        assert _dedup(monkeypatch, parts, inputs, tmp_path / f"p{parts}", **options) == one


def test_partitions_against_an_index(monkeypatch, tmp_path, corpus):
    index = neardup.Index(str(tmp_path / "idx"), Config())
    texts = _texts()
    index.add(texts[:100], ids=[f"old{i}" for i in range(100)])
    index.close()
    inputs = [str(corpus / "b.jsonl"), str(corpus / "a.jsonl")]
    one = _dedup(monkeypatch, 1, inputs, tmp_path / "one", against=str(tmp_path / "idx"), on_error="skip")
    assert json.loads(one["stats.json"])["counts"]["removed_against_index"] > 0
    assert _dedup(monkeypatch, 3, inputs, tmp_path / "p3", against=str(tmp_path / "idx"), on_error="skip") == one


def test_local_shuffle_puts_every_row_in_the_partition_of_its_key():
    engine = LocalEngine(partitions=4)
    rng = np.random.default_rng(5)
    frame = LocalFrame(pa.table({"key": rng.integers(0, 1 << 62, n, dtype=np.int64), "v": np.arange(n) + 1000 * i})
                  for i, n in enumerate((0, 50, 300)))
    parts = engine.shuffle(frame, "key", 4)
    assert len(parts) == 4
    seen = []
    for p, table in enumerate(parts):
        assert set(table.column("part").to_pylist()) <= {p}
        keys = table.column("key").to_numpy()
        assert np.all(partition_of(keys, 4) == p)
        seen.extend(table.column("v").to_pylist())
    assert sorted(seen) == sorted(v for t in frame for v in t.column("v").to_pylist())


# --------------------------------------------------------------------------- stages run on their own


@pytest.fixture
def read_run(tmp_path, corpus):
    """A run whose read stage is done (its work dir kept), for the later stages on their own."""
    config = Config(on_error="skip", keep="longest").resolved()
    sources = nio.discover([str(corpus / "a.jsonl"), str(corpus / "b.jsonl")])
    work = WorkDir(str(tmp_path / "work"), "stage-test")
    run = Run(config=config, sources=sources, work=work, output=Folder.of(tmp_path / "out"), quiet=True)
    info = ReadStage().run(run, LocalEngine())
    work.mark_done("read", info)
    assert info.documents == 300 and info.rejected_records == 1
    return run


def _pairs_of(run):
    tables = [run.work.folder.read_table(p) for p in run.work.parts("pairs")]
    t = pa.concat_tables(tables)
    return sorted(zip(t.column("left").to_pylist(), t.column("right").to_pylist(), t.column("similarity").to_pylist()))


def test_pairs_stage_on_its_own_one_or_many_partitions(read_run):
    one = PairsStage().run(read_run, LocalEngine())
    pairs_one = _pairs_of(read_run)
    many = PairsStage().run(read_run, LocalEngine(partitions=5))
    assert len(read_run.work.parts("pairs")) > 1
    assert _pairs_of(read_run) == pairs_one and one.verified_pairs == len(pairs_one) > 0
    assert (many.candidate_pairs, many.verified_pairs, many.buckets) == \
        (one.candidate_pairs, one.verified_pairs, one.buckets)


def test_one_partition_writes_the_search_s_pairs_as_distinct_pairs_of_its_checks(read_run):
    """PairsStage.whole takes find_pairs' verified pairs and counts as they are: the same pairs file
    and counts as every pair checked (search_partition) made distinct (distinct_pairs)."""
    from neardup.kernels.components import keep_order
    from neardup.stages.pairs import distinct_pairs, make_verifier, search_partition
    from neardup.stages.records import PairsInfo
    from neardup.stages.workdir import PAIRS_SCHEMA
    run, cfg = read_run, read_run.config
    info = PairsStage().whole(run, run.excluded_from_pairs())
    (part,) = run.work.parts("pairs")
    got = run.work.folder.read_table(part)
    corpus = run.corpus
    rank = keep_order(corpus.n, cfg.keep, lengths=corpus.column("length"))
    offsets, members = bucket_runs(corpus.band_keys, corpus.column("count") > 0, rank=rank, bands=cfg.bands)
    checked, counts = search_partition(offsets, members, make_verifier(run.store, cfg), cfg)
    pairs, candidates = distinct_pairs(checked)
    assert got.equals(pairs.cast(PAIRS_SCHEMA)) and got.num_rows > 0
    assert info == PairsInfo.merge([counts, PairsInfo(candidate_pairs=candidates, verified_pairs=pairs.num_rows)])
    assert info.verifications == info.candidate_pairs > info.verified_pairs


def test_clusters_stage_on_its_own_one_or_many_partitions(read_run):
    read_run.work.mark_done("pairs", PairsStage().run(read_run, LocalEngine()))

    def members():
        t = pa.concat_tables([read_run.work.folder.read_table(p) for p in read_run.work.parts("clusters")]).sort_by("doc")
        return json.dumps(t.to_pylist())  # NaN similarities compare as text

    one = ClustersStage().run(read_run, LocalEngine())
    want = members()
    many = ClustersStage().run(read_run, LocalEngine(partitions=4))
    assert members() == want and one.removed > 0
    assert (many.members, many.removed, many.clusters, many.top) == (one.members, one.removed, one.clusters, one.top)
    assert many.cc_rounds >= 1


def test_form_buckets_called_directly(read_run):
    """One partition of band rows -> its buckets: (band, key) groups of two or more, members in
    keep order (longest first here), the anchor the first of them, ids unique to the partition."""
    task = read_run.task(LocalEngine())
    rows = pa.concat_tables([band_rows(b, task=task, excluded=np.zeros(0, np.int64))
                             for b in range(len(read_run.corpus.blocks))])
    rows = rows.append_column("part", pa.array(np.full(rows.num_rows, 3, np.int32)))
    out = form_buckets(rows, task=task)
    bucket, doc, anchor = (out.column(c).to_numpy() for c in ("bucket", "doc", "anchor"))
    assert np.all(bucket >> 40 == 3)
    corpus = read_run.corpus
    length = corpus.column("length")
    eligible = corpus.column("count") > 0
    rank = np.lexsort((np.arange(corpus.n), -length))
    keep_rank = np.empty(corpus.n, np.int64)
    keep_rank[rank] = np.arange(corpus.n)
    offsets, members = bucket_runs(corpus.band_keys, eligible, rank=keep_rank, bands=read_run.config.bands)
    want = [tuple(members[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    got = [tuple(doc[bucket == b]) for b in np.unique(bucket)]
    assert sorted(got) == sorted(want)
    for b in np.unique(bucket):
        assert np.all(anchor[bucket == b] == doc[bucket == b][0])


def test_a_partition_function_gets_the_task_not_the_run(read_run):
    """What a call gets is small and picklable: the config, the work dir's path, the store and
    the sources (an in-memory table as a handle)."""
    import pickle
    task = read_run.task(LocalEngine())
    assert len(pickle.dumps(partial(band_rows, task=task, excluded=np.zeros(0, np.int64)))) < 50_000


def test_verification_in_small_chunks_gives_the_same_pairs(read_run, monkeypatch):
    """Exact verification of a remote work dir in chunks of whole connected groups of pairs (a budget of a few
    documents' codes: many chunks, and groups larger than the budget cut by VERIFY_CHUNK) gives
    every pair the similarity of one chunk of all; every pair in exactly one chunk."""
    from neardup.kernels.verify import exact_jaccard_raw
    from neardup.stages import pairs as stage
    PairsStage().run(read_run, LocalEngine())
    want = _pairs_of(read_run)
    rng = np.random.default_rng(1)
    docs = np.flatnonzero(read_run.corpus.column("count") > 0)
    left = np.concatenate([[a for a, _, _ in want], rng.choice(docs, 30)]).astype(np.int64)
    right = np.concatenate([[b for _, b, _ in want], rng.choice(docs, 30)]).astype(np.int64)
    shuffle = rng.permutation(len(left))  # chunks not in the pairs' order
    left, right = left[shuffle], right[shuffle]
    chunks = stage.locality_chunks(read_run.store, left, right, budget=3000)
    assert len(chunks) > 3 and np.array_equal(np.sort(np.concatenate(chunks)), np.arange(len(left)))
    offsets, hashes = read_run.store.fingerprints(np.arange(read_run.corpus.n))
    expected = exact_jaccard_raw(offsets, hashes, left, right)
    monkeypatch.setattr(stage, "VERIFY_BYTES", 3000)
    monkeypatch.setattr(stage, "VERIFY_CHUNK", 7)
    with monkeypatch.context() as remote:  # the chunks are a remote work dir's (a local one's codes are read in place)
        remote.setattr(Folder, "os_path", property(lambda self: None))
        _, sim = stage.make_verifier(read_run.store, read_run.config)(left, right)
    assert np.array_equal(sim, expected)
    PairsStage().run(read_run, LocalEngine())
    assert _pairs_of(read_run) == want


@pytest.fixture
def two_block_run(tmp_path, corpus, monkeypatch):
    """A run whose read stage is done, one read block per input file (two blocks)."""
    from neardup.stages import workdir as wd
    monkeypatch.setattr(wd, "BLOCK_BYTES", 1)
    config = Config(on_error="skip").resolved()
    sources = nio.discover([str(corpus / "a.jsonl"), str(corpus / "b.jsonl")])
    work = WorkDir(str(tmp_path / "work"), "two-blocks")
    run = Run(config=config, sources=sources, work=work, output=Folder.of(tmp_path / "out"), quiet=True)
    work.mark_done("read", ReadStage().run(run, LocalEngine()))
    assert len(run.corpus.blocks) == 2
    return run


def test_codes_of_several_blocks_read_in_threads(two_block_run, monkeypatch):
    """DocStore.codes copies the local blocks' codes in threads, each into its own place: the
    codes decode to the fingerprints read block by block (DocStore.fingerprints). In a call
    given one core (numba's thread count 1, as in a 1-CPU Ray task) it copies in this thread."""
    from concurrent.futures import ThreadPoolExecutor

    from neardup.kernels import eliasfano
    from neardup.kernels.hashing import kernel_threads
    from neardup.stages import corpus as corpus_module
    run = two_block_run
    docs = np.flatnonzero(np.random.default_rng(3).random(run.corpus.n) < 0.7)
    pools = []

    def pool(n):
        pools.append(n)
        return ThreadPoolExecutor(n)

    monkeypatch.setattr(corpus_module, "ThreadPoolExecutor", pool)
    want_offsets, want = run.store.fingerprints(docs)
    for threads, expected_pools in ((2, [2]), (1, [])):
        pools.clear()
        with kernel_threads(threads):
            starts, data, counts = run.store.codes(docs)
        offsets, values = eliasfano.decode(starts, data, counts)
        assert np.array_equal(offsets, want_offsets) and np.array_equal(values, want)
        assert pools == expected_pools, threads
    # a room kept across calls: a smaller read is a view of it (its stale bytes past the end not
    # seen), a larger one replaces it, the codes the same either way
    room = [None]
    few = docs[: len(docs) // 3]
    few_offsets, few_values = run.store.fingerprints(few)
    for chunk, (wo, wv), grows in ((docs, (want_offsets, want), True), (few, (few_offsets, few_values), False),
                                   (docs, (want_offsets, want), False)):
        before = room[0]
        starts, data, counts = run.store.codes(chunk, room)
        assert (room[0] is not before) is grows and np.shares_memory(data, room[0])
        offsets, values = eliasfano.decode(starts, data, counts)
        assert np.array_equal(offsets, wo) and np.array_equal(values, wv)


def test_exact_verification_of_a_local_work_dir_reads_the_codes_in_place(two_block_run, monkeypatch):
    """A local work dir's codes are verified where they lie, in the blocks' memory-mapped .fp
    files (DocStore.code_map), never copied together (DocStore.codes): pairs within and across
    the two blocks get the Jaccard of their fingerprints, in chunks of VERIFY_CHUNK pairs; with a
    budget of one block's file, a step at a time maps no more than two blocks (the group's and a
    later one), each step's maps closed before the next's are made."""
    from neardup.kernels import verify as verify_kernels
    from neardup.kernels.verify import exact_jaccard_coded, exact_jaccard_raw
    from neardup.stages import corpus as corpus_module
    from neardup.stages import pairs as stage
    run, config = two_block_run, two_block_run.config
    PairsStage().run(run, LocalEngine())
    found = _pairs_of(run)  # near-duplicates, some across the blocks
    rng = np.random.default_rng(4)
    docs = np.flatnonzero(run.corpus.column("count") > 0)
    left = np.concatenate([[a for a, _, _ in found], rng.choice(docs, 400)]).astype(np.int64)
    right = np.concatenate([[b for _, b, _ in found], rng.choice(docs, 400)]).astype(np.int64)
    first_of_b = run.store.block_start[1]
    assert any(a < first_of_b <= b for a, b, _ in found)
    offsets, hashes = run.store.fingerprints(np.arange(run.corpus.n))
    expected = exact_jaccard_raw(offsets, hashes, left, right)

    def copied(*_args, **_kwargs):
        raise AssertionError("the codes were copied together")

    monkeypatch.setattr(corpus_module.DocStore, "codes", copied)
    monkeypatch.setattr(stage, "VERIFY_CHUNK", 64)
    passed, sim = stage.make_verifier(run.store, run.config)(left, right)
    assert np.array_equal(sim, expected) and np.array_equal(passed, expected >= config.threshold)
    assert passed[:len(found)].all()

    import weakref
    live, most = [], [0]
    code_map = corpus_module.DocStore.code_map

    def counted(self, block):
        mapped = code_map(self, block)
        live[:] = [r for r in live if r() is not None] + [weakref.ref(mapped)]
        most[0] = max(most[0], len(live))
        return mapped

    def kernel(*args, **kwargs):
        live[:] = [r for r in live if r() is not None]
        held.append(len(live))
        return exact_jaccard_coded(*args, **kwargs)

    held = []
    monkeypatch.setattr(corpus_module.DocStore, "code_map", counted)
    monkeypatch.setattr(verify_kernels, "exact_jaccard_coded", kernel)  # the pair stage takes it from there
    monkeypatch.setattr(stage, "VERIFY_BYTES", 1)  # groups of one block: one step (0, 1), each block's own pairs in it
    _, sim = stage.make_verifier(run.store, run.config)(left, right)
    assert np.array_equal(sim, expected) and most[0] == 2
    assert [n for n, _ in itertools.groupby(held)] == [2]
    # no pair across the blocks: steps (0) and (1), block 0's map closed before the second
    within = (left < first_of_b) == (right < first_of_b)
    held.clear()
    _, sim = stage.make_verifier(run.store, run.config)(left[within], right[within])
    assert np.array_equal(sim, expected[within]) and [n for n, _ in itertools.groupby(held)] == [1]
    assert len(held) >= 2 and within.sum() < len(within)

    # no more of the files mapped at a time than the codes wanted (a copy's buffer): a few documents'
    # codes take less than a block's file, so a block a group, as with the budget of one byte
    monkeypatch.undo()
    monkeypatch.setattr(corpus_module.DocStore, "code_map", counted)
    monkeypatch.setattr(verify_kernels, "exact_jaccard_coded", kernel)  # the pair stage takes it from there
    held.clear()
    a, b = docs[docs < first_of_b][:2], docs[docs >= first_of_b][:2]
    few_left, few_right = np.array([a[0], a[0], b[0]]), np.array([a[1], b[0], b[1]])
    _, sim = stage.make_verifier(run.store, run.config)(few_left, few_right)
    assert np.array_equal(sim, exact_jaccard_raw(offsets, hashes, few_left, few_right))
    assert held == [2]  # one step, one kernel call: each block's own pair goes with the pair across them


def test_pair_stage_reads_a_local_work_dir_in_place(two_block_run, monkeypatch):
    """On a local work dir the pair stage reads the band keys and the codes where they lie (the
    blocks' memory-mapped files: Corpus.key_parts, DocStore.code_map), never gathered or
    copied (Corpus.band_keys, DocStore.codes); the pairs are those of a remote work dir's path."""
    from neardup.stages import corpus as corpus_module
    run = two_block_run
    with monkeypatch.context() as remote:
        remote.setattr(Folder, "os_path", property(lambda self: None))
        PairsStage().run(run, LocalEngine())
    want = _pairs_of(run)

    def gathered(*_args, **_kwargs):
        raise AssertionError("read through a copy")

    monkeypatch.setattr(corpus_module.Corpus, "band_keys", gathered)
    monkeypatch.setattr(corpus_module.DocStore, "codes", gathered)
    PairsStage().run(run, LocalEngine())
    assert _pairs_of(run) == want and len(want) > 10


def test_pair_stage_places_the_codes_by_the_corpus_counts(two_block_run, monkeypatch):
    """The pair stage finds where each code lies from the count column the corpus holds
    (DocStore.hold_counts), no block's count column read again: the pairs are those found
    reading the blocks' counts; a store sent to a task does not carry the column."""
    import pickle

    from neardup.stages import corpus as corpus_module
    run = two_block_run
    with monkeypatch.context() as unheld:
        unheld.setattr(corpus_module.DocStore, "hold_counts", lambda self, counts: None)
        PairsStage().run(run, LocalEngine())
    want = _pairs_of(run)
    run._store = None  # a store that has read no block's counts
    table = corpus_module.DocStore.table

    def no_counts(self, block, columns, rows=None):
        assert "count" not in columns, "a block's count column read again"
        return table(self, block, columns, rows)

    monkeypatch.setattr(corpus_module.DocStore, "table", no_counts)
    PairsStage().run(run, LocalEngine())
    assert _pairs_of(run) == want and len(want) > 10
    assert pickle.loads(pickle.dumps(run.store))._counts is None


def test_block_windows_bound_the_files_mapped_and_take_every_pair_once(monkeypatch):
    """Pairs between blocks in steps whose blocks' files fit the budget: each pair in one step,
    the step's blocks holding both its documents; a group's blocks kept through its steps, then
    each later block with them for a step; None when the later blocks would be mapped too often."""
    from neardup.stages import pairs as stage
    rng = np.random.default_rng(5)
    sizes = {0: 30, 1: 30, 2: 25, 4: 30, 5: 10, 7: 30}  # blocks 3 and 6 hold none of the documents
    present = np.array(sorted(sizes))
    first, second = rng.choice(present, 500), rng.choice(present, 500)
    steps = stage.block_windows(first, second, sizes, budget=90)  # groups (0, 1), (2, 4), (5, 7)
    # a group's own pairs go with its first step with a later block; the last group's stay apart
    assert [blocks for blocks, _ in steps] == [[0, 1, 2], [0, 1, 4], [0, 1, 5], [0, 1, 7], [2, 4, 5], [2, 4, 7], [5, 7]]
    taken = np.concatenate([sel for _, sel in steps])
    assert np.array_equal(np.sort(taken), np.arange(500))
    for blocks, sel in steps:
        assert sum(sizes[b] for b in blocks) <= 90 and np.isin(first[sel], blocks).all() and np.isin(second[sel], blocks).all()
    # blocks larger than the room of a group (100k documents: 4 blocks of 26 MB, 47 MB of codes):
    # a group per block, and a block's own pairs with the first step that maps it: a step per two
    # blocks, two blocks mapped at a time, as before
    even = {b: 26 for b in range(4)}
    low, high = rng.choice(4, 400), rng.choice(4, 400)
    steps = stage.block_windows(low, high, even, budget=47)
    assert [blocks for blocks, _ in steps] == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    assert np.array_equal(np.sort(np.concatenate([sel for _, sel in steps])), np.arange(400))
    for blocks, sel in steps:
        assert np.isin(low[sel], blocks).all() and np.isin(high[sel], blocks).all()
    whole = stage.block_windows(first, second, sizes, budget=10**9)
    assert len(whole) == 1 and whole[0][0] == present.tolist()
    monkeypatch.setattr(stage, "IN_PLACE_PASSES", 3)
    assert stage.block_windows(first, second, sizes, budget=90) is not None  # the files mapped 290 / 155 times over
    assert stage.block_windows(first, second, sizes, budget=31) is None  # a group per block: 545 / 155 times
    assert stage.block_windows(first[:0], second[:0], sizes) == []
    # 300 blocks of a group each (steps keyed up to 299 * 301, past 16 bits), pairs inside blocks
    # and from each block to the next: a step per block and the next, in block order (the last
    # block's own pairs with the step before, which maps it), each pair once
    many = {b: 10 for b in range(300)}
    low = rng.permutation(np.repeat(np.arange(300), 10))
    high = np.minimum(low + np.arange(3000) % 2, 299)
    steps = stage.block_windows(low, high, many, budget=20)
    assert [blocks for blocks, _ in steps] == [[b, b + 1] for b in range(299)]
    assert np.array_equal(np.sort(np.concatenate([sel for _, sel in steps])), np.arange(3000))
    for blocks, sel in steps:
        assert np.isin(low[sel], blocks).all() and np.isin(high[sel], blocks).all()


def test_members_of_pairs_are_their_sorted_documents_and_positions():
    """The clusters stage's member set in one pass over marks: the same as sorting the pairs'
    documents and searching each pair's in them."""
    from neardup.stages.clusters import members_of
    rng = np.random.default_rng(5)
    for n, m in ((1, 1), (10, 3), (1000, 200), (50_000, 30_000)):
        left = rng.integers(0, n, m).astype(np.int64)
        right = rng.integers(0, n, m).astype(np.int64)
        docs, (li, ri) = members_of(left, right, n)
        want = np.unique(np.concatenate([left, right]))
        assert np.array_equal(docs, want) and docs.dtype == want.dtype
        assert np.array_equal(li, np.searchsorted(want, left)) and np.array_equal(ri, np.searchsorted(want, right))
        assert np.array_equal(docs[li], left) and np.array_equal(docs[ri], right)
        assert li.dtype == ri.dtype == np.int32  # what the selection's kernel takes, not copied


@pytest.mark.parametrize("arrow_takes", [False, True])
@pytest.mark.parametrize("row_base, runs", [(None, True), ([7, 1000], True), ([7, 1000], False), ([7, 1000], "first")])
def test_columns_and_ids_are_columns_then_ids(tmp_path, corpus, monkeypatch, row_base, runs, arrow_takes):
    """The clusters stage's one read of each block (DocStore.columns_and_ids) gives what
    DocStore.columns and DocStore.ids give, for document sets over both blocks, one block, none;
    without ids, None for them; from the files opened ahead (OpenedBlocks) none opened again. With a row base (the ranges of a split file: rows numbered from
    0 in each), the rows taken have it added as the whole block's rows have. The sources and
    rows found from the blocks' runs (add_row_runs) are those of their
    files; without runs (a work dir of a version that kept none) they are read there, and so
    are those of a block without runs beside one with them (``first``: block 1 over the cap).
    The blocks' rows taken by Arrow's take (DocStore.arrow_takes: pyarrow.compute imported) or by
    the buffers' own (:func:`take_rows`), the same values."""
    from neardup.stages import workdir as wd
    monkeypatch.setattr(wd, "BLOCK_BYTES", 1)  # one read block per input file
    config = Config(on_error="skip", keep="score:score", id_column="id").resolved()
    sources = nio.discover([str(corpus / "a.jsonl"), str(corpus / "b.jsonl")])
    work = WorkDir(str(tmp_path / "work"), "members-test")
    run = Run(config=config, sources=sources, work=work, output=Folder.of(tmp_path / "out"), quiet=True)
    work.mark_done("read", ReadStage().run(run, LocalEngine()))
    assert len(run.corpus.blocks) == 2
    assert [len(r) for r in run.corpus.row_runs] == [1, 1]  # (the bad line is a.jsonl's last)
    store = run.store if row_base is None else DocStore(work.folder, run.corpus.block_start, config.num_perm,
                                                        np.array(row_base), {True: run.corpus.row_runs, False: None,
                                                                             "first": [run.corpus.row_runs[0], None]}[runs])
    store.arrow_takes = arrow_takes
    rng = np.random.default_rng(11)
    first = int(run.corpus.block_start[1])
    columns = ["source", "row", "length", "score"]
    from neardup.io.storage import ranges
    opens, real = [], ranges.arrow_columns
    monkeypatch.setattr(ranges, "arrow_columns", lambda path, *a, **k: opens.append(path) or real(path, *a, **k))
    for docs in (np.flatnonzero(rng.random(run.corpus.n) < 0.4), np.arange(first, run.corpus.n),
                 np.array([0, first - 1]), np.zeros(0, np.int64)):
        values, ids = store.columns_and_ids(docs, columns, True)
        want = store.columns(docs, columns)
        for c in columns:
            assert np.array_equal(values[c], want[c]) and values[c].dtype == want[c].dtype, c
        assert ids.equals(store.ids(docs))
        assert store.columns_and_ids(docs, columns, False)[1] is None
        shared_values, shared_ids = in_thread(MemberColumns(store, docs, columns, True))()  # two threads taking
        assert all(np.array_equal(shared_values[c], values[c]) for c in columns) and shared_ids.equals(ids)
        # the blocks' files opened ahead (OpenedBlocks): the takes open none, and the same values
        opened = OpenedBlocks(store, columns, True)
        opened.job.wait()
        assert sorted(opened.tables) == [0, 1]
        opens.clear()
        ahead_values, ahead_ids = in_thread(MemberColumns(store, docs, columns, True, opened))()
        assert all(np.array_equal(ahead_values[c], values[c]) for c in columns) and ahead_ids.equals(ids)
        assert opens == [] and opened.tables == {}


def test_blocks_opened_ahead_are_handed_once_for_their_columns(read_run):
    """DocStore.open_ahead (the pair stage's end) opens the blocks' files for some columns;
    opened_blocks hands those files to the clusters stage when it asks for the same columns and
    ids (and holds them no longer), else closes them and opens anew; a pickled store holds none."""
    import pickle
    store = read_run.store
    store.open_ahead(["length"], True)
    ahead = store._ahead
    assert pickle.loads(pickle.dumps(store))._ahead is None
    assert store.opened_blocks(["length"], True) is ahead and store._ahead is None
    ahead.close()
    store.open_ahead(["length"], True)
    ahead = store._ahead
    other = store.opened_blocks(["length"], False)
    assert other is not ahead and ahead.closed and (other.columns, other.with_ids) == (["length"], False)
    other.close()
    fresh = store.opened_blocks(["length"], True)  # none ahead: opened from now
    assert fresh is not None and fresh is not ahead
    fresh.close()


def _block_with_gaps(tmp_path, monkeypatch, cap):
    """A run whose read stage is done over one block of two JSONL files, the first with a bad
    line and a blank line amid its records, its summary keeping ``cap`` runs at most."""
    from neardup.stages import corpus as corpus_module
    monkeypatch.setattr(corpus_module, "ROW_RUNS", cap)
    d = tmp_path / "in"
    d.mkdir()
    lines = [json.dumps({"text": f"document number {i} of the first file"}) for i in range(9)]
    (d / "a.jsonl").write_text("\n".join(lines[:3] + ["{not json"] + lines[3:6] + [""] + lines[6:]) + "\n")
    (d / "b.jsonl").write_text("\n".join(json.dumps({"text": f"second file {i}"}) for i in range(4)) + "\n")
    config = Config(on_error="skip").resolved()
    work = WorkDir(str(tmp_path / "work"), "runs-test")
    run = Run(config=config, sources=nio.discover([str(d / "a.jsonl"), str(d / "b.jsonl")]), work=work,
              output=Folder.of(tmp_path / "out"), quiet=True)
    work.mark_done("read", ReadStage().run(run, LocalEngine()))
    return run


@pytest.mark.parametrize("cap", [1024, 3])
def test_row_runs_give_each_documents_source_and_row(tmp_path, monkeypatch, cap):
    """A block of two JSONL files, the first with a bad line and a blank line amid its records:
    its summary's runs (a run from each gap, and one for the second file) give every document's
    source and row as the block's file has them (rows after a gap go on from the gap's line);
    over the cap (corpus.ROW_RUNS), the summary keeps none and the store finds none."""
    run = _block_with_gaps(tmp_path, monkeypatch, cap)
    assert run.corpus.n == 13 and len(run.corpus.blocks) == 1
    found = run.store.source_rows_of(0, np.arange(13))
    if cap == 3:
        assert run.corpus.row_runs == [None] and found is None
        return
    assert run.corpus.row_runs[0] == [[0, 0, 0], [3, 0, 4], [6, 0, 8], [9, 1, 0]]  # the summary's own
    table = run.corpus.table(0, ["source", "row"])
    assert np.array_equal(found[0], table.column("source").to_numpy()) and found[0].dtype == np.int32
    assert np.array_equal(found[1], table.column("row").to_numpy()) and found[1].dtype == np.int64
    for local in (np.arange(5, 13), np.array([4, 7, 12]), np.array([10])):  # from amid a run: its runs alone
        part = run.store.source_rows_of(0, local)
        assert np.array_equal(part[0], found[0][local]) and np.array_equal(part[1], found[1][local])


@pytest.mark.parametrize("cap", [1024, 3])
def test_rows_of_sources_from_row_runs(tmp_path, monkeypatch, cap):
    """The write stage's rows (and line bounds) of each source of a block with gaps (a bad line,
    a blank line): from the block's runs without opening its file's columns, the same as its
    file gives them; a block without runs (over the cap) read from its file."""
    from neardup.stages.write import rows_of_sources
    run = _block_with_gaps(tmp_path, monkeypatch, cap)
    opened = []
    real_table = DocStore.table
    monkeypatch.setattr(DocStore, "table", lambda self, b, cols, *a, **k: opened.append(b) or real_table(self, b, cols, *a, **k))
    lines_found = {}
    rows = rows_of_sources(run.store, {0: [0], 1: [0]}, lines_found)
    assert opened == ([] if cap == 1024 else [0])
    assert rows[0].tolist() == [0, 1, 2, 4, 5, 6, 8, 9, 10] and rows[1].tolist() == [0, 1, 2, 3]
    assert len(lines_found[0]) == 9 and len(lines_found[1]) == 4


def test_rows_of_sources_of_a_block_out_of_source_order():
    """A block whose documents' sources do not ascend: each source's rows gathered in file
    order (the ones of a source not asked for left out); in source order, each one's a slice."""
    from types import SimpleNamespace
    from neardup.stages.write import rows_of_sources
    for source, row in (([2, 0, 2, 1, 0], [0, 0, 1, 0, 1]), ([0, 0, 1, 2, 2], [0, 1, 0, 0, 1])):
        store = SimpleNamespace(block_start=np.array([0, 5]), source_rows_of=lambda b, local, s=source, r=row: (
            np.array(s, np.int32)[local], np.array(r, np.int64)[local]))
        rows = rows_of_sources(store, {0: [0], 2: [0]})
        assert sorted(rows) == [0, 2] and rows[0].tolist() == [0, 1] and rows[2].tolist() == [0, 1]


def test_row_runs_go_on_across_batches():
    """A batch whose first document goes on from the last batch's run adds no run of its own."""
    from neardup.stages.corpus import add_row_runs
    summary = {"documents": 0, "runs": []}
    for source, rows in (([0, 0, 0], [5, 6, 7]), ([0, 0], [8, 10]), ([1], [0])):
        add_row_runs(summary, np.array(source, np.int32), np.array(rows))
        summary["documents"] += len(rows)
    assert summary["runs"] == [[0, 0, 5], [4, 0, 10], [5, 1, 0]]


def test_a_work_dir_whose_summaries_have_no_runs_is_finished_the_same(tmp_path, corpus):
    """A work dir read by a version whose block summaries kept no ``runs`` (layout 8 before them:
    LAYOUT_VERSION was not bumped for them) is finished with the same output files: the clusters
    stage reads those blocks' sources and rows instead."""
    from neardup.stages import workdir as wd
    from neardup.stages.write import WriteStage
    config = Config(on_error="skip", keep="score:score", id_column="id").resolved()
    sources = nio.discover([str(corpus / "a.jsonl"), str(corpus / "b.jsonl")])
    outputs = []
    for runs in (True, False):
        work = WorkDir(str(tmp_path / f"work{runs}"), "runs-test")
        run = Run(config=config, sources=sources, work=work, output=Folder.of(tmp_path / f"out{runs}"), quiet=True)
        work.mark_done("read", ReadStage().run(run, LocalEngine()))
        if not runs:
            for b in range(len(run.corpus.blocks)):
                summary = work.block_summary(b)
                del summary["runs"]
                work.folder.write_json(wd.block_name(b, "json"), summary)
            run = Run(config=config, sources=sources, work=work, output=run.output, quiet=True)
            assert run.corpus.row_runs == [None] * len(run.corpus.blocks)
        for stage in (PairsStage(), ClustersStage(), WriteStage()):
            work.mark_done(stage.name, stage.run(run, LocalEngine()))
        outputs.append({k: v for k, v in _files(tmp_path / f"out{runs}").items() if k != "stats.json"})
    assert outputs[0] == outputs[1] and "clusters.parquet" in outputs[0]


@pytest.mark.parametrize("ids", [[], [0], [5, 3, 5, 0, 9, 3], list(range(50, 0, -3)) * 2])
def test_dense_unique_is_np_unique_with_its_inverse(ids):
    ids = np.array(ids, dtype=np.int64)
    docs, inverse = dense_unique(ids)
    want_docs, want_inverse = np.unique(ids, return_inverse=True)
    assert docs.tolist() == want_docs.tolist() and inverse.tolist() == want_inverse.tolist()
    assert docs.dtype == np.int64 and inverse.dtype == np.int64


def test_dense_unique_of_few_ids_of_a_large_corpus_takes_no_lookup_of_its_size(monkeypatch):
    """Three ids up to 10**12 (a few pairs of a large corpus): the same answer as np.unique,
    without a lookup over 10**12 documents (9 TB: it could not be made)."""
    from neardup.stages import pairs
    made = []
    real_zeros = np.zeros
    monkeypatch.setattr(pairs.np, "zeros", lambda n, *a, **k: made.append(n) or real_zeros(n, *a, **k))
    ids = np.array([10**12, 5, 10**12, 7], dtype=np.int64)
    docs, inverse = dense_unique(ids)
    assert docs.tolist() == [5, 7, 10**12] and inverse.tolist() == [2, 0, 2, 1]
    assert docs.dtype == np.int64 and inverse.dtype == np.int64
    assert all(n <= pairs.DENSE_SPAN * len(ids) for n in made)
