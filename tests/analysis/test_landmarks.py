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
