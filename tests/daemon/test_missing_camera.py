"""The daemon's "camera may come and go": with wait_for_source a live source that cannot be
opened at start does not stop the run; the output sends black frames until it appears.

The camera is replaced by a fake live FrameSource (no camera on this machine) through the
public FrameSource protocol; everything else is the real app."""

from __future__ import annotations

import time

import numpy as np
import pytest

from livecam.app import App
from livecam.config import Config
from livecam.core.errors import CaptureError
from livecam.core.types import ImageBGR
from livecam.output.sinks import NullSink
from livecam.pipeline.passthrough import PassThrough


class FlakyCamera:
    """Refuses to open until ``plugged`` is set, then gives grey frames at 30 fps."""

    live = True

    def __init__(self) -> None:
        self.plugged = False
        self.opens = 0
        self._open = False

    def open(self) -> None:
        self.opens += 1
        if not self.plugged:
            raise CaptureError("camera 0 cannot be opened")
        self._open = True

    def read(self) -> ImageBGR | None:
        time.sleep(1 / 30)
        if not self.plugged:
            raise CaptureError("camera 0 stopped delivering frames")
        return np.full((48, 64, 3), 128, np.uint8)

    def close(self) -> None:
        self._open = False

    @property
    def fps(self) -> float:
        return 30.0

    @property
    def size_px(self) -> tuple[int, int]:
        return (64, 48)


def test_missing_camera_at_start_then_plugged_in(fast_config: Config) -> None:
    camera = FlakyCamera()
    sent: list[float] = []
    app = App(fast_config, source=camera, sink=NullSink(), stages=[PassThrough()],
              wait_for_source=True,
              on_sent=lambda p, img: sent.append(float(img.mean())))
    app.start()
    try:
        time.sleep(0.5)
        assert len(sent) >= 10 and max(sent) == 0.0  # black frames, output never stalled
        camera.plugged = True
        deadline = time.monotonic() + 5
        while not sent or sent[-1] != 128.0:
            assert time.monotonic() < deadline, "frames never arrived after plugging in"
            time.sleep(0.05)
        camera.plugged = False  # unplugged mid-stream: the output keeps sending
        n = len(sent)
        time.sleep(0.5)
        assert len(sent) >= n + 10
    finally:
        app.stop()
    assert camera.opens >= 2


def test_without_wait_for_source_a_missing_camera_fails_start(fast_config: Config) -> None:
    app = App(fast_config, source=FlakyCamera(), sink=NullSink(), stages=[PassThrough()])
    with pytest.raises(CaptureError, match="cannot be opened"):
        app.start()


