"""The frame-sink protocol used by the output thread."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from livecam.core.types import ImageBGR


@runtime_checkable
class FrameSink(Protocol):
    """Where frames go: a virtual camera, a video file, a preview window, nowhere.

    ``open`` raises ``OutputError`` with a message that says what to do. ``send`` takes an
    (height, width, 3) uint8 BGR image of exactly the opened size. Only the output thread calls
    ``send``; ``close`` is idempotent.
    """

    def open(self, *, width: int, height: int, fps: float) -> None: ...

    def send(self, image_bgr: ImageBGR) -> None: ...

    def close(self) -> None: ...
