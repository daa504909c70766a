"""The frame-source protocol used by the capture thread."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from livecam.core.errors import InputError
from livecam.core.types import ImageBGR, ImageI420


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


def has_i420_planes(frame: Any) -> bool:
    """Whether a decoded ``frame`` (``av.VideoFrame``) is yuv420p of an even size: its planes
    are then one :data:`~livecam.core.types.ImageI420` array (:func:`copy_i420_planes`)."""
    return bool(frame.format.name == "yuv420p" and frame.width % 2 == 0
                and frame.height % 2 == 0)


def copy_i420_planes(frame: Any) -> ImageI420:
    """The planes of a ``frame`` that :func:`has_i420_planes`, copied into one new (H * 3 / 2,
    W) uint8 array (no view of the frame: nothing of the decoder outlives the copy)."""
    return np.ascontiguousarray(frame.to_ndarray(), np.uint8)


class DecodesVideo(SourceBase):
    """A source that decodes video frames with PyAV (a file, a pipe, a network stream): each
    image it reads is the decoded frame converted to BGR. Where ``keeps_planes_i420`` is set
    (by the capture thread, for a stage that takes them: the thin client's encoder), the
    planes of a yuv420p frame are copied out of it as it is read (a plane copy, 0.15 ms at
    720p) and kept beside the image (:meth:`planes_i420_of`): plain arrays, so nothing of
    the decoder outlives the read (a kept ``av.VideoFrame`` holds its decoder, and with it
    the decoder's threads, after a looping file has reopened). The capture thread only."""

    #: copy each yuv420p frame's planes out at read time (for :meth:`planes_i420_of`)
    keeps_planes_i420 = False
    _planes: tuple[ImageBGR, ImageI420] | None = None

    def _decoded(self, frame: Any) -> ImageBGR:
        """The decoded ``frame`` (``av.VideoFrame``) as a read-only (H, W, 3) uint8 BGR image;
        its planes are copied out for :meth:`planes_i420_of` where they are kept."""
        image: ImageBGR = np.asarray(frame.to_ndarray(format="bgr24"), np.uint8)
        # shared by reference across threads and stages: an accidental in-place write by a
        # stage is an immediate error instead of a corrupt frame
        image.flags.writeable = False
        self._planes = None
        if self.keeps_planes_i420 and has_i420_planes(frame):
            self._planes = (image, copy_i420_planes(frame))
        return image

    def planes_i420_of(self, image: ImageBGR) -> ImageI420 | None:
        """The I420 planes ``image`` (the last image read) was decoded from, an
        (H * 3 / 2, W) uint8 array of its own; None for another image, a frame that was not
        yuv420p, or while ``keeps_planes_i420`` is off."""
        kept = self._planes
        return kept[1] if kept is not None and kept[0] is image else None

    def _forget_planes(self) -> None:
        self._planes = None
