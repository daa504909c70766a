"""Frame codes read back exactly, or not at all; indices unwrap in send order."""

from __future__ import annotations

import cv2
import numpy as np

from tests.helpers import frame_code


def test_codes_read_back_from_a_corner_and_from_a_scaled_full_frame() -> None:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (120, 320, 3), dtype=np.uint8)
    box = (120, 90, 280, 106)
    for value in (0, 1, 613, 1023, 1024 + 5):
        image = frame_code.draw_code(base, value, bits=10, box_xyxy=box)
        assert frame_code.read_code(image, bits=10, box_xyxy=box) == value % 1024
        # only the box changed
        outside = np.ones(base.shape[:2], bool)
        outside[90:106, 120:280] = False
        assert np.array_equal(image[outside], base[outside])
        whole = frame_code.coded_frame(value, size_px=(320, 240))
        scaled = cv2.resize(whole, (517, 301), interpolation=cv2.INTER_AREA)
        assert frame_code.read_code(scaled) == value % 256


def test_no_code_reads_as_none() -> None:
    assert frame_code.read_code(np.zeros((240, 320, 3), np.uint8)) is None
    assert frame_code.read_code(np.full((240, 320, 3), 128, np.uint8)) is None
    # half of one frame's code over another's: bars that disagree with their complement
    a, b = frame_code.coded_frame(0, size_px=(320, 240)), frame_code.coded_frame(255,
                                                                               size_px=(320, 240))
    torn = np.concatenate([a[:, :160], b[:, 160:]], axis=1)
    assert frame_code.read_code(torn) is None


def test_unwrap_follows_the_send_order_across_the_period() -> None:
    assert frame_code.unwrap([1020, 1023, 1023, 2, 5, 1000], bits=10) == [
        1020, 1023, 1023, 1026, 1029, 2024]
    assert frame_code.unwrap([], bits=4) == []
