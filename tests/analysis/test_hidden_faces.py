"""Lost faces stay covered (livecam.analysis.memory.HiddenFaces), and a face coming back out
beside where its tracker predicts it is covered where the detector sees it, however weakly."""

from __future__ import annotations

import numpy as np

from livecam.analysis.memory import HiddenFaces
from livecam.core.types import Unswappable
from livecam.track.bytetrack import LostTrack

SIZE = (1280, 720)
# crossing, every 8th frame, input frame 40: the face behind's lost box (its tracker's
# prediction, 100 px short), the face in front (swapped), the face behind's weak detection
LOST = np.array([529, 179, 693, 353], np.float32)
FRONT = np.array([490, 219, 654, 410], np.float32)
COMING_OUT = np.array([618, 194, 795, 372], np.float32)


def _update(weak: list[np.ndarray], followed: list[np.ndarray]) -> np.ndarray:
    hidden = HiddenFaces(30)
    out = hidden.update([LostTrack(5, LOST, 8)], {}, SIZE, 110, {4},
                        np.array(weak, np.float32).reshape(-1, 4), [], followed)
    assert out.reasons.tolist() == [Unswappable.LOST] * len(out)
    return out.boxes_xyxy


def test_a_weak_detection_beside_a_lost_face_is_covered() -> None:
    """Before: only the lost box was covered, and the half of the face beyond it showed."""
    boxes = _update([COMING_OUT], [FRONT])
    assert len(boxes) == 2
    np.testing.assert_allclose(boxes[1], COMING_OUT)


def test_a_weak_detection_of_a_face_swapped_is_not_covered() -> None:
    """The face in front, scored weakly, is followed and swapped: no cover on it."""
    assert len(_update([FRONT + 2], [FRONT])) == 1


def test_a_weak_detection_under_the_lost_cover_is_not_covered_twice() -> None:
    assert len(_update([LOST + np.array([5, 5, -5, -5], np.float32)], [FRONT])) == 1


def test_a_weak_detection_far_from_any_lost_face_is_left_alone() -> None:
    """Weak detections elsewhere (a table edge, a pattern) stay uncovered, as before."""
    assert len(_update([LOST + np.array([400, 0, 400, 0], np.float32)], [FRONT])) == 1
