"""The frame number drawn into clip frames survives H.264 and reads back exactly."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from livecam.testing import framecode


def _through_h264(frames: list[np.ndarray], crf: int) -> list[np.ndarray]:
    import av

    h, w = frames[0].shape[:2]
    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt = w, h, "yuv420p"
    enc.time_base = Fraction(1, 30)
    enc.options = {"crf": str(crf), "preset": "veryfast"}
    packets = []
    for f in frames:
        packets += enc.encode(av.VideoFrame.from_ndarray(f, format="bgr24"))
    packets += enc.encode(None)
    dec = av.CodecContext.create("h264", "r")
    out = []
    for p in packets:
        out += [d.to_ndarray(format="bgr24") for d in dec.decode(p)]
    out += [d.to_ndarray(format="bgr24") for d in dec.decode(None)]
    return out


@pytest.mark.parametrize("crf", [14, 30])
def test_codes_read_back_through_h264(crf: int, t1_bgr: np.ndarray) -> None:
    picture = np.ascontiguousarray(t1_bgr[:720, :1280])
    indices = [0, 1, 2, 77, 1000, 4095]
    frames = [framecode.stamp(picture, i) for i in indices]
    assert [framecode.read(f) for f in _through_h264(frames, crf)] == indices


def test_frames_without_a_clean_code_read_as_none(t1_bgr: np.ndarray) -> None:
    picture = np.ascontiguousarray(t1_bgr[:720, :1280])
    assert framecode.read(np.zeros_like(picture)) is None  # livecam's black start frames
    assert framecode.read(picture) is None
    damaged = framecode.stamp(picture, 5)
    x0, y0, _, y1 = framecode.code_box_xyxy((1280, 720))
    damaged[y0:y1, x0 + 60:x0 + 70] = 255 - damaged[y0:y1, x0 + 60:x0 + 70]  # flip one bit
    assert framecode.read(damaged) is None  # parity catches it
    with pytest.raises(ValueError):
        framecode.stamp(picture, 1 << framecode.BITS)
