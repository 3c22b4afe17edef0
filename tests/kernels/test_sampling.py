"""The audit's pair sampling kernel (neardup.kernels.sampling.run_pairs) against its definition."""

import numpy as np

from neardup.kernels.sampling import run_pairs


def test_run_pairs_are_the_pairs_of_each_run_of_equal_values_or_cap_of_them():
    rng = np.random.default_rng(5)
    values = rng.integers(0, 12, size=60).astype(np.uint64)
    order = np.argsort(values, kind="stable").astype(np.int64)
    sizes = np.bincount(values.astype(np.int64))
    for cap in (1000, 20):
        left, right = run_pairs(order, values, cap, 7)
        want = sum(min(c * (c - 1) // 2, cap) for c in sizes.tolist())
        assert len(left) == len(right) == want
        assert (values[left] == values[right]).all() and (left != right).all()
        if cap == 1000:  # every run's pairs, each once
            pairs = {tuple(sorted(p)) for p in zip(left.tolist(), right.tolist())}
            assert len(pairs) == want
