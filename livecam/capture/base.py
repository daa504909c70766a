"""The frame-source protocol used by the capture thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from livecam.core.errors import InputError
from livecam.core.types import ImageBGR, ImageI420, lazy_planes_i420


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


class DecodesVideo(SourceBase):
    """A source that decodes video frames with PyAV (a file, a pipe, a network stream): each
    image it reads is the decoded frame converted to BGR, and for a yuv420p frame the planes
    it was converted from are kept, copied out of the frame when first asked
    (:meth:`planes_i420_of`): the thin client's encoder and a sink that takes I420 use them
    instead of converting the BGR back. The capture thread only."""

    _planes: tuple[ImageBGR, Callable[[], ImageI420]] | None = None

    def _decoded(self, frame: Any) -> ImageBGR:
        """The decoded ``frame`` (``av.VideoFrame``) as a read-only (H, W, 3) uint8 BGR image;
        its planes are kept for :meth:`planes_i420_of`."""
        image: ImageBGR = np.asarray(frame.to_ndarray(format="bgr24"), np.uint8)
        # shared by reference across threads and stages: an accidental in-place write by a
        # stage is an immediate error instead of a corrupt frame
        image.flags.writeable = False
        planes = lazy_planes_i420(frame)
        self._planes = None if planes is None else (image, planes)
        return image

    def planes_i420_of(self, image: ImageBGR) -> Callable[[], ImageI420] | None:
        """The I420 planes ``image`` (the last image read) was decoded from; None for another
        image, or a frame that was not yuv420p."""
        kept = self._planes
        return kept[1] if kept is not None and kept[0] is image else None

    def _forget_planes(self) -> None:
        self._planes = None
