"""The daemon's "camera may come and go": with wait_for_source a live source that cannot be
opened at start does not stop the run; the output sends black frames until it appears.

The camera is replaced by a fake live FrameSource (no camera on this machine) through the
public FrameSource protocol; everything else is the real app."""

from __future__ import annotations

import time
from collections.abc import Callable

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
        # black frames while the camera is missing: the output never stalls
        wait_until(lambda: len(sent) >= 10, "10 frames sent")
        assert max(sent) == 0.0
        camera.plugged = True
        wait_until(lambda: bool(sent) and sent[-1] == 128.0, "frames after plugging in")
        camera.plugged = False  # unplugged mid-stream: the output keeps sending
        n = len(sent)
        wait_until(lambda: len(sent) >= n + 10, "10 frames sent after unplugging")
    finally:
        app.stop()
    assert camera.opens >= 2


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Poll ``condition``; fail after a deadline generous enough for a loaded host."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(0.02)


def test_without_wait_for_source_a_missing_camera_fails_start(fast_config: Config) -> None:
    app = App(fast_config, source=FlakyCamera(), sink=NullSink(), stages=[PassThrough()])
    with pytest.raises(CaptureError, match="cannot be opened"):
        app.start()


