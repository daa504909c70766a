"""Frame sources: cameras and video files (OpenCV), still images, a synthetic test pattern."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import cv2
import numpy as np

from livecam.core.errors import CaptureError
from livecam.core.types import ImageBGR

log = logging.getLogger(__name__)


def _readonly(image: np.ndarray) -> ImageBGR:
    # Frames are shared by reference across threads and stages; making them read-only turns an
    # accidental in-place write by a stage into an immediate error instead of a corrupt frame.
    image.flags.writeable = False
    return image


class _SourceBase:
    """What every source reports: its fps and frame size (set by the subclass), and a close."""

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


class _VideoCaptureSource(_SourceBase):
    """What cameras and files share: an OpenCV ``VideoCapture``."""

    _cap: cv2.VideoCapture | None

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class CameraSource(_VideoCaptureSource):
    """A camera through OpenCV: ``device`` is an index (``0``) or a path (``/dev/video2``).

    Asks for ``fourcc``/``width``/``height``/``fps`` and logs what the camera actually gave.
    """

    live = True

    def __init__(self, *, device: int | str, width: int, height: int, fps: float,
                 fourcc: str = "MJPG") -> None:
        self._device = device
        self._want = (width, height, fps, fourcc)
        self._cap: cv2.VideoCapture | None = None
        self._size_px = (width, height)
        self._fps = fps

    def open(self) -> None:
        width, height, fps, fourcc = self._want
        api = cv2.CAP_V4L2 if sys.platform.startswith("linux") else cv2.CAP_ANY
        cap = cv2.VideoCapture(self._device, api)
        if not cap.isOpened():
            cap.release()
            raise CaptureError(
                f"camera {self._device!r} cannot be opened: check it is connected and not in use "
                "by another program (`livecam doctor` lists the cameras found)"
            )
        if len(fourcc) == 4:
            cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*fourcc))
        cap.set(cv2.CAP_PROP_FRAME_WIDTH, width)
        cap.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
        cap.set(cv2.CAP_PROP_FPS, fps)
        # Keep the driver's queue short: a deep queue is latency we can never win back.
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)
        got_w = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        got_h = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        got_fps = float(cap.get(cv2.CAP_PROP_FPS)) or fps
        code = int(cap.get(cv2.CAP_PROP_FOURCC))
        got_fourcc = "".join(chr((code >> (8 * i)) & 0xFF) for i in range(4)).strip("\0")
        log.info("camera %s: asked %dx%d@%g %s, got %dx%d@%g %s", self._device, width, height,
                 fps, fourcc, got_w, got_h, got_fps, got_fourcc or "?")
        self._cap = cap
        self._size_px = (got_w, got_h)
        self._fps = got_fps

    def read(self) -> ImageBGR | None:
        if self._cap is None:
            raise CaptureError("camera is not open")
        ok, image = self._cap.read()
        if not ok or image is None:
            raise CaptureError(f"camera {self._device!r} stopped delivering frames")
        return _readonly(image)


class FileSource(_VideoCaptureSource):
    """A video file decoded by OpenCV's FFmpeg backend; ``None`` at its end."""

    live = False

    def __init__(self, *, path: Path, fps_fallback: float = 30.0) -> None:
        self._path = path
        self._cap: cv2.VideoCapture | None = None
        self._fps = fps_fallback
        self._size_px = (0, 0)

    def open(self) -> None:
        if not self._path.is_file():
            raise CaptureError(f"input file {self._path} does not exist")
        cap = cv2.VideoCapture(str(self._path), cv2.CAP_FFMPEG)
        ok, first = cap.read() if cap.isOpened() else (False, None)
        if not ok or first is None:
            cap.release()
            raise CaptureError(f"input file {self._path} is not a video this build can decode")
        cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
        self._fps = float(cap.get(cv2.CAP_PROP_FPS)) or self._fps
        self._size_px = (first.shape[1], first.shape[0])
        self._cap = cap

    def read(self) -> ImageBGR | None:
        if self._cap is None:
            raise CaptureError("file source is not open")
        ok, image = self._cap.read()
        return _readonly(image) if ok and image is not None else None


class ImageSource(_SourceBase):
    """One still image, delivered again and again at ``fps`` (the same read-only array)."""

    live = False

    def __init__(self, *, path: Path, fps: float) -> None:
        self._path = path
        self._fps = fps
        self._image: ImageBGR | None = None

    def open(self) -> None:
        if not self._path.is_file():
            raise CaptureError(f"input image {self._path} does not exist")
        image = cv2.imread(str(self._path), cv2.IMREAD_COLOR)
        if image is None:
            raise CaptureError(f"input image {self._path} cannot be decoded (not an image?)")
        self._image = _readonly(image)
        self._size_px = (image.shape[1], image.shape[0])

    def read(self) -> ImageBGR | None:
        if self._image is None:
            raise CaptureError("image source is not open")
        return self._image

    def close(self) -> None:
        self._image = None
        self._size_px = (0, 0)


class SyntheticSource(_SourceBase):
    """A moving test pattern that needs no files: colour bars, a bouncing block, a frame ramp.

    ``cycle_frames`` distinct frames are rendered once, on first use, then replayed, so reading
    costs nothing and benchmarks measure the framework, not the pattern.
    """

    live = False

    def __init__(self, *, width: int, height: int, fps: float, cycle_frames: int = 30) -> None:
        self._size_px = (width, height)
        self._fps = fps
        self._cycle: list[ImageBGR | None] = [None] * cycle_frames
        self._next = 0

    def open(self) -> None:
        self._next = 0

    def _render(self, k: int) -> ImageBGR:
        width, height = self._size_px
        n = len(self._cycle)
        x = np.linspace(0, 255, width, dtype=np.float32)
        image = np.empty((height, width, 3), np.uint8)
        image[:, :, 0] = x.astype(np.uint8)
        image[:, :, 1] = ((x + 255.0 * k / n) % 256).astype(np.uint8)
        image[:, :, 2] = np.linspace(0, 255, height, dtype=np.float32).astype(np.uint8)[:, None]
        side = max(4, min(width, height) // 5)
        cx = int((width - side) * (0.5 + 0.5 * np.sin(2 * np.pi * k / n)))
        cy = int((height - side) * (0.5 + 0.5 * np.cos(2 * np.pi * k / n)))
        image[cy:cy + side, cx:cx + side] = (255, 255, 255)
        return _readonly(image)

    def read(self) -> ImageBGR | None:
        k = self._next % len(self._cycle)
        self._next += 1
        image = self._cycle[k]
        if image is None:
            image = self._cycle[k] = self._render(k)
        return image
