"""Clusters of near-duplicates, their representatives, and the guard against chains.

1. Union-find (union by smaller index, path halving) over the verified pairs gives the
   connected components: the *clusters*.
2. The documents of each cluster are visited in *keep order*: input order for ``first``;
   longer text first for ``longest``; higher score first for ``score:COLUMN`` (missing scores
   last); ties always go to the earlier document. The first visited document of a cluster is
   kept; it is the cluster's *primary representative* and names the cluster.
3. The chain guard: a later document is removed only if it has a verified pair, with
   similarity at or above the threshold, with a document of its cluster that is already kept;
   its *representative* is that kept document (the most similar one; ties to the earlier in
   keep order). Otherwise it is kept too. So A~B and B~C with A not like C keep A, remove B
   (for A) and keep C: a chain never removes a document for a representative it is not like.
   Every removed document names a kept document it duplicates, and no two kept documents of a
   cluster form a verified pair.

This is a greedy maximal independent set in keep order; it is deterministic and needs only
the verified pairs (O(pairs) work, however long the chains).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from .compile import kernel
from ..config import Output

__all__ = ["connected_components", "large_star", "small_star", "star_labels", "star_components", "keep_order",
           "select_representatives", "Selection", "connected_components_python", "select_representatives_python"]


@kernel()
def _find(parent, x):
    # x an int64 at every call site: one version a type of ``parent`` (the pairs' index type:
    # int64, or int32 in select_representatives), not one more a type of x
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@kernel()
def _components_kernel(n, left, right):
    parent = np.empty(n, left.dtype)  # the pairs' index type (select_representatives: int32 when it can)
    for x in range(n):
        parent[x] = x
    for p in range(left.shape[0]):
        a = _find(parent, np.int64(left[p]))
        b = _find(parent, np.int64(right[p]))
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    for x in range(n):
        parent[x] = _find(parent, x)
    return parent


def connected_components(n: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Label of every document: the smallest document index of its connected component."""
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    _check_pairs(n, left, right)
    return _components_kernel(int(n), left, right)


def _check_pairs(n: int, left: np.ndarray, right: np.ndarray) -> None:
    if len(left) and (min(left.min(), right.min()) < 0 or max(left.max(), right.max()) >= n):
        raise ValueError("pair indices must lie in [0, n)")


def keep_order(n: int, keep: str = Output.keep, lengths: Optional[np.ndarray] = None,
               scores: Optional[np.ndarray] = None) -> np.ndarray:
    """Rank of every document in keep order (0 = kept first)."""
    idx = np.arange(n, dtype=np.int64)
    if keep == "first":
        return idx  # the order is the rank (no second array of n written through a permutation)
    if keep == "longest":
        if lengths is None:
            raise ValueError("keep='longest' needs the document lengths")
        order = np.lexsort((idx, -np.asarray(lengths, dtype=np.int64)))
    elif keep.startswith("score:"):
        if scores is None:
            raise ValueError("keep='score:COLUMN' needs the scores")
        s = np.asarray(scores, dtype=np.float64)
        missing = np.isnan(s)
        order = np.lexsort((idx, -np.where(missing, 0.0, s), missing))
    else:
        raise ValueError(f"keep must be 'first', 'longest' or 'score:COLUMN', got {keep!r}")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = idx
    return rank


@dataclass
class Selection:
    """For every document i (index into the input):

    cluster[i]          primary representative of its cluster (-1 when in no cluster of 2+)
    representative[i]   the kept document it duplicates (-1 when kept)
                        (both int32 when the documents and pairs fit, else int64)
    similarity[i]       its verified similarity to representative[i] (NaN when kept)
    removed[i]          bool
    sizes[i]            the members of the cluster i is the primary representative of (0: none;
                        the index type), counted by the kernel's last pass (None: not counted)
    """

    cluster: np.ndarray
    representative: np.ndarray
    similarity: np.ndarray
    removed: np.ndarray
    sizes: Optional[np.ndarray] = None

    @property
    def n_clusters(self) -> int:
        c = self.cluster[self.cluster >= 0]
        return int(len(np.unique(c)))


@kernel(nogil=True)
def _select_kernel(n, left, right, sim, rank):
    # the components in the same kernel: one kernel to load in a process, not two; without the
    # GIL: the clusters stage gathers the members' columns in a thread meanwhile. Every index
    # array is of the pairs' index type (int32 when it can: half the pages to fault in and fill)
    # and no array is made that another can stand for: at 1M documents (214,229 members), 8 MB
    # in nine arrays where fifteen arrays of int64 indices took 22 MB
    idx = left.dtype
    labels = _components_kernel(n, left, right)
    # adjacency in CSR, both directions: document i's edges at [deg[i + 1], deg[i + 2]) once each
    # edge is put at the end of its documents' room, moving that end down (no second array of ends)
    deg = np.zeros(n + 2, idx)
    for p in range(left.shape[0]):
        deg[left[p] + 1] += 1
        deg[right[p] + 1] += 1
    for i in range(n):
        deg[i + 1] += deg[i]  # the end of document i's room
    deg[n + 1] = deg[n]
    nbr = np.empty(deg[n], idx)
    nsim = np.empty(deg[n], np.float64)
    for p in range(left.shape[0]):
        a = left[p]
        b = right[p]
        deg[a + 1] -= 1
        nbr[deg[a + 1]] = b
        nsim[deg[a + 1]] = sim[p]
        deg[b + 1] -= 1
        nbr[deg[b + 1]] = a
        nsim[deg[b + 1]] = sim[p]
    # documents visited in keep order: by rank (in [0, n)), ties to the earlier document. Input
    # order (``keep first``: rank i of document i) is visited as it is; any other by a counting
    # sort (numba's merge sort took 9 ms of the 1M corpus's 214,229 members, sorted or not).
    # Loops, not np.flatnonzero / np.full / array comparisons: those make the cached kernel's
    # environment import numba.np.arraymath and npyimpl when it is loaded (~46 ms a run)
    plain = True
    for i in range(n):
        if rank[i] != i:
            plain = False
            break
    order = np.empty(0 if plain else n, idx)
    visits = n
    if not plain:
        at = np.zeros(n + 1, idx)
        for i in range(n):
            if deg[i + 2] > deg[i + 1]:
                at[rank[i] + 1] += 1
        for i in range(n):
            at[i + 1] += at[i]
        visits = at[n]  # the documents with an edge
        for i in range(n):
            if deg[i + 2] > deg[i + 1]:
                order[at[rank[i]]] = i
                at[rank[i]] += 1
    status = np.zeros(n, np.int8)  # 0 undecided, 1 kept, 2 removed
    rep = np.empty(n, idx)
    rsim = np.empty(n, np.float64)
    head = np.empty(n, idx)  # label -> primary representative
    for i in range(n):
        rep[i] = -1
        rsim[i] = np.nan
        head[i] = -1
    for t in range(visits):
        d = t if plain else order[t]
        if deg[d + 2] == deg[d + 1]:  # no edge: in no cluster
            continue
        best = -1
        best_sim = -1.0
        for e in range(deg[d + 1], deg[d + 2]):
            u = nbr[e]
            if status[u] == 1:
                s = nsim[e]
                if s > best_sim or (s == best_sim and (rank[u] < rank[best] or
                                                       (rank[u] == rank[best] and u < best))):
                    best = u
                    best_sim = s
        if best >= 0:
            status[d] = 2
            rep[d] = best
            rsim[d] = best_sim
        else:
            status[d] = 1
        if head[labels[d]] < 0:
            head[labels[d]] = d
    removed = np.empty(n, np.bool_)
    sizes = np.zeros(n, idx)  # the members of the cluster each document heads (0: none), counted in the same pass
    for i in range(n):  # each document's label becomes its cluster's primary representative
        removed[i] = status[i] == 2
        if deg[i + 2] > deg[i + 1]:
            h = head[labels[i]]
            labels[i] = h
            sizes[h] += 1
        else:
            labels[i] = -1
    return labels, rep, rsim, removed, sizes


def select_representatives(n: int, left: np.ndarray, right: np.ndarray, similarity: np.ndarray,
                           rank: Optional[np.ndarray] = None) -> Selection:
    """Clusters, representatives and removals from verified pairs (see the module docstring).

    ``rank`` is the keep order from :func:`keep_order` (default: input order).
    """
    # writable, contiguous arrays: numba types a read-only array (Arrow's zero-copy to_numpy) apart
    # and would compile the kernel again for it on first use; indices as int32 when the documents
    # and both ends of every pair fit (the kernel's index arrays take their type)
    left, right = np.asarray(left), np.asarray(right)
    _check_pairs(n, left, right)  # before the cast, which would wrap an index too large for int32
    index = np.int32 if max(n, 2 * len(left) + 2) < 2 ** 31 else np.int64
    left = np.require(left, index, "CW")
    right = np.require(right, index, "CW")
    sim = np.require(similarity, np.float64, "CW")
    rank = np.arange(n, dtype=np.int64) if rank is None else np.require(rank, np.int64, "CW")
    if n and (rank.min() < 0 or rank.max() >= n):  # a caller's own ranks: made dense, the same order and ties
        rank = np.unique(rank, return_inverse=True)[1].astype(np.int64).reshape(n)
    cluster, rep, rsim, removed, sizes = _select_kernel(int(n), left, right, sim, rank)
    return Selection(cluster=cluster, representative=rep, similarity=rsim, removed=removed, sizes=sizes)


# --------------------------------------------------------------------------- connected components by stars
# For a graph too large for one process (Kiveris et al., "Connected Components in MapReduce and
# Beyond", SoCC 2014): edges (hi, lo), hi > lo, are grouped by node, and two steps alternate until
# every component is a star centred on its smallest node. A step needs, for each node, all its
# edges together (a keyed shuffle on the node delivers them); it is a few sorts over arrays.
#   large-star(u): m = min(N(u) + u); (v, m) for every neighbour v > u.
#   small-star(u): N = neighbours < u, m = min(N); (v, m) for every v in N + u but m.
# The input of a large-star step is a forest of stars centred on their minimum (so: done) iff no
# node has a smaller neighbour together with any other neighbour; large_star counts such nodes.


def _grouped(node: np.ndarray, nbr: np.ndarray):
    order = np.lexsort((nbr, node))
    node, nbr = node[order], nbr[order]
    keep = np.ones(len(node), bool)
    keep[1:] = (node[1:] != node[:-1]) | (nbr[1:] != nbr[:-1])
    node, nbr = node[keep], nbr[keep]
    starts = np.flatnonzero(np.concatenate(([True], node[1:] != node[:-1])))
    return node, nbr, starts, np.diff(np.append(starts, len(node)))


def large_star(node: np.ndarray, nbr: np.ndarray) -> Tuple[np.ndarray, np.ndarray, int]:
    """One large-star step over (node, neighbour) rows holding every edge of their nodes, in both
    directions: the new edges (hi, lo) and how many nodes are not yet the leaf or centre of a
    star (0 over the whole graph: converged)."""
    if len(node) == 0:
        return node[:0], node[:0], 0
    node, nbr, starts, sizes = _grouped(np.asarray(node, np.int64), np.asarray(nbr, np.int64))
    m = np.minimum(np.minimum.reduceat(nbr, starts), node[starts])
    smaller = np.add.reduceat((nbr < node).astype(np.int64), starts)
    nonstar = int(((smaller >= 2) | ((smaller >= 1) & (sizes > smaller))).sum())
    out = nbr > node
    return nbr[out], np.repeat(m, sizes)[out], nonstar


def small_star(node: np.ndarray, nbr: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """One small-star step over (node, smaller neighbour) rows holding every such edge of their
    nodes: the new edges (hi, lo)."""
    if len(node) == 0:
        return node[:0], node[:0]
    node, nbr, starts, sizes = _grouped(np.asarray(node, np.int64), np.asarray(nbr, np.int64))
    m = np.minimum.reduceat(nbr, starts)
    mm = np.repeat(m, sizes)
    keep = nbr != mm
    return np.concatenate([nbr[keep], node[starts]]), np.concatenate([mm[keep], m])


def star_labels(hi: np.ndarray, lo: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Converged stars (leaf hi, centre lo) -> (document, label) of every leaf and centre."""
    centres = np.unique(lo)
    return np.concatenate([hi, centres]), np.concatenate([lo, centres])


def star_components(left: np.ndarray, right: np.ndarray, max_rounds: int = 200) -> Tuple[np.ndarray, np.ndarray]:
    """The star steps run in one process over every edge: (document, label = smallest document of
    its component) for each document with an edge. The reference for the distributed run of the
    same steps (:mod:`neardup.stages.clusters`); equal to :func:`connected_components`."""
    left, right = np.asarray(left, np.int64), np.asarray(right, np.int64)
    hi, lo = np.maximum(left, right), np.minimum(left, right)
    for _ in range(max_rounds):
        hi, lo, nonstar = large_star(np.concatenate([hi, lo]), np.concatenate([lo, hi]))
        if nonstar == 0:
            return star_labels(hi, lo)
        hi, lo = small_star(hi, lo)
    raise RuntimeError("internal error: connected components did not converge; please report this bug")


# --------------------------------------------------------------------------- plain Python twins

def connected_components_python(n, pairs):
    labels = list(range(n))
    adj = {i: set() for i in range(n)}
    for a, b in pairs:
        adj[a].add(b)
        adj[b].add(a)
    seen = set()
    for s in range(n):
        if s in seen:
            continue
        comp, stack = [], [s]
        seen.add(s)
        while stack:
            x = stack.pop()
            comp.append(x)
            for y in adj[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        m = min(comp)
        for x in comp:
            labels[x] = m
    return labels


def select_representatives_python(n, pairs, sims, rank=None):
    """Twin of :func:`select_representatives`: returns (cluster, representative, similarity, removed) lists."""
    rank = list(range(n)) if rank is None else list(rank)
    adj = {i: [] for i in range(n)}
    for (a, b), s in zip(pairs, sims):
        adj[a].append((b, s))
        adj[b].append((a, s))
    labels = connected_components_python(n, pairs)
    status = {}
    rep = [-1] * n
    rsim = [float("nan")] * n
    head = {}
    for d in sorted((i for i in range(n) if adj[i]), key=lambda i: rank[i]):
        kept = [(s, u) for u, s in adj[d] if status.get(u) == "kept"]
        if kept:
            s, u = max(kept, key=lambda t: (t[0], -rank[t[1]], -t[1]))
            status[d] = "removed"
            rep[d], rsim[d] = u, s
        else:
            status[d] = "kept"
        head.setdefault(labels[d], d)
    cluster = [head[labels[i]] if adj[i] else -1 for i in range(n)]
    removed = [status.get(i) == "removed" for i in range(n)]
    return cluster, rep, rsim, removed
