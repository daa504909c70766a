"""ROIs and boxes from landmarks: the per-column reductions give the (K, 2) reductions' bits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from livecam.analysis.roi import (
    MESH_ROTATION_END,
    MESH_ROTATION_START,
    ROI_SCALE,
    boxes_from_landmarks,
    roi_from_landmarks,
)


def _reference_roi(lm: np.ndarray) -> tuple[float, float, float, float]:
    lo, hi = lm.min(axis=0), lm.max(axis=0)
    a, b = lm[MESH_ROTATION_START], lm[MESH_ROTATION_END]
    angle = 0.0 - math.atan2(-(float(b[1]) - float(a[1])), float(b[0]) - float(a[0]))
    rot = angle - 2 * math.pi * math.floor((angle + math.pi) / (2 * math.pi))
    side = float(max(hi[0] - lo[0], hi[1] - lo[1])) * ROI_SCALE
    return float(lo[0] + hi[0]) * 0.5, float(lo[1] + hi[1]) * 0.5, side, rot


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_roi_and_boxes_from_landmarks_equal_whole_array_reductions(dtype: type) -> None:
    rng = np.random.default_rng(4)
    for k in (468, 478):
        lm: np.ndarray = (rng.uniform(-50, 1900, (4, k, 2))
                          * rng.uniform(0.01, 1)).astype(dtype)
        for face in lm:
            roi = roi_from_landmarks(face)
            assert (roi.center_x_px, roi.center_y_px, roi.size_px,
                    roi.rotation_rad) == _reference_roi(face)
        boxes = boxes_from_landmarks(lm)
        assert boxes.dtype == np.float32
        np.testing.assert_array_equal(
            boxes, np.concatenate([lm.min(axis=1), lm.max(axis=1)], axis=1).astype(np.float32))
    assert boxes_from_landmarks(np.zeros((0, 468, 2), np.float32)).shape == (0, 4)



def test_box_from_landmarks_is_one_row_of_boxes_from_landmarks() -> None:
    from livecam.analysis.roi import box_from_landmarks

    lm = np.random.default_rng(5).uniform(0, 1900, (3, 468, 2))
    for dtype in (np.float32, np.float64):
        faces = lm.astype(dtype)
        boxes = boxes_from_landmarks(faces)
        for face, box in zip(faces, boxes, strict=True):
            one = box_from_landmarks(face)
            assert one.dtype == np.float32 and one.tobytes() == box.tobytes()


def test_box_and_roi_from_landmarks_are_each_alone() -> None:
    from livecam.analysis.roi import box_and_roi_from_landmarks, box_from_landmarks

    lm = np.random.default_rng(6).uniform(-20, 1900, (3, 468, 2))
    for dtype in (np.float32, np.float64):
        for face in lm.astype(dtype):
            box, roi = box_and_roi_from_landmarks(face)
            assert box.dtype == np.float32 and box.tobytes() == box_from_landmarks(face).tobytes()
            assert roi == roi_from_landmarks(face)
