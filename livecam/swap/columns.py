"""numpy's column statistics of (n, c) float32 arrays, bit for bit, without its slow loop.

``x.mean(axis=0)`` and ``x.std(axis=0)`` of a C-ordered (n, c) array loop over the n rows
adding c values at a time, in float32 and in row order (no pairwise sum along this axis).
With c = 2 or 3 (a face's skin pixels' Lab) that loop is slow: 85 us for 5000 rows. The
running sum of each column (``np.add.accumulate`` along the rows) adds the same values in the
same order at about two thirds of the cost, so its last row is numpy's sum, to the bit; the
colour statistics (``colour.py``, ``highlights.py``) take their means and spreads from here.
A single column (c = 1) numpy sums pairwise, as a 1-D array: those keep numpy's own.
Pure functions; any thread.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]


def _column_sums(values: FloatArray) -> FloatArray:
    """``values.sum(axis=0)`` of (n > 0, c) float32: numpy's float32 sums (row order for
    c > 1)."""
    if values.shape[1] == 1:
        return np.asarray(values.sum(axis=0), np.float32)
    return np.add.accumulate(values, axis=0)[-1]


def column_means(values: FloatArray) -> FloatArray:
    """``values.mean(axis=0)`` (c,) float32 of (n > 0, c) float32, the same values."""
    return np.asarray(_column_sums(values) / np.float32(len(values)), np.float32)


def column_stds(values: FloatArray) -> FloatArray:
    """``values.std(axis=0)`` (c,) float32 of (n > 0, c) float32, the same values: numpy's
    steps (the mean, the squared deviations' mean, its root)."""
    n = np.float32(len(values))
    dev = values - _column_sums(values) / n
    dev *= dev
    return np.asarray(np.sqrt(_column_sums(dev) / n), np.float32)


def percentiles(values: FloatArray, qs: tuple[float, ...]) -> npt.NDArray[np.float64]:
    """``np.percentile(values, qs)`` (its default, linear method) of (n > 0,) float32
    ``values``, the same float64 values. Whole 8-bit levels (the live skin's lightness) take
    their order statistics from a histogram and numpy's interpolation steps written out
    (np.percentile's partition and dozen small steps cost 70 us a call); others numpy's own."""
    levels = values.astype(np.uint8)
    if not np.array_equal(levels, values):
        return np.asarray(np.percentile(values, qs), np.float64)
    n = len(values)
    cumulative = np.cumsum(np.bincount(levels, minlength=256))
    virtual = (n - 1) * np.true_divide(np.asarray(qs, np.float64), 100)
    below = np.floor(virtual)
    above = below + 1
    last = virtual >= n - 1  # numpy takes the last value (index -1) for both
    below[last] = -1
    above[last] = -1
    below_i, above_i = below.astype(np.intp), above.astype(np.intp)
    # the k-th smallest value: the first level whose running count passes k
    low = np.searchsorted(cumulative, below_i % n, side="right").astype(np.float32)
    high = np.searchsorted(cumulative, above_i % n, side="right").astype(np.float32)
    gamma = virtual - below_i
    diff = high - low
    out = np.asarray(low + diff * gamma, np.float64)
    np.subtract(high, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return out
