"""The column statistics are numpy's axis-0 mean and std, bit for bit."""

from __future__ import annotations

import numpy as np

from livecam.swap.columns import column_means, column_stds


def test_column_statistics_are_numpys() -> None:
    """(n, 3) arrays and their (n, 2) column slices (numpy sums those in row order) and
    single columns (pairwise), whole numbers and not, short and past numpy's 8192 buffer."""
    rng = np.random.default_rng(7)
    for trial in range(60):
        n = int(rng.integers(1, 20000))
        values = (rng.normal(0, 1, (n, 3)) * rng.uniform(0.1, 300)
                  + rng.uniform(-200, 200)).astype(np.float32)
        if trial % 3 == 0:
            values = np.round(values)
        for part in (values, values[:, 1:], values[:, :1]):
            assert np.array_equal(column_means(part), part.mean(axis=0)), trial
            assert np.array_equal(column_stds(part), part.std(axis=0)), trial
