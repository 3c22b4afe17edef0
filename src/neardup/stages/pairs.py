"""Stage ``pairs``: buckets -> verified pairs, one partition at a time.

A partition is a set of buckets (runs of documents sharing a key in one band). The local driver
makes one partition of every bucket with a global sort; the Ray driver makes many with a keyed
shuffle on the band key and then on each bucket's smallest member. Either way each partition goes
through :func:`search_partition` (members in keep order, star pairs on the anchor, verification,
re-anchoring of the members that failed, see :func:`neardup.bands.find_pairs`), and the checked
pairs of all partitions through :func:`distinct_pairs` (a pair met in two partitions is
verified in each, with the same result).
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import numpy as np
import pyarrow as pa

from ..arrays import arrow, to_numpy
from ..bands import find_pairs, pair_codes, split_codes
from ..clusters import keep_order
from ..progress import check_interrupt
from ..verify import estimated_jaccard, exact_jaccard_raw
from .read import DocStore

VERIFY_CHUNK = 1 << 16  # pairs verified at a time: bounds the shingle sets held in memory

CHECKED_SCHEMA = pa.schema([("code", pa.uint64()), ("passed", pa.bool_()), ("similarity", pa.float64())])


def make_verifier(store: DocStore, config) -> Callable[[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]]:
    """verify(left, right) -> (passed, similarity) over document indices, for the configured
    mode; the data of the pairs' documents is read from the store a chunk of pairs at a time."""
    threshold = config.threshold

    def verify(left, right):
        sim = np.empty(len(left), dtype=np.float64)
        for lo in range(0, len(left), VERIFY_CHUNK):
            check_interrupt()
            hi = min(lo + VERIFY_CHUNK, len(left))
            docs, inverse = np.unique(np.concatenate([left[lo:hi], right[lo:hi]]), return_inverse=True)
            m = hi - lo
            if config.verify == "exact":
                offsets, hashes = store.fingerprints(docs)
                sim[lo:hi] = exact_jaccard_raw(offsets, hashes, inverse[:m], inverse[m:])
            else:
                sim[lo:hi] = estimated_jaccard(store.signatures(docs), inverse[:m], inverse[m:])
        if config.verify == "none":  # every candidate pair is a duplicate; the estimate is reported
            return np.ones(len(left), dtype=bool), sim
        return sim >= threshold, sim

    return verify


def keep_rank(docs: np.ndarray, store: DocStore, config) -> np.ndarray:
    """The keep order (0 = kept first) of ascending ``docs``; among the corpus' documents it orders
    them as the rank of the whole corpus does, so partitions agree with one global sort."""
    columns = (["length"] if config.keep == "longest" else []) + (["score"] if config.score_column else [])
    values = store.columns(docs, columns) if columns else {}
    return keep_order(len(docs), config.keep, lengths=values.get("length"), scores=values.get("score"))


def search_partition(run_offsets: np.ndarray, members: np.ndarray, verify, config) -> Tuple[pa.Table, Dict]:
    """Buckets (``members[run_offsets[i]:run_offsets[i+1]]``, document indices in keep order)
    -> every distinct pair checked (code, passed, similarity) and the partition's counts."""
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
    counts = {"buckets": search.buckets, "anchor_rounds": search.rounds,
              "truncated_buckets": search.truncated_buckets, "verifications": len(codes)}
    return table, counts


def distinct_pairs(checked: pa.Table) -> Tuple[pa.Table, int]:
    """Checked pairs of one pair-code partition -> (verified pairs in PAIRS_SCHEMA order of
    (left, right), distinct candidate pairs)."""
    codes = to_numpy(checked.column("code"))
    passed = to_numpy(checked.column("passed"))
    sim = to_numpy(checked.column("similarity"))
    uniq, first = np.unique(codes, return_index=True)
    keep = passed[first]
    left, right = split_codes(uniq[keep])
    return pa.table({"left": arrow(left), "right": arrow(right),
                     "similarity": arrow(sim[first][keep])}), int(len(uniq))
