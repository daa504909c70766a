"""Detections no face accounts for keep their place covered (livecam/analysis/weak_faces.py):
plain boxes in, covers out."""

from __future__ import annotations

import numpy as np

from livecam.analysis.weak_faces import MEMORY_FRAMES, WeakFaces
from livecam.core.types import Faces, Unswappable, WithheldFaces

SIZE = (1280, 720)
# ``hidden`` input frame 8: the face 30 % under the board, detected at 0.64
BOX = [545.0, 203.0, 728.0, 387.0]


def _detections(box: list[float], score: float) -> Faces:
    return Faces(boxes_xyxy=np.array([box], np.float32), scores=np.array([score], np.float32),
                 track_ids=np.array([-1], np.int64))


def _withheld(box: list[float], track_id: int, reason: Unswappable) -> WithheldFaces:
    return WithheldFaces(np.array([box], np.float32), np.full((1, 0, 2), np.nan, np.float32),
                         np.array([track_id], np.int64), np.array([reason], np.uint8))


def test_a_detection_no_track_takes_keeps_its_place() -> None:
    """Scored 0.64 (strong, under the 0.7 that starts a track), withheld pending with no
    track: before, its own cover counted as the face that accounts for it, and its place was
    forgotten on the next frame."""
    weak = WeakFaces()
    out = weak.update(_detections(BOX, 0.64), 0.7, Faces.empty(),
                      _withheld(BOX, -1, Unswappable.PENDING), 8, SIZE)
    assert len(out) == 1
    x1, y1, x2, y2 = out.boxes_xyxy[0].tolist()
    assert x1 <= BOX[0] and y1 <= BOX[1] and x2 >= BOX[2] and y2 >= BOX[3]
    later = weak.update(None, 0.7, Faces.empty(), WithheldFaces(), 8 + MEMORY_FRAMES, SIZE)
    np.testing.assert_array_equal(later.boxes_xyxy, out.boxes_xyxy)
    assert len(weak.update(None, 0.7, Faces.empty(), WithheldFaces(), 9 + MEMORY_FRAMES,
                           SIZE)) == 0
    assert len(weak.expired) == 1  # handed to the return watch


def test_a_detection_a_track_or_a_lost_cover_accounts_for_is_left_to_it() -> None:
    for track_id, reason in ((3, Unswappable.PENDING), (-1, Unswappable.LOST)):
        weak = WeakFaces()
        assert len(weak.update(_detections(BOX, 0.64), 0.7, Faces.empty(),
                               _withheld(BOX, track_id, reason), 8, SIZE)) == 0
        assert not weak.remembered


def test_a_detection_strong_enough_to_start_a_track_is_left_to_the_tracker() -> None:
    weak = WeakFaces()
    assert len(weak.update(_detections(BOX, 0.75), 0.7, Faces.empty(), WithheldFaces(), 8,
                           SIZE)) == 0
