"""The landmark smoother: its cheaper means give ``ndarray.mean``'s bits, so its output is the
One Euro filter as first written, bit for bit."""

from __future__ import annotations

import math

import numpy as np

from livecam.analysis.smooth import LandmarkSmoother, column_means


def test_column_means_are_means_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    for i in range(400):
        dtype = np.float32 if i % 2 else np.float64
        xy = (rng.normal(0, 1, (int(rng.integers(1, 700)), 2)) * 10 ** rng.uniform(-3, 4)
              + rng.normal(0, 1000)).astype(dtype)
        got = column_means(xy)
        assert got.dtype == xy.mean(axis=0).dtype
        np.testing.assert_array_equal(got, xy.mean(axis=0))


def _reference_one_euro(raw: list[np.ndarray], z: np.ndarray, dt_s: float,
                        max_lag: float) -> list[np.ndarray]:
    """LandmarkSmoother.smooth as first written (ndarray.mean, np.ptp), for one track."""
    def alpha(cutoff_hz: float) -> float:
        return 1.0 / (1.0 + 1.0 / (2.0 * math.pi * cutoff_hz) / dt_s)

    xy, v, out = raw[0].astype(np.float64), (0.0, 0.0), [raw[0]]
    zs = z.astype(np.float64)
    for lm in raw[1:]:
        delta = lm - xy
        raw_vx, raw_vy = (delta.mean(axis=0) / dt_s).tolist()
        a_d = alpha(1.0)
        v = (a_d * raw_vx + (1 - a_d) * v[0], a_d * raw_vy + (1 - a_d) * v[1])
        a = alpha(0.3 + 0.05 * math.hypot(*v))
        delta *= a
        xy += delta
        zs += a * (z - zs)
        lag = lm.mean(axis=0) - xy.mean(axis=0)
        lag_px = float(np.hypot(*lag))
        limit_px = max_lag * float(np.ptp(lm[:, 0]))
        if lag_px > limit_px > 0:
            xy += lag * (1.0 - limit_px / lag_px)
        out.append(xy.astype(np.float32))
    return out


def test_a_moving_face_is_smoothed_as_the_reference_one_euro_filter() -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(300, 500, (468, 2))
    z = rng.normal(0, 5, 468).astype(np.float32)
    # still, then a fast pan (the lag clamp acts), then still again
    shift = np.r_[np.zeros(10), np.cumsum(np.full(15, 25.0)), np.full(10, 375.0)]
    raw = [(base + np.array([s, 0.3 * s]) + rng.normal(0, 0.4, base.shape)).astype(np.float32)
           for s in shift]
    smoother = LandmarkSmoother(min_cutoff_hz=0.3, beta=0.05, derivative_cutoff_hz=1.0,
                                max_lag=0.03)
    got = [smoother.smooth(7, lm, z, 1 / 30)[0] for lm in raw]
    for g, want in zip(got, _reference_one_euro(raw, z, 1 / 30, 0.03), strict=True):
        np.testing.assert_array_equal(g, want)


def test_smooth_writes_into_out_what_it_returns_without_it() -> None:
    rng = np.random.default_rng(2)
    base = rng.uniform(300, 500, (468, 2))
    z = rng.normal(0, 5, 468).astype(np.float32)
    plain, into = LandmarkSmoother(max_lag=0.03), LandmarkSmoother(max_lag=0.03)
    batch_xy = np.zeros((2, 468, 2), np.float32)
    batch_z = np.zeros((2, 468), np.float32)
    for i in range(12):
        lm = (base + 20.0 * i + rng.normal(0, 0.4, base.shape)).astype(np.float32)
        want_xy, want_z = plain.smooth(3, lm, z, 1 / 30)
        got_xy, got_z = into.smooth(3, lm, z, 1 / 30, out=(batch_xy[1], batch_z[1]))
        assert np.shares_memory(got_xy, batch_xy[1]) and np.shares_memory(got_z, batch_z[1])
        np.testing.assert_array_equal(batch_xy[1], want_xy)
        np.testing.assert_array_equal(batch_z[1], want_z)
        assert not batch_xy[0].any() and not batch_z[0].any()
