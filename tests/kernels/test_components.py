"""Connected components, keep order, and representatives with the chain guard."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.kernels.components import (connected_components, connected_components_python, keep_order, large_star,
                              select_representatives, select_representatives_python, small_star, star_components)

PROPS = settings(max_examples=100, deadline=None)


@st.composite
def graphs(draw, max_n=30, self_loops=False):
    # up to 30 nodes with 2n edges: numba's quicksort reorders equal keys from 16 elements on
    n = draw(st.integers(1, max_n))
    node = st.integers(0, n - 1)
    edges = draw(st.lists(st.tuples(node, node), max_size=2 * n))
    if not self_loops:
        edges = [(a, b) for a, b in edges if a != b]
    return n, edges


@st.composite
def weighted_graphs(draw):
    n, edges = draw(graphs(max_n=25))
    # a few distinct values so that ties between candidate representatives are common
    sims = draw(st.lists(st.sampled_from([0.8, 0.85, 0.9, 1.0]), min_size=len(edges), max_size=len(edges)))
    # keep_order gives a permutation; tied ranks (a caller's own order) must go to the earlier document
    rank = draw(st.one_of(st.permutations(range(n)), st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    return n, edges, sims, list(rank)


def arrays(edges):
    left = np.array([a for a, _ in edges], dtype=np.int64)
    right = np.array([b for _, b in edges], dtype=np.int64)
    return left, right


# ----------------------------------------------------------------------------- components

@PROPS
@given(g=graphs(self_loops=True))
def test_connected_components_equal_twin(g):
    n, edges = g
    labels = connected_components(n, *arrays(edges))
    assert labels.dtype == np.int64 and labels.shape == (n,)
    assert labels.tolist() == connected_components_python(n, edges)
    # the label is the smallest member of the component
    assert all(labels[i] <= i and labels[labels[i]] == labels[i] for i in range(n))


def test_connected_components_examples_and_errors():
    assert connected_components(5, [3, 1], [4, 3]).tolist() == [0, 1, 2, 1, 1]
    assert connected_components(3, [], []).tolist() == [0, 1, 2]
    assert connected_components(0, [], []).tolist() == []
    with pytest.raises(ValueError):
        connected_components(3, [0], [3])
    with pytest.raises(ValueError):
        connected_components(3, [-1], [2])
    # a long path given from its far end still gets the smallest label (path halving, no recursion)
    n = 100_000
    left = np.arange(n - 1, 0, -1)
    labels = connected_components(n, left, left - 1)
    assert (labels == 0).all()


# ----------------------------------------------------------------------------- representatives

def selection_lists(sel):
    return sel.cluster.tolist(), sel.representative.tolist(), sel.similarity.tolist(), sel.removed.tolist()


def same_with_nan(a, b):
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))


@PROPS
@given(g=weighted_graphs())
def test_select_representatives_equal_twin(g):
    n, edges, sims, rank = g
    left, right = arrays(edges)
    sel = select_representatives(n, left, right, np.array(sims, dtype=np.float64), np.array(rank))
    cluster, rep, rsim, removed = selection_lists(sel)
    t_cluster, t_rep, t_rsim, t_removed = select_representatives_python(n, edges, sims, rank)
    assert cluster == t_cluster
    assert rep == t_rep
    assert same_with_nan(rsim, t_rsim)
    assert removed == t_removed
    # the kernel's own count of each cluster's members, at its primary representative (0 elsewhere)
    heads = [c for c in t_cluster if c >= 0]
    assert sel.sizes.tolist() == [heads.count(i) for i in range(n)]


@PROPS
@given(g=weighted_graphs())
def test_selection_invariants(g):
    n, edges, sims, rank = g
    left, right = arrays(edges)
    sel = select_representatives(n, left, right, np.array(sims, dtype=np.float64), np.array(rank))
    cluster, rep, rsim, removed = selection_lists(sel)
    labels = connected_components_python(n, edges)
    best = {}
    for (a, b), s in zip(edges, sims):
        for x, y in ((a, b), (b, a)):
            best[x, y] = max(best.get((x, y), -1.0), s)
    has_edge = {a for e in edges for a in e}
    kept = [i for i in range(n) if not removed[i]]
    pos = {j: (rank[j], j) for j in range(n)}   # keep order: rank, ties to the earlier document
    for i in range(n):
        if i not in has_edge:
            # alone: kept, in no cluster
            assert cluster[i] == -1 and rep[i] == -1 and not removed[i] and math.isnan(rsim[i])
            continue
        # the cluster is named by its first member in keep order, which is kept
        members = [j for j in range(n) if labels[j] == labels[i]]
        head = min(members, key=pos.get)
        assert cluster[i] == head and not removed[head]
        if removed[i]:
            r = rep[i]
            # the representative is kept, in the same cluster, earlier in keep order, with an edge
            assert r >= 0 and not removed[r] and labels[r] == labels[i] and pos[r] < pos[i]
            assert (i, r) in best
            # and the most similar of the neighbours kept before it was visited (ties: earlier in keep order)
            kept_nbrs = [u for u in range(n) if (i, u) in best and not removed[u] and pos[u] < pos[i]]
            top = max(best[i, u] for u in kept_nbrs)
            assert rsim[i] == top
            tied = [u for u in kept_nbrs if best[i, u] == top]
            assert r in tied
            assert r == min(tied, key=lambda u: (rank[u], u))
        else:
            assert rep[i] == -1 and math.isnan(rsim[i])
            # kept: no kept neighbour comes before it (else it would have been removed for it)
            assert not any((i, u) in best and not removed[u] and pos[u] < pos[i] for u in range(n))
    # no two kept documents share an edge (an independent set) ...
    assert not any((a, b) in best for a in kept for b in kept)
    # ... and it is maximal: every removed document has a kept neighbour
    assert all(any((i, u) in best for u in kept) for i in range(n) if removed[i])


def test_chain_guard():
    """A ~ B, B ~ C, A not ~ C: A kept, B removed for A, C kept (not removed for a document it is not like)."""
    A, B, C = 0, 1, 2
    sel = select_representatives(3, [A, B], [B, C], [0.9, 0.85])
    assert sel.removed.tolist() == [False, True, False]
    assert sel.representative.tolist() == [-1, A, -1]
    assert sel.similarity[B] == 0.9 and np.isnan(sel.similarity[A]) and np.isnan(sel.similarity[C])
    assert sel.cluster.tolist() == [A, A, A]
    assert sel.n_clusters == 1


def test_long_chain_alternates():
    n = 7
    left = np.arange(n - 1)
    sel = select_representatives(n, left, left + 1, np.full(n - 1, 0.9))
    assert sel.removed.tolist() == [False, True, False, True, False, True, False]
    assert sel.representative.tolist() == [-1, 0, -1, 2, -1, 4, -1]


def test_representative_is_the_most_similar_kept_document():
    # 0 and 1 are kept (not alike); 2 is like both, more like 1
    sel = select_representatives(3, [0, 1], [2, 2], [0.82, 0.95])
    assert sel.removed.tolist() == [False, False, True]
    assert sel.representative[2] == 1 and sel.similarity[2] == 0.95
    # a tie goes to the earlier document in keep order
    sel = select_representatives(3, [0, 1], [2, 2], [0.9, 0.9], rank=np.array([1, 0, 2]))
    assert sel.representative[2] == 1


def test_selection_indices_are_int32_and_checked_before_the_cast():
    """The kernel's index arrays are int32 when the documents and pairs fit (half the memory to
    fault in): its results too. A pair's index too large for int32 is refused, not wrapped into
    the range by the cast."""
    sel = select_representatives(5, np.array([0, 3, 1]), np.array([1, 4, 2]), np.array([0.9, 0.8, 0.85]))
    assert sel.cluster.dtype == np.int32 and sel.representative.dtype == np.int32
    assert sel.cluster.tolist() == [0, 0, 0, 3, 3] and sel.representative.tolist() == [-1, 0, -1, -1, 3]
    with pytest.raises(ValueError):
        select_representatives(3, np.array([2 ** 32 + 1]), np.array([1]), np.array([0.9]))


def test_input_order_and_a_permutation_visit_alike():
    """keep first (rank i of document i) is visited as it is, any other rank by a counting sort:
    a rank that reverses two documents of a pair keeps the other one, input order the first."""
    first = select_representatives(4, [0, 2], [1, 3], [0.9, 0.9])
    assert first.removed.tolist() == [False, True, False, True]
    swapped = select_representatives(4, [0, 2], [1, 3], [0.9, 0.9], rank=np.array([1, 0, 2, 3]))
    assert swapped.removed.tolist() == [True, False, False, True]
    assert swapped.representative.tolist() == [1, -1, -1, 2] and swapped.cluster.tolist() == [1, 1, 2, 2]
    assert keep_order(4).tolist() == [0, 1, 2, 3]


def test_keep_order_changes_who_is_kept():
    # a star around 2; keeping the longest keeps 2 and removes the rest
    lengths = np.array([10, 20, 99, 5])
    rank = keep_order(4, "longest", lengths=lengths)
    sel = select_representatives(4, [0, 1, 3], [2, 2, 2], [0.9, 0.9, 0.9], rank)
    assert sel.removed.tolist() == [True, True, False, True]
    assert sel.representative.tolist() == [2, 2, -1, 2]
    assert sel.cluster.tolist() == [2, 2, 2, 2]


def test_no_pairs():
    sel = select_representatives(4, [], [], [])
    assert sel.removed.tolist() == [False] * 4
    assert sel.cluster.tolist() == [-1] * 4 and sel.n_clusters == 0


# ----------------------------------------------------------------------------- keep order

def order_of(rank):
    return np.argsort(rank).tolist()


def test_keep_order_first():
    assert keep_order(5).tolist() == [0, 1, 2, 3, 4]
    assert keep_order(0).tolist() == []


def test_keep_order_longest_ties_by_input_order():
    rank = keep_order(5, "longest", lengths=[3, 10, 10, 1, 3])
    assert order_of(rank) == [1, 2, 0, 4, 3]
    assert sorted(rank.tolist()) == list(range(5))


def test_keep_order_score_nan_last_ties_by_input_order():
    scores = np.array([0.5, np.nan, 0.9, 0.9, np.nan, -1.0, 0.0])
    rank = keep_order(7, "score:quality", scores=scores)
    assert order_of(rank) == [2, 3, 0, 6, 5, 1, 4]
    # a missing score is not treated as 0
    assert rank[6] < rank[1]
    assert keep_order(3, "score:q", scores=[-np.inf, np.inf, np.nan]).tolist() == [1, 0, 2]


def test_keep_order_errors():
    with pytest.raises(ValueError):
        keep_order(3, "longest")
    with pytest.raises(ValueError):
        keep_order(3, "score:x")
    with pytest.raises(ValueError):
        keep_order(3, "random")


def test_tied_ranks_go_to_the_earlier_document():
    n = 16  # numba's quicksort starts reordering equal keys at 16 elements
    left = np.arange(n - 1)
    sel = select_representatives(n, left, left + 1, np.full(n - 1, 0.9), np.zeros(n, dtype=np.int64))
    twin = select_representatives_python(n, list(zip(left.tolist(), (left + 1).tolist())), [0.9] * (n - 1),
                                         [0] * n)
    assert sel.cluster.tolist() == twin[0] == [0] * n


def test_tied_ranks_representative_tie_break():
    # 0 and 1 are kept (no edge between them); 2 is as like 0 as 1; equal ranks: the earlier document, 0
    sel = select_representatives(3, [1, 0], [2, 2], [0.8, 0.8], np.zeros(3, dtype=np.int64))
    assert sel.removed.tolist() == [False, False, True]
    assert sel.representative[2] == 0


@PROPS
@given(st.integers(2, 300), st.integers(1, 400), st.integers(0, 2**31))
def test_star_steps_give_the_connected_components(n, m, seed):
    """The large-star / small-star steps (the Ray engine's connected components) label every
    document with an edge by the smallest document of its component, as union-find does."""
    rng = np.random.default_rng(seed)
    left, right = rng.integers(0, n, m), rng.integers(0, n, m)
    left, right = left[left != right], right[left != right]
    docs, labels = star_components(left, right)
    order = np.argsort(docs)
    docs, labels = docs[order], labels[order]
    assert np.array_equal(docs, np.unique(np.concatenate([left, right])))
    assert np.array_equal(labels, connected_components(n, left, right)[docs])


def test_large_star_counts_the_nodes_not_yet_in_a_star():
    # a path 0-1-2-3: node 1 has a smaller neighbour (0) and another (2): not a star yet
    hi, lo = np.array([1, 2, 3]), np.array([0, 1, 2])
    assert large_star(np.concatenate([hi, lo]), np.concatenate([lo, hi]))[2] > 0
    # a star centred on 0: converged
    hi, lo = np.array([1, 2, 3]), np.array([0, 0, 0])
    new_hi, new_lo, nonstar = large_star(np.concatenate([hi, lo]), np.concatenate([lo, hi]))
    assert nonstar == 0 and sorted(zip(new_hi.tolist(), new_lo.tolist())) == [(1, 0), (2, 0), (3, 0)]
    # small-star links every node of a node's smaller side to their minimum
    hi, lo = small_star(np.array([3, 3]), np.array([1, 2]))
    assert sorted(zip(hi.tolist(), lo.tolist())) == [(2, 1), (3, 1)]



def test_select_representatives_takes_ranks_of_any_values():
    """The kernel orders by ranks in [0, n) (a counting sort): a caller's ranks outside it (negative,
    n or more, far apart) select as their dense equivalents, ties included, as the twin does."""
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)]
    sims = [0.9, 0.8, 1.0, 0.85, 0.9]
    for wild, dense in (([-5, 10 ** 12, 7, -5, 8], [0, 3, 1, 0, 2]), ([50, 40, 30, 20, 10], [4, 3, 2, 1, 0]),
                        ([5, 5, 5, 5, 6], [0, 0, 0, 0, 1])):
        got = selection_lists(select_representatives(5, *arrays(edges), np.array(sims), np.array(wild)))
        want = select_representatives_python(5, edges, sims, dense)
        assert got[0] == want[0] and got[1] == want[1] and got[3] == want[3]
        assert same_with_nan(got[2], want[2])
