"""The Kalman filter's closed-form gain and batched predict against the textbook formulas."""

from __future__ import annotations

import numpy as np

from livecam.track.kalman import KalmanBoxFilter, xyxy_to_xyah


def _textbook_update(kf: KalmanBoxFilter, mean: np.ndarray, cov: np.ndarray,
                     xyah: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h_mat = np.eye(4, 8)
    h = mean[3]
    r = np.diag(np.array([kf.std_pos * h, kf.std_pos * h, 1e-1, kf.std_pos * h]) ** 2)
    s = h_mat @ cov @ h_mat.T + r
    gain = np.linalg.solve(s, (cov @ h_mat.T).T).T
    return mean + gain @ (xyah - h_mat @ mean), cov - gain @ s @ gain.T


def _textbook_predict(kf: KalmanBoxFilter, mean: np.ndarray, cov: np.ndarray,
                      ) -> tuple[np.ndarray, np.ndarray]:
    f = np.eye(8)
    f[:4, 4:] = np.eye(4)
    h = mean[3]
    q = np.diag(np.array([kf.std_pos * h, kf.std_pos * h, 1e-2, kf.std_pos * h,
                          kf.std_vel * h, kf.std_vel * h, 1e-5, kf.std_vel * h]) ** 2)
    return f @ mean, f @ cov @ f.T + q


def test_predict_and_update_equal_the_textbook_kalman_filter_over_a_track() -> None:
    kf = KalmanBoxFilter()
    rng = np.random.default_rng(0)
    mean, cov = kf.initiate(np.array([100.0, 200.0, 0.8, 120.0]))
    ref_mean, ref_cov = mean.copy(), cov.copy()
    for step in range(40):
        means, covs = kf.predict(mean[None], cov[None])
        mean, cov = means[0], covs[0]
        ref_mean, ref_cov = _textbook_predict(kf, ref_mean, ref_cov)
        z = np.array([100.0 + 7 * step, 200.0 - 3 * step, 0.8, 120.0 + step]) + rng.normal(
            0, 2, 4) * [1, 1, 0.01, 1]
        if step % 7 != 3:  # a few frames without a measurement
            mean, cov = kf.update(mean, cov, z)
            ref_mean, ref_cov = _textbook_update(kf, ref_mean, ref_cov, z)
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(cov, ref_cov, rtol=1e-9, atol=1e-9)
    assert abs(mean[4] - 7.0) < 1.0  # and it does track: x velocity ~7 px/frame


def test_one_box_measurement_and_predict_give_the_batched_formulas_bits() -> None:
    """xyxy_to_xyah on plain floats and predict's in-place diagonal against the (N, 4) numpy
    conversion and the fancy-indexed diagonal they replaced, bit for bit."""
    kf = KalmanBoxFilter()
    rng = np.random.default_rng(2)
    b = rng.uniform(0, 1000, (200, 4))
    b[::7, 3] = b[::7, 1]  # zero height: the 1e-6 floor
    h = np.maximum(b[:, 3] - b[:, 1], 1e-6)
    batched = np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2,
                        (b[:, 2] - b[:, 0]) / h, h], axis=1)
    np.testing.assert_array_equal(np.array([xyxy_to_xyah(row) for row in b.tolist()]),
                                  batched)
    means = np.array([kf.initiate(z)[0] for z in batched[:5]]) + rng.normal(0, 3, (5, 8))
    covs = np.array([kf.initiate(z)[1] for z in batched[:5]])
    var = (means[:, 3:4] * kf._std_per_height) ** 2
    var[:, 2], var[:, 6] = 1e-2**2, 1e-5**2
    ref = kf._motion @ covs @ kf._motion.T
    idx = np.arange(8)
    ref[:, idx, idx] += var
    got_means, got_covs = kf.predict(means, covs)
    np.testing.assert_array_equal(got_covs, ref)
    np.testing.assert_array_equal(got_means, means @ kf._motion.T)
