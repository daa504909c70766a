"""Box arithmetic on Python floats (livecam/core/boxes.py)."""

from __future__ import annotations

import numpy as np

from livecam.core.boxes import box_iou, meet, meets_any, share_in, share_in_frame


def test_a_float32_box_wholly_inside_the_frame_is_exactly_inside() -> None:
    """Its width subtracted in float32 and in float64 differs in the last bits: one
    arithmetic for the area and the part inside, so the share is 1.0. Before, with the area
    from float32 and the part inside from float64 (``observations.share_inside``), such a box
    (a fifth of random ones) was 0.9999999 inside: a face taken as cut by the frame's edge."""
    box = np.array([217.872, 67.49125, 379.58322, 195.52005], np.float32)
    assert share_in_frame(box.tolist(), 1280, 720) == 1.0
    assert share_in_frame([-90.0, 0.0, 90.0, 100.0], 1280, 720) == 0.5
    assert share_in_frame([1300.0, 0.0, 1400.0, 100.0], 1280, 720) == 0.0


def test_the_share_of_a_box_inside_another_is_of_the_first_box() -> None:
    small, large = [0.0, 0.0, 10.0, 10.0], [5.0, 0.0, 105.0, 100.0]
    assert share_in(small, large) == 0.5
    assert share_in(large, small) == 0.005
    assert share_in(small, [20.0, 20.0, 30.0, 30.0]) == 0.0


def test_boxes_touching_at_an_edge_do_not_meet() -> None:
    assert meet([0.0, 0.0, 10.0, 10.0], [9.0, 9.0, 20.0, 20.0])
    assert not meet([0.0, 0.0, 10.0, 10.0], [10.0, 0.0, 20.0, 10.0])
    assert box_iou([0.0, 0.0, 10.0, 10.0], [10.0, 0.0, 20.0, 10.0]) == 0.0


def test_a_box_meets_any_of_several_when_one_shares_area_with_it() -> None:
    box = [0.0, 0.0, 10.0, 10.0]
    beside = [10.0, 0.0, 20.0, 10.0]  # an edge in common only
    apart = [30.0, 30.0, 40.0, 40.0]
    assert meets_any(box, [apart, beside, [9.0, 9.0, 20.0, 20.0]])
    assert not meets_any(box, [apart, beside])
    assert not meets_any(box, np.zeros((0, 4), np.float32).tolist())
