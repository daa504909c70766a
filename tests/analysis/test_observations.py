"""Box comparisons between observations: the plain-float IoUs decide as the IoU matrix did."""

from __future__ import annotations

import numpy as np

from livecam.analysis.observations import SAME_FACE_IOU, Observation, any_overlap, overlaps
from livecam.track.bytetrack import iou_matrix_numpy


def test_overlap_checks_on_plain_floats_agree_with_the_iou_matrix() -> None:
    """overlaps / any_overlap (plain-float IoUs for a few boxes) against the numpy IoU matrix
    they used, for few boxes and for many (the numpy path)."""
    rng = np.random.default_rng(6)
    for _ in range(300):
        n = int(rng.integers(1, 14))
        xy = rng.uniform(0, 300, (n + 1, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(20, 120, (n + 1, 2))], 1).astype(np.float32)
        one, others = boxes[0], list(boxes[1:])
        iou = iou_matrix_numpy(boxes[:1].astype(np.float64), boxes[1:].astype(np.float64))
        assert overlaps(one, others) == bool(iou.max() >= SAME_FACE_IOU)
        obs = [Observation(b, 0.9) for b in boxes]
        full = iou_matrix_numpy(boxes.astype(np.float64), boxes.astype(np.float64))
        np.fill_diagonal(full, 0.0)
        assert any_overlap(obs) == bool(full.max() > SAME_FACE_IOU)


def test_floats_are_the_values_a_float64_copy_holds() -> None:
    from livecam.analysis.observations import floats

    box = np.array([0.1, 1e-7, 1919.37, -3.3], np.float32)
    got = floats(box)
    assert all(type(v) is float for v in got)
    assert got == box.astype(np.float64).tolist()
    assert floats((1, 2.5, np.float32(0.1), 4)) == [1.0, 2.5, float(np.float32(0.1)), 4.0]
