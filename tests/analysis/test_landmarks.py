"""Named mesh subsets: plain numpy, no model."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.analysis.landmarks import (
    LIP_MIDPOINTS,
    TRAGION_IMAGE_LEFT,
    TRAGION_IMAGE_RIGHT,
    five_point,
    six_keypoints,
)


@pytest.mark.parametrize("k", [468, 478])
def test_six_keypoints_are_the_five_points_plus_mouth_centre_and_tragions(k: int) -> None:
    lm = np.random.default_rng(3).uniform(0, 500, (3, k, 2)).astype(np.float32)
    six = six_keypoints(lm)
    five = five_point(lm)
    assert six.shape == (3, 6, 2) and six.dtype == np.float32
    np.testing.assert_allclose(six[:, 0:3], five[:, 0:3], rtol=0, atol=1e-4)
    np.testing.assert_allclose(six[:, 3], lm[:, list(LIP_MIDPOINTS)].mean(axis=1), atol=1e-4)
    np.testing.assert_array_equal(six[:, 4], lm[:, TRAGION_IMAGE_LEFT])
    np.testing.assert_array_equal(six[:, 5], lm[:, TRAGION_IMAGE_RIGHT])


def test_wrong_shapes_are_value_errors() -> None:
    with pytest.raises(ValueError):
        six_keypoints(np.zeros((1, 10, 2)))


def test_five_point_equals_the_means_of_its_points_bit_for_bit() -> None:
    """One gather and sums times 1/4: the same float32 bits as the per-subset means (the
    swap's alignment and the CPU/GPU parity depend on them)."""
    from livecam.analysis import landmarks as lmk

    rng = np.random.default_rng(3)
    for k in (468, 478):
        mesh = (rng.random((3, k, 2)) * 1900).astype(np.float32)
        got = lmk.five_point(mesh)
        want = np.stack([mesh[:, list(lmk.EYE_IMAGE_LEFT)].mean(axis=1),
                         mesh[:, list(lmk.EYE_IMAGE_RIGHT)].mean(axis=1),
                         mesh[:, lmk.NOSE_TIP], mesh[:, lmk.MOUTH_IMAGE_LEFT],
                         mesh[:, lmk.MOUTH_IMAGE_RIGHT]], axis=1)
        assert got.dtype == np.float32 and np.array_equal(got, want)


def test_six_keypoints_equal_the_means_of_their_points_bit_for_bit() -> None:
    """The eyes and the tragions computed in pairs: the same float32 bits as each keypoint's
    mean of its points."""
    from livecam.analysis import landmarks as lmk

    rng = np.random.default_rng(4)
    for k in (468, 478):
        for n in (1, 4):
            mesh = (rng.random((n, k, 2)) * 1900).astype(np.float32)
            want = np.stack([mesh[:, list(lmk.EYE_IMAGE_LEFT)].mean(axis=1),
                             mesh[:, list(lmk.EYE_IMAGE_RIGHT)].mean(axis=1),
                             mesh[:, lmk.NOSE_TIP], mesh[:, list(LIP_MIDPOINTS)].mean(axis=1),
                             mesh[:, TRAGION_IMAGE_LEFT], mesh[:, TRAGION_IMAGE_RIGHT]], axis=1)
            got = six_keypoints(mesh)
            assert got.dtype == np.float32 and np.array_equal(got, want)
