"""Band keys, buckets, star pairs and the re-anchored pair search, against brute force."""

from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.kernels.bands import (ROUND_BUDGET, _large_runs, _round_codes, _runs_of, band_keys, band_keys_python, bucket_runs, bucket_runs_of_rows, candidate_pairs, find_pairs,
                           pair_codes, split_codes, star_pairs)
from neardup.kernels.components import connected_components_python

PROPS = settings(max_examples=80, deadline=None)


# ----------------------------------------------------------------------------- helpers

def brute_buckets(keys, eligible=None, ids=None):
    """Every (band, key) group of two or more eligible documents, members ascending."""
    n, bands = keys.shape
    ids = list(range(n)) if ids is None else list(ids)
    out = []
    for j in range(bands):
        groups = defaultdict(list)
        for i in range(n):
            if eligible is None or eligible[i]:
                groups[int(keys[i, j])].append(ids[i])
        out += [tuple(sorted(g)) for g in groups.values() if len(g) >= 2]
    return out


def brute_sharing_pairs(keys, eligible=None):
    n = keys.shape[0]
    ok = np.ones(n, bool) if eligible is None else eligible
    return {(a, b) for a in range(n) for b in range(a + 1, n)
            if ok[a] and ok[b] and (keys[a] == keys[b]).any()}


def runs_as_tuples(offsets, members):
    return [tuple(members[offsets[i]:offsets[i + 1]].tolist()) for i in range(len(offsets) - 1)]


small_keys = st.integers(0, 25).flatmap(lambda n: st.integers(1, 4).flatmap(lambda b: st.tuples(
    st.lists(st.lists(st.integers(0, 3), min_size=b, max_size=b), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n))))


# ----------------------------------------------------------------------------- band keys

@PROPS
@given(data=st.data(), bands=st.integers(1, 6), rows=st.integers(1, 5), extra=st.integers(0, 3),
       seed=st.sampled_from([0, 42, 2**40]))
def test_band_keys_equal_twin(data, bands, rows, extra, seed):
    k = bands * rows + extra
    n = data.draw(st.integers(0, 5))
    sigs = np.array(data.draw(st.lists(st.lists(st.integers(0, 2**32 - 1), min_size=k, max_size=k),
                                       min_size=n, max_size=n)), dtype=np.uint32).reshape(n, k)
    keys = band_keys(sigs, bands, rows, seed=seed)
    assert keys.shape == (n, bands) and keys.dtype == np.uint64
    for i in range(n):
        assert keys[i].tolist() == band_keys_python(sigs[i], bands, rows, seed=seed)


def test_band_keys_properties():
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 2**32, size=(50, 128), dtype=np.uint64).astype(np.uint32)
    keys = band_keys(sigs, 13, 8)
    # only the first b * r values count
    other = sigs.copy()
    other[:, 104:] = 0
    assert np.array_equal(band_keys(other, 13, 8), keys)
    # changing one value of band 3 changes only that band's key
    other = sigs.copy()
    other[:, 3 * 8 + 5] ^= np.uint32(1)
    diff = band_keys(other, 13, 8) != keys
    assert diff[:, 3].all() and not np.delete(diff, 3, axis=1).any()
    # the band index is mixed in: identical bands in different positions give different keys
    same = np.tile(sigs[:, :8], (1, 16))
    k2 = band_keys(same, 16, 8)
    assert all(len(set(row.tolist())) == 16 for row in k2)
    # seeded
    assert not (band_keys(sigs, 13, 8, seed=1) == keys).any()
    # equal signatures, equal keys; unrelated signatures, distinct keys
    assert np.array_equal(band_keys(sigs[[0, 0]], 13, 8)[0], band_keys(sigs[[0, 0]], 13, 8)[1])
    assert len(np.unique(keys)) == keys.size
    # dtype of the input does not matter
    assert np.array_equal(band_keys(sigs.astype(np.int64), 13, 8), keys)


def test_band_keys_errors():
    sigs = np.zeros((3, 16), np.uint32)
    with pytest.raises(ValueError):
        band_keys(sigs, 5, 4)
    with pytest.raises(ValueError):
        band_keys(sigs, 0, 4)
    with pytest.raises(ValueError):
        band_keys(np.zeros(16, np.uint32), 2, 2)
    assert band_keys(np.zeros((0, 16), np.uint32), 4, 4).shape == (0, 4)


# ----------------------------------------------------------------------------- buckets

@PROPS
@given(case=small_keys, use_eligible=st.booleans(), use_ids=st.booleans(), data=st.data())
def test_bucket_runs_equal_brute_force_grouping(case, use_eligible, use_ids, data):
    rows, elig = case
    n = len(rows)
    bands = len(rows[0]) if rows else 1
    keys = np.array(rows, dtype=np.uint64).reshape(n, bands)
    eligible = np.array(elig, dtype=bool) if use_eligible else None
    ids = None
    if use_ids:
        ids = np.array(data.draw(st.permutations(range(100, 100 + n))), dtype=np.int64) if n else np.zeros(0, np.int64)
    offsets, members = bucket_runs(keys, eligible, ids)
    assert offsets.dtype == np.int64 and members.dtype == np.int64 and offsets[0] == 0
    got = runs_as_tuples(offsets, members)
    assert all(len(r) >= 2 and list(r) == sorted(r) for r in got)
    assert Counter(got) == Counter(brute_buckets(keys, eligible, ids))


@PROPS
@given(case=small_keys, use_eligible=st.booleans(), data=st.data())
def test_bucket_runs_in_keep_order(case, use_eligible, data):
    """With ``rank`` each bucket lists its members in keep order, so the anchor is the one to be kept."""
    rows, elig = case
    n = len(rows)
    keys = np.array(rows, dtype=np.uint64).reshape(n, len(rows[0]) if rows else 1)
    eligible = np.array(elig, dtype=bool) if use_eligible else None
    rank = np.array(data.draw(st.permutations(range(n))), dtype=np.int64) if n else np.zeros(0, np.int64)
    offsets, members = bucket_runs(keys, eligible, rank=rank)
    got = runs_as_tuples(offsets, members)
    assert all([rank[m] for m in r] == sorted(rank[m] for m in r) for r in got)
    assert Counter(tuple(sorted(r)) for r in got) == Counter(brute_buckets(keys, eligible))
    # with doc_ids too: rank is indexed like the rows of keys, members are the ids
    ids = np.arange(n, dtype=np.int64) * 10 + 3
    offsets2, members2 = bucket_runs(keys, eligible, ids, rank=rank)
    assert np.array_equal(offsets2, offsets) and np.array_equal(members2, members * 10 + 3)
    # the anchors of the star pairs are the first in keep order
    left, right = star_pairs(offsets, members)
    assert all(rank[a] < rank[b] for a, b in zip(left.tolist(), right.tolist()))


@PROPS
@given(case=small_keys, use_eligible=st.booleans(), data=st.data())
def test_bucket_runs_of_keys_in_parts_equal_the_matrix(case, use_eligible, data):
    """Keys given as a list of row ranges (each block's key column where it lies, read in place
    by address, band by band): the same buckets, members and order as the whole matrix; rows of
    a wider array (a column of it) read at its row stride."""
    rows, elig = case
    n = len(rows)
    bands = len(rows[0]) if rows else 1
    keys = np.array(rows, dtype=np.uint64).reshape(n, bands)
    eligible = np.array(elig, dtype=bool) if use_eligible else None
    rank = np.array(data.draw(st.permutations(range(n))), dtype=np.int64) if n else np.zeros(0, np.int64)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    wide = np.concatenate([keys, np.full((n, 1), 7, np.uint64)], axis=1)  # rows of bands + 1 values
    parts = [p[:, :bands] for p in np.split(wide, cuts)]
    want = bucket_runs(keys, eligible, rank=rank)
    got = bucket_runs(parts, eligible, rank=rank)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_bucket_runs_rank_example():
    keys = np.array([[7], [7], [7], [1]], dtype=np.uint64)
    offsets, members = bucket_runs(keys, rank=np.array([2, 0, 1, 3]))
    assert runs_as_tuples(offsets, members) == [(1, 2, 0)]
    assert star_pairs(offsets, members)[0].tolist() == [1, 1]


def test_runs_of_bands_are_their_members_and_running_sizes_one_band_after_another():
    """_runs_of writes each band's part in a thread: the offsets go on from the bands before it."""
    rng = np.random.default_rng(5)
    sizes = [rng.integers(2, 6, k).astype(np.int64) for k in (7, 1, 12, 3, 5)]
    members = [rng.integers(0, 1000, int(s.sum())).astype(np.int64) for s in sizes]
    offsets, joined = _runs_of(members, sizes)
    assert offsets.tolist() == [0] + np.cumsum(np.concatenate(sizes)).tolist()
    assert joined.tolist() == np.concatenate(members).tolist()
    assert [a.tolist() for a in _runs_of([], [])] == [[0], []]


@PROPS
@given(case=small_keys, use_eligible=st.booleans())
def test_star_pairs_generate_the_sharing_graph(case, use_eligible):
    rows, elig = case
    n = len(rows)
    keys = np.array(rows, dtype=np.uint64).reshape(n, len(rows[0]) if rows else 1)
    eligible = np.array(elig, dtype=bool) if use_eligible else None
    offsets, members = bucket_runs(keys, eligible)
    left, right = star_pairs(offsets, members)
    sizes = np.diff(offsets)
    # linear: one edge per non-anchor member, from the bucket's first member
    assert len(left) == len(right) == int((sizes - 1).sum())
    anchors = np.repeat(members[offsets[:-1]], sizes - 1)
    assert np.array_equal(left, anchors)
    truth = brute_sharing_pairs(keys, eligible)
    # every star edge is a true sharing pair
    assert all((min(a, b), max(a, b)) in truth for a, b in zip(left.tolist(), right.tolist()))
    # and the star edges connect exactly what all sharing pairs connect
    assert connected_components_python(n, list(zip(left.tolist(), right.tolist()))) == connected_components_python(n, list(truth))
    # candidate_pairs: the distinct star edges, left < right, sorted
    cl, cr = candidate_pairs(keys, eligible)
    star = sorted({(min(a, b), max(a, b)) for a, b in zip(left.tolist(), right.tolist())})
    assert list(zip(cl.tolist(), cr.tolist())) == star
    assert (cl < cr).all()


def test_candidate_pairs_are_all_pairs_when_buckets_are_pairs():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**63, size=(60, 6), dtype=np.uint64)
    keys[7, 2] = keys[30, 2]
    keys[7, 4] = keys[30, 4]
    keys[8, 0] = keys[9, 0]
    keys[50, 5] = keys[3, 5]
    cl, cr = candidate_pairs(keys)
    assert list(zip(cl.tolist(), cr.tolist())) == [(3, 50), (7, 30), (8, 9)]
    eligible = np.ones(60, bool)
    eligible[9] = False
    cl, cr = candidate_pairs(keys, eligible)
    assert list(zip(cl.tolist(), cr.tolist())) == [(3, 50), (7, 30)]


def test_no_buckets():
    keys = np.arange(12, dtype=np.uint64).reshape(4, 3)
    offsets, members = bucket_runs(keys)
    assert offsets.tolist() == [0] and members.tolist() == []
    cl, cr = candidate_pairs(keys)
    assert len(cl) == len(cr) == 0
    offsets, members = bucket_runs(np.zeros((0, 3), np.uint64))
    assert offsets.tolist() == [0]


@given(left=st.lists(st.integers(0, 2**32 - 1), max_size=20), data=st.data())
@settings(max_examples=50, deadline=None)
def test_pair_codes_roundtrip(left, data):
    right = data.draw(st.lists(st.integers(0, 2**32 - 1), min_size=len(left), max_size=len(left)))
    l, r = np.array(left, np.int64), np.array(right, np.int64)
    codes = pair_codes(l, r)
    assert np.array_equal(codes, pair_codes(r, l))
    a, b = split_codes(codes)
    assert np.array_equal(a, np.minimum(l, r)) and np.array_equal(b, np.maximum(l, r))


@given(st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=12), max_size=8), st.data())
@settings(max_examples=80, deadline=None)
def test_round_codes_are_the_star_codes_then_every_pair_of_the_small_buckets(buckets, data):
    """The kernel's codes equal numpy's: star pairs first, in star_pairs' order (the search reads
    each member's result at its place), then all pairs of the buckets marked small."""
    stars_of = data.draw(st.lists(st.booleans(), min_size=len(buckets), max_size=len(buckets)))
    star_buckets = [b for b, s in zip(buckets, stars_of) if s]
    offsets, mem = runs(*star_buckets) if star_buckets else (np.zeros(1, np.int64), np.zeros(0, np.int64))
    run_offsets, members = runs(*buckets) if buckets else (np.zeros(1, np.int64), np.zeros(0, np.int64))
    small = ~np.array(stars_of, dtype=bool)
    codes, stars = _round_codes(offsets, mem, run_offsets, members, small)
    left, right = star_pairs(offsets, mem)
    every = [(a, c) for b, s in zip(buckets, stars_of) if not s for i, a in enumerate(b) for c in b[i + 1:]]
    expected = np.concatenate([pair_codes(left, right), pair_codes(np.array([a for a, _ in every], np.int64),
                                                                   np.array([c for _, c in every], np.int64))])
    assert stars == len(left)
    assert codes.dtype == np.uint64 and codes.tolist() == expected.tolist()


def test_large_runs_keep_the_buckets_above_the_bound_with_their_budget():
    offsets, members = runs([4, 1], [7, 2, 9], [5, 6, 8, 3], [0, 2, 1])
    out_offsets, mem, budget = _large_runs(offsets, members, np.int64(2), np.int64(16))
    assert out_offsets.tolist() == [0, 3, 7, 10]
    assert mem.tolist() == [7, 2, 9, 5, 6, 8, 3, 0, 2, 1]
    assert budget.tolist() == [48, 64, 48]
    out_offsets, mem, budget = _large_runs(offsets, members, np.int64(3), np.int64(16))  # the bound is inclusive
    assert out_offsets.tolist() == [0, 4] and mem.tolist() == [5, 6, 8, 3] and budget.tolist() == [64]


# ----------------------------------------------------------------------------- find_pairs

class Recorder:
    """A verifier from a set of similar pairs that records every pair it is asked about."""

    def __init__(self, similar, sim=lambda a, b: 0.9):
        self.similar = {(min(a, b), max(a, b)) for a, b in similar}
        self.sim = sim
        self.calls = []

    def __call__(self, left, right):
        pairs = list(zip(left.tolist(), right.tolist()))
        assert all(a < b for a, b in pairs)
        self.calls.append(pairs)
        passed = np.array([p in self.similar for p in pairs], dtype=bool)
        sims = np.array([self.sim(*p) if p in self.similar else 0.1 for p in pairs], dtype=np.float64)
        return passed, sims

    @property
    def asked(self):
        return [p for call in self.calls for p in call]


def runs(*buckets):
    offsets = np.zeros(len(buckets) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in buckets], out=offsets[1:])
    members = np.array([m for b in buckets for m in b], dtype=np.int64)
    return offsets, members


def test_reanchoring_design_case():
    """Bucket {A, B, C}: A is like neither, B is like C. The star edges A-B, A-C fail; B-C is found."""
    A, B, C = 0, 1, 2
    verify = Recorder({(B, C)})
    res = find_pairs(*runs([A, B, C]), verify, all_pairs=0)
    assert list(zip(res.left.tolist(), res.right.tolist())) == [(B, C)]
    assert res.similarity.tolist() == [0.9]
    assert verify.calls == [[(A, B), (A, C)], [(B, C)]]
    assert (res.candidate_pairs, res.rounds, res.truncated_buckets, res.buckets) == (3, 2, 0, 1)
    # without re-anchoring the pair is lost, and the loss is counted
    verify = Recorder({(B, C)})
    res = find_pairs(*runs([A, B, C]), verify, max_rounds=1, all_pairs=0)
    assert len(res.left) == 0 and res.truncated_buckets == 1 and res.rounds == 1
    # by default a bucket this small has every pair verified at once
    verify = Recorder({(B, C)})
    res = find_pairs(*runs([A, B, C]), verify)
    assert verify.calls == [[(A, B), (A, C), (B, C)]] and res.rounds == 1 and res.truncated_buckets == 0


def test_small_buckets_verify_every_pair_so_a_later_removed_anchor_loses_nothing():
    """0 ~ 1 and 0 ~ 2 but 1 !~ 2 ... and 2 ~ 3: the star on 0 would never look at 2-3 when 3 is
    like 0 too. If 0 is later removed (for a document outside the bucket) 2 and 3 must not
    both stay: their pair is verified because the bucket is small."""
    verify = Recorder({(0, 1), (0, 2), (0, 3), (2, 3)})
    res = find_pairs(*runs([0, 1, 2, 3]), verify)
    assert (2, 3) in set(zip(res.left.tolist(), res.right.tolist()))
    verify = Recorder({(0, 1), (0, 2), (0, 3), (2, 3)})
    res = find_pairs(*runs([0, 1, 2, 3]), verify, all_pairs=3)  # (mutation guard: the size bound is inclusive)
    assert (2, 3) not in set(zip(res.left.tolist(), res.right.tolist()))


def test_boilerplate_bucket_with_hidden_pairs():
    """40 mutually dissimilar documents share a band key (boilerplate); three pairs are real."""
    hidden = {(5, 17), (23, 38), (30, 31)}
    bucket = list(range(40))
    verify = Recorder(hidden)
    res = find_pairs(*runs(bucket), verify, round_budget=40)
    assert set(zip(res.left.tolist(), res.right.tolist())) == hidden
    assert res.truncated_buckets == 0
    asked = verify.asked
    assert len(asked) == len(set(asked)) == res.candidate_pairs
    # by default the bucket stops once it has cost ROUND_BUDGET verifications per member: 23 anchors
    # are tried (0..23 but 17, which passed with 5: 39 + ... + 34 + 32 + ... + 16 = 627 <= 640, the
    # next round would cost 15 more), (5, 17) and (23, 38) are found, (30, 31) is reported lost
    verify = Recorder(hidden)
    res = find_pairs(*runs(bucket), verify)
    assert set(zip(res.left.tolist(), res.right.tolist())) == {(5, 17), (23, 38)}
    assert res.rounds == 23 and res.truncated_buckets == 1
    assert len(verify.asked) == len(set(verify.asked)) == 627 <= ROUND_BUDGET * 40
    # a round bound stops it sooner
    verify = Recorder(hidden)
    res = find_pairs(*runs(bucket), verify, max_rounds=8)
    assert set(zip(res.left.tolist(), res.right.tolist())) == {(5, 17)}
    assert res.rounds == 8 and res.truncated_buckets == 1 and len(verify.asked) == 39 + 38 + 37 + 36 + 35 + 34 + 32 + 31


def test_passing_members_leave_the_bucket():
    # 0 ~ 1, 0 ~ 2; 3 ~ 4: round 1 anchors on 0, {3, 4} fail and are re-anchored on 3
    verify = Recorder({(0, 1), (0, 2), (3, 4)})
    res = find_pairs(*runs([0, 1, 2, 3, 4]), verify, all_pairs=0)
    assert set(zip(res.left.tolist(), res.right.tolist())) == {(0, 1), (0, 2), (3, 4)}
    assert verify.calls == [[(0, 1), (0, 2), (0, 3), (0, 4)], [(3, 4)]]
    assert res.rounds == 2 and res.truncated_buckets == 0


def test_pair_in_many_buckets_is_verified_once():
    # the same documents collide in every band; pairs recur in later rounds through other buckets
    verify = Recorder({(1, 2)})
    b = [0, 1, 2, 3]
    res = find_pairs(*runs(b, b, b, [1, 2], [2, 3, 1], [0, 3]), verify)
    asked = verify.asked
    assert len(asked) == len(set(asked))
    assert set(zip(res.left.tolist(), res.right.tolist())) == {(1, 2)}
    assert res.buckets == 6


def test_no_buckets_no_verification():
    verify = Recorder(set())
    res = find_pairs(np.zeros(1, np.int64), np.zeros(0, np.int64), verify)
    assert verify.calls == [] and res.rounds == 0 and res.candidate_pairs == 0 and len(res.left) == 0


def reference_search(buckets, similar, max_rounds, all_pairs, budget):
    """The search of the module docstring, spelled out in plain Python: every pair of the
    buckets of up to ``all_pairs`` members in round 1; star pairs re-anchored on the failed members
    in the others while a bucket's rounds have cost at most ``budget`` verifications per member."""
    verdict = {}
    rounds = 0
    asked = 0
    stopped = 0
    buckets = [list(b) for b in buckets if len(b) >= 2]
    small = [b for b in buckets if len(b) <= all_pairs]
    big = [(b, budget * len(b)) for b in buckets if len(b) > all_pairs]
    while (big or small) and (max_rounds is None or rounds < max_rounds):
        rounds += 1
        pairs = {(min(b[0], m), max(b[0], m)) for b, _ in big for m in b[1:]}
        pairs |= {(b[i], b[j]) for b in small for i in range(len(b)) for j in range(i + 1, len(b))}
        small = []
        for p in sorted(pairs - set(verdict)):
            verdict[p] = p in similar
            asked += 1
        nxt = []
        for b, left in big:
            failed = [m for m in b[1:] if not verdict[(min(b[0], m), max(b[0], m))]]
            left -= len(b) - 1
            if len(failed) >= 2 and len(failed) - 1 <= left:
                nxt.append((failed, left))
            elif len(failed) >= 2:
                stopped += 1
        big = nxt
    found = sorted(p for p, ok in verdict.items() if ok)
    return found, asked, rounds, len(big) + stopped


bucket_lists = st.lists(st.lists(st.integers(0, 14), min_size=2, max_size=10, unique=True).map(sorted),
                        max_size=8)


@PROPS
@given(buckets=bucket_lists, labels=st.lists(st.integers(0, 3), min_size=15, max_size=15),
       noise=st.sets(st.tuples(st.integers(0, 14), st.integers(0, 14)), max_size=10),
       max_rounds=st.one_of(st.none(), st.integers(1, 12)), all_pairs=st.integers(0, 6),
       budget=st.integers(1, 6))
def test_find_pairs_equals_reference_and_never_reverifies(buckets, labels, noise, max_rounds, all_pairs, budget):
    similar = {(a, b) for a in range(15) for b in range(a + 1, 15) if labels[a] == labels[b]}
    similar ^= {(min(a, b), max(a, b)) for a, b in noise if a != b}   # not always transitive
    verify = Recorder(similar, sim=lambda a, b: 0.5 + (a * 15 + b) / 1000)
    res = find_pairs(*runs(*buckets), verify, max_rounds=max_rounds, all_pairs=all_pairs, round_budget=budget)
    found, asked, rounds, truncated = reference_search(buckets, similar, max_rounds, all_pairs, budget)
    got = list(zip(res.left.tolist(), res.right.tolist()))
    assert sorted(got) == found
    assert got == sorted(got)
    assert res.similarity.tolist() == [0.5 + (a * 15 + b) / 1000 for a, b in got]
    assert (res.candidate_pairs, res.rounds, res.truncated_buckets) == (asked, rounds, truncated)
    # never the same pair twice, and only pairs that share a bucket
    assert len(verify.asked) == len(set(verify.asked)) == res.candidate_pairs
    sharing = {(a, b) for bk in buckets for a in bk for b in bk if a < b}
    assert set(verify.asked) <= sharing
    assert len(verify.calls) <= res.rounds


@PROPS
@given(buckets=bucket_lists, labels=st.lists(st.integers(0, 3), min_size=15, max_size=15))
def test_find_pairs_connects_every_similar_pair_of_a_bucket_when_similarity_is_transitive(buckets, labels):
    """With near-duplicate groups (an equivalence) and the defaults, nothing within a bucket is lost."""
    similar = {(a, b) for a in range(15) for b in range(a + 1, 15) if labels[a] == labels[b]}
    res = find_pairs(*runs(*buckets), Recorder(similar))
    assert res.truncated_buckets == 0
    comp = connected_components_python(15, list(zip(res.left.tolist(), res.right.tolist())))
    for bk in buckets:
        for a in bk:
            for b in bk:
                if labels[a] == labels[b]:
                    assert comp[a] == comp[b]


def test_bucket_runs_reading_a_few_bands_at_a_time_gives_the_same_buckets():
    """bucket_runs over a keys function (BAND_GROUP bands in memory at a time) gives exactly the
    buckets of the whole matrix, with eligibility, ids and a keep rank, and asks for each band
    once."""
    from neardup.kernels.bands import BAND_GROUP
    rng = np.random.default_rng(3)
    n, bands = 3000, 2 * BAND_GROUP + 3
    keys = rng.integers(0, 40, size=(n, bands)).astype(np.uint64)   # many collisions
    eligible = rng.random(n) > 0.1
    rank = rng.permutation(n)
    asked = []

    def get(first, stop):
        asked.append((first, stop))
        return keys[:, first:stop].copy()

    want = bucket_runs(keys, eligible, rank=rank)
    got = bucket_runs(get, eligible, rank=rank, bands=bands)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    assert len(want[1]) > n  # the case has buckets in every band
    covered = [j for a, b in asked for j in range(a, b)]
    assert covered == list(range(bands))
    assert all(b - a <= BAND_GROUP for a, b in asked)


@PROPS
@given(st.integers(0, 400), st.integers(1, 6), st.integers(1, 50), st.integers(0, 2**31))
def test_bucket_runs_of_rows_equal_the_matrix_grouping(n, bands, spread, seed):
    """The rows a keyed shuffle delivers (any order) give the buckets of the whole matrix, in the
    same order, members in keep order: one bucket formation for every engine."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, spread, (n, bands)).astype(np.uint64)
    rank = rng.permutation(n)
    want_offsets, want_members = bucket_runs(keys, rank=rank)
    band = np.tile(np.arange(bands, dtype=np.int32), n)
    doc = np.repeat(np.arange(n, dtype=np.int64), bands)
    shuffled = rng.permutation(len(band))
    offsets, members = bucket_runs_of_rows(band[shuffled], keys.reshape(-1)[shuffled], doc[shuffled],
                                           rank[doc[shuffled]])
    assert np.array_equal(offsets, want_offsets)
    assert np.array_equal(members, want_members)


def test_bucket_runs_equal_a_stable_sort_of_each_band():
    """The compiled grouping (keys that may repeat, a counting pass on the top bits, small bins
    by insertion, large ones by merge sort) gives the buckets of a stable argsort of each band:
    same buckets, same order (band, then ascending key), members in keep order."""
    rng = np.random.default_rng(5)
    n = 5000
    keys = rng.integers(0, 2**64, (n, 3), dtype=np.uint64)
    keys[rng.integers(0, n, 1500), 0] = keys[rng.integers(0, n, 1500), 0]       # repeats over the whole range
    keys[:, 1] = (keys[:, 1] >> np.uint64(40)) | np.uint64(0xABC0000000000000)  # one top-bits bin: merge sort
    keys[rng.integers(0, n, 800), 1] = keys[rng.integers(0, n, 800), 1]
    keys[rng.random(n) < 0.3, 2] = np.uint64(12345)                             # one big bucket
    rank = rng.permutation(n)
    eligible = rng.random(n) > 0.05
    rows = np.flatnonzero(eligible)
    perm = rows[np.argsort(rank[rows], kind="stable")]
    want_members, want_sizes = [], []
    for j in range(keys.shape[1]):
        band = keys[perm, j]
        order = np.argsort(band, kind="stable")
        sk = band[order]
        starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
        sizes = np.diff(np.append(starts, len(sk)))
        want_members.append(perm[order[np.repeat(sizes >= 2, sizes)]])
        want_sizes.append(sizes[sizes >= 2])
    offsets, members = bucket_runs(keys, eligible, rank=rank)
    assert np.array_equal(np.diff(offsets), np.concatenate(want_sizes))
    assert np.array_equal(members, np.concatenate(want_members))
    assert (np.diff(offsets) > 2).sum() > 100


@pytest.mark.parametrize("part_bits", [2, 5, 9])
def test_bucket_runs_in_partitions_of_the_top_bits_equal_one_pass(monkeypatch, part_bits):
    """A band of PARTITION_KEYS keys or more is grouped a partition of the keys' top bits at a
    time (each filtered and sorted on its own): the same buckets, in the same order, members in
    keep order, as the one pass over the band, for keys read in place and for a key matrix;
    with repeats everywhere, a partition of one top-bits value (its bins by merge sort), one
    big bucket, and many partitions (small PARTITION_BITS)."""
    import neardup.kernels.bands as B
    rng = np.random.default_rng(11)
    n = 6000
    keys = rng.integers(0, 2**64, (n, 4), dtype=np.uint64)
    keys[rng.integers(0, n, 2000), 0] = keys[rng.integers(0, n, 2000), 0]
    keys[:, 1] = (keys[:, 1] >> np.uint64(40)) | np.uint64(0xABC0000000000000)
    keys[rng.integers(0, n, 900), 1] = keys[rng.integers(0, n, 900), 1]
    keys[rng.random(n) < 0.3, 2] = np.uint64(12345)
    keys[rng.integers(0, n, 300), 3] = keys[rng.integers(0, n, 300), 3]
    rank = rng.permutation(n)
    eligible = rng.random(n) > 0.05
    parts = [keys[:2500], keys[2500:]]
    want = bucket_runs(keys, eligible, rank=rank)
    assert B.PARTITION_KEYS > n
    monkeypatch.setattr(B, "PARTITION_KEYS", 100)
    monkeypatch.setattr(B, "PARTITION_BITS", part_bits)
    for got in (bucket_runs(parts, eligible, rank=rank), bucket_runs(keys, eligible, rank=rank)):
        assert np.array_equal(got[0], want[0])
        assert np.array_equal(got[1], want[1])
    assert (np.diff(want[0]) > 2).sum() > 100
