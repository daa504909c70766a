"""Followed faces that something hides in part are withheld (livecam.analysis.occlusion): on
their own detection's drop, and, with something reaching in over them from a side, also where
the detector finds no box on them at all."""

from __future__ import annotations

import numpy as np
import pytest

from livecam.analysis.occlusion import PartlyHidden
from livecam.core.types import Faces

# ``hidden`` (the leak clip), input frame 11: the face's box around its carried mesh, and the
# detector's only box that frame, on the face's uncovered corner (IoU 0.15 with it)
FACE = [550.0, 205.0, 730.0, 395.0]
CORNER = [652.0, 200.0, 730.0, 279.0]
W = 1280  # the clip's frame width, px


def _faces(boxes: list[list[float]], scores: list[float], ids: list[int] | None = None) -> Faces:
    return Faces(boxes_xyxy=np.array(boxes, np.float32).reshape(-1, 4),
                 scores=np.array(scores, np.float32),
                 track_ids=np.array(ids if ids is not None else [-1] * len(boxes), np.int64))


def _seen_whole(hidden: PartlyHidden) -> None:
    """A frame with the face in full view: its best score, 0.90."""
    assert hidden.update(_faces([FACE], [0.9], [1]), _faces([FACE], [0.9]), {1},
                         frame_width_px=W) == []


def test_a_face_whose_own_detection_drops_is_withheld() -> None:
    hidden = PartlyHidden(0.6)
    _seen_whole(hidden)
    assert hidden.update(_faces([FACE], [0.9], [1]), _faces([FACE], [0.5]), {1},
                         frame_width_px=W) == [0]


def test_a_face_covered_from_a_side_with_no_detection_of_its_own_is_withheld() -> None:
    """Before: a face the detector found no box on stayed swapped, look or not, and with 60 %
    of it under the board its swap was painted on the board (``hidden``, input frame 11)."""
    hidden = PartlyHidden(0.6)
    _seen_whole(hidden)
    face = _faces([FACE], [0.9], [1])
    assert hidden.update(face, _faces([CORNER], [0.37]), {1}, {0}, frame_width_px=W) == [0]
    # nothing detected at all
    assert hidden.update(face, _faces([], []), {1}, {0}, frame_width_px=W) == [0]


def test_a_face_the_detector_misses_now_and_then_stays_swapped() -> None:
    """With nothing reaching in over it, a frame without its detection says nothing."""
    hidden = PartlyHidden(0.6)
    _seen_whole(hidden)
    face = _faces([FACE], [0.9], [1])
    assert hidden.update(face, _faces([CORNER], [0.37]), {1}, frame_width_px=W) == []
    assert hidden.update(face, _faces([], []), {1}, frame_width_px=W) == []
    # no detection run this frame
    assert hidden.update(face, None, {1}, {0}, frame_width_px=W) == []


def test_a_face_first_seen_with_only_a_weak_detection_of_its_own_is_withheld() -> None:
    """A stream starting with the face 40 % under the board (``hidden`` input frame 9, a
    1280 px wide frame): the first frame's tile search finds it at 0.74 and it is followed,
    but the whole-frame detector scores it 0.40. Before: with no strong score to drop from, it
    was swapped and its swap painted on the board (a ghost of 6.0 grey levels). Once strong, a
    weak frame counts only as a drop from its best (a small face hovering about the
    threshold); a face too small for the whole-frame detector to find reliably (``still_6``'s
    113 px one, 0.42-0.47 all along) stays swapped."""
    hidden = PartlyHidden(0.6)
    face = _faces([FACE], [0.74], [1])
    assert hidden.update(face, _faces([FACE], [0.40]), {1}, frame_width_px=W) == [0]
    assert hidden.update(face, _faces([FACE], [0.62]), {1}, frame_width_px=W) == []
    assert hidden.update(face, _faces([FACE], [0.55]), {1}, frame_width_px=W) == []
    small = [54.0, 238.0, 167.0, 356.0]
    assert hidden.update(_faces([small], [0.8], [2]), _faces([small], [0.45]), {1, 2},
                         frame_width_px=W) == []


def test_the_frame_width_is_required() -> None:
    """Without it the never-strong rule cannot be applied: an exact error, not a silent 0
    that switched the rule off."""
    hidden = PartlyHidden(0.6)
    with pytest.raises(ValueError, match="frame_width_px"):
        hidden.update(_faces([FACE], [0.74], [1]), _faces([FACE], [0.40]), {1},
                      frame_width_px=0)
