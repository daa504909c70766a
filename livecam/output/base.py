"""The frame-sink protocol used by the output thread."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from livecam.core.types import ImageBGR, ImageI420


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


@runtime_checkable
class GuiSink(FrameSink, Protocol):
    """A sink with a window that only the thread which opened it may draw (OpenCV's Qt, Cocoa
    and Win32 backends). ``send`` still comes from the output thread and must only hand the
    frame over; the thread that called ``open`` calls ``pump`` in a loop while the run lasts
    (``App.wait`` does this when called on that thread).
    """

    def pump(self, timeout_s: float) -> bool:
        """Draw the newest frame, waiting up to ``timeout_s`` for one, and handle the window's
        events; False once the user closed the window (the run should end)."""
        ...


@runtime_checkable
class I420Sink(FrameSink, Protocol):
    """A sink that can also take a frame as I420 planes: a picture that arrived as I420
    (the thin client's) goes out without a round trip through BGR. ``takes_i420`` (after
    ``open``): whether ``send_i420`` is the sink's cheaper way in; the output thread then
    sends it every frame that has planes (:meth:`~livecam.core.types.Packet.planes_i420`)
    and ``send`` the others. Same thread rules as ``send``.
    """

    @property
    def takes_i420(self) -> bool: ...

    def send_i420(self, planes_i420: ImageI420) -> None:
        """Send (height * 3 / 2, width) uint8 I420 planes of exactly the opened size."""
        ...
