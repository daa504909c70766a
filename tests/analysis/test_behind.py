"""Which faces in view get their sides covered for a lost face that may be behind them
(livecam/analysis/behind.py): plain boxes in, bands out."""

from __future__ import annotations

import numpy as np

from livecam.analysis.behind import BesideLost
from livecam.core.types import Unswappable
from livecam.track.bytetrack import LostTrack

FRONT = [598.0, 220.0, 762.0, 409.0]  # crossing's face in front at input frame 31


def _seen_since(frame: int, *tids: int) -> BesideLost:
    """A ``BesideLost`` that has had the faces ``tids`` in view since ``frame``."""
    beside = BesideLost(30)
    beside.update([], [(t, FRONT) for t in tids], frame, set(tids))
    return beside


def test_a_lost_face_covered_far_from_every_face_covers_the_sides_of_one_it_could_reach(
        ) -> None:
    beside = _seen_since(4, 3)
    out = beside.update([(1, [886.0, 173.0, 1132.0, 457.0], 27)], [(3, FRONT)], 31, {1, 3})
    w, h = FRONT[2] - FRONT[0], FRONT[3] - FRONT[1]
    np.testing.assert_allclose(out.boxes_xyxy, [
        [FRONT[0] - w, FRONT[1] - 0.1 * h, FRONT[0] + 0.25 * w, FRONT[3] + 0.1 * h],
        [FRONT[2] - 0.25 * w, FRONT[1] - 0.1 * h, FRONT[2] + w, FRONT[3] + 0.1 * h]],
        rtol=1e-5)
    assert out.track_ids.tolist() == [-1, -1]
    assert out.reasons.tolist() == [Unswappable.LOST] * 2


def test_a_lost_face_covered_along_a_face_in_view_is_accounted_for_there() -> None:
    beside = _seen_since(4, 3)
    along = [FRONT[2] + 20.0, 200.0, FRONT[2] + 200.0, 420.0]
    assert len(beside.update([(1, along, 27)], [(3, FRONT)], 31, {1, 3})) == 0


def test_a_lost_face_out_of_reach_is_not_behind_the_face_in_view() -> None:
    beside = _seen_since(29, 3)
    far = [1100.0, 200.0, 1270.0, 400.0]  # 338 px away, 2 frames since it was seen
    assert len(beside.update([(1, far, 2)], [(3, FRONT)], 31, {1, 3})) == 0


def test_a_face_tracked_only_since_the_loss_stands_for_one_lost_face_not_two() -> None:
    left, right = [144.0, 139.0, 396.0, 438.0], [886.0, 173.0, 1132.0, 457.0]
    beside = BesideLost(30)
    assert len(beside.update([(1, right, 27)], [(3, FRONT)], 31, {1, 3})) == 0
    beside = BesideLost(30)
    assert len(beside.update([(1, right, 27), (2, left, 27)], [(3, FRONT)], 31,
                             {1, 2, 3})) == 2


def test_a_track_found_lost_past_its_cover_counts_from_the_frame_it_was_found_lost_on(
        ) -> None:
    """Lost over a gap of 33 frames (more than ``lost_cover_frames``), predicted off the
    frame: no cover of its own, and still a face that may be behind the face in view."""
    beside = _seen_since(0, 3)
    gone = LostTrack(1, np.array([-236.0, 116.0, -42.0, 340.0], np.float32), 33)
    out = beside.update([], [(3, FRONT)], 33, {1, 3}, [gone], (1280, 720))
    assert len(out) == 2
    later = LostTrack(1, gone.box_xyxy, 33 + 31)
    assert len(beside.update([], [(3, FRONT)], 33 + 31, {1, 3}, [later], (1280, 720))) == 0
