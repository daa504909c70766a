"""The column statistics are numpy's axis-0 mean and std, bit for bit."""

from __future__ import annotations

import numpy as np

from livecam.swap.columns import column_means, column_stds, percentiles


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


def test_percentiles_are_numpys() -> None:
    """Whole 8-bit levels from the histogram, other values by numpy: np.percentile's float64
    values bit for bit, for one value and many, at the ends and between."""
    rng = np.random.default_rng(9)
    for trial in range(300):
        n = int(rng.integers(1, 9000)) if trial % 4 else int(rng.integers(1, 6))
        values = np.round(rng.normal(rng.uniform(20, 230), rng.uniform(0.5, 60), n))
        values = np.clip(values, 0, 255).astype(np.float32)
        if trial % 7 == 0:
            values += np.float32(0.5)  # not whole levels
        for qs in ((1.0, 99.0), (75.0,), (0.0, 100.0), (50.0, 12.5, 99.9)):
            want = np.percentile(values, qs)
            assert np.array_equal(percentiles(values, qs), want), (trial, qs)
