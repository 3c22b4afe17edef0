"""Shared fixtures (no autouse: every test asks for what it uses)."""

import numpy as np
import pytest


def _jaccard_pairs(jaccards, size=200, seed=0):
    """Pairs of sets of random 64-bit hashes with a controlled exact Jaccard.

    For each target J the union has ``size`` distinct hashes, round(J * size) of them shared, the
    rest split between the two sides. Returns (offsets int64[2m+1], hashes uint64, exact J float64[m]):
    documents 2i and 2i+1 form pair i, each sorted and unique, as :func:`neardup.verify.exact_jaccard`
    and ``MinHasher.signatures_from_sets`` expect.
    """
    rng = np.random.default_rng(seed)
    jaccards = np.asarray(jaccards, dtype=np.float64)
    m = len(jaccards)
    common = np.rint(jaccards * size).astype(np.int64)
    only_a = (size - common) // 2
    only_b = size - common - only_a
    raw = rng.integers(0, np.iinfo(np.uint64).max, size=(m, size), dtype=np.uint64, endpoint=True)
    sets, offsets = [], [0]
    for i in range(m):
        vals = raw[i]
        if len(np.unique(vals)) != size:  # pragma: no cover - probability about size^2 / 2^65
            vals = np.unique(np.concatenate([vals, rng.integers(0, 1 << 62, size=size, dtype=np.uint64)]))[:size]
        c, a = common[i], only_a[i]
        for part in (vals[:c + a], np.concatenate([vals[:c], vals[c + a:]])):
            part = np.sort(part)
            sets.append(part)
            offsets.append(offsets[-1] + len(part))
    exact = common / float(size)
    return np.asarray(offsets, dtype=np.int64), np.concatenate(sets), exact


@pytest.fixture
def jaccard_pairs():
    """Factory: ``jaccard_pairs(jaccards, size=200, seed=0) -> (offsets, hashes, exact_jaccard)``."""
    return _jaccard_pairs
