"""The frame-source protocol used by the capture thread."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from livecam.core.errors import InputError
from livecam.core.types import ImageBGR


class PipeEndedError(InputError):
    """An input pipe that has ended was asked to open again (``advanced.capture.loop``): a pipe
    cannot be restarted. The ordinary end of a piped input, not a fault."""


@runtime_checkable
class FrameSource(Protocol):
    """Something that yields BGR images: a camera, a video file, a still image, a test pattern.

    Only the capture thread calls these methods. ``open`` raises ``CaptureError`` with a message
    that says what to do. ``read`` returns an (H, W, 3) uint8 BGR image, ``None`` at the end of a
    finite source, and raises ``CaptureError`` when a live source is lost (the capture thread then
    reopens it with backoff). ``close`` is idempotent.
    """

    #: True for cameras: frames arrive at the device's pace and the source may be lost/reopened.
    live: bool

    def open(self) -> None: ...

    def read(self) -> ImageBGR | None: ...

    def close(self) -> None: ...

    @property
    def fps(self) -> float:
        """Frames per second the source delivers (or should be paced at)."""
        ...

    @property
    def size_px(self) -> tuple[int, int]:
        """(width, height) of the frames, known after ``open``."""
        ...


class SourceBase:
    """What every source reports the same way: its fps and frame size (the subclass sets
    ``_fps`` and ``_size_px``), and a ``close`` with nothing to free."""

    _fps: float
    _size_px: tuple[int, int] = (0, 0)

    def close(self) -> None:
        return None

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def size_px(self) -> tuple[int, int]:
        return self._size_px
