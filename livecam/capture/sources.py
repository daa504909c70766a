"""Frame sources: cameras (OpenCV), video files and pipes (PyAV), still images, a synthetic
test pattern."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from livecam.capture.base import DecodesVideo, PipeEndedError, SourceBase
from livecam.capture.pipe_wait import PipeWaiter
from livecam.capture.still import decode_image, header_size_px, input_kind
from livecam.core.errors import CaptureError, InputError
from livecam.core.netstreams import ffmpeg_reason
from livecam.core.types import ImageBGR

if TYPE_CHECKING:
    import av
    import av.container

log = logging.getLogger(__name__)


def _readonly(image: np.ndarray) -> ImageBGR:
    # Frames are shared by reference across threads and stages; making them read-only turns an
    # accidental in-place write by a stage into an immediate error instead of a corrupt frame.
    image.flags.writeable = False
    return image


class CameraSource(SourceBase):
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
        return self.read_into(None)

    def read_into(self, out: np.ndarray | None) -> ImageBGR:
        """:meth:`read`, the frame decoded into ``out`` ((H, W, 3) uint8, writable; the
        capture thread's pinned block) where it has the frame's size: then ``out`` itself,
        read-only, and no copy of the frame is made; else a new array (OpenCV allocates
        one)."""
        if self._cap is None:
            raise CaptureError("camera is not open")
        ok, image = self._cap.read() if out is None else self._cap.read(out)
        if not ok or image is None:
            raise CaptureError(f"camera {self._device!r} stopped delivering frames")
        return _readonly(image)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class FileSource(DecodesVideo):
    """A video file, or a pipe (a FIFO, ``/dev/stdin``), decoded by PyAV (FFmpeg); ``None`` at
    its end.

    ``open`` checks the input before handing out a frame: it must exist and hold a video (a
    still image is refused with a pointer to ``image:``), and its frames must be at most
    ``max_pixels`` (read from the stream header, then checked on every frame). PyAV gives
    FFmpeg's errors as exceptions, so a bad file is one line, not FFmpeg's log on stderr. A pipe
    can be read once: opening it again after its end raises :class:`InputError`.

    A pipe whose writer has not written yet would block ``open`` (and FFmpeg's probe) with
    no way out: :meth:`wait_ready` waits for its first bytes in slices the caller chooses
    (the app and the capture thread, so a stop or the control API are never held up).
    """

    live = False

    def __init__(self, *, path: Path, fps_fallback: float = 30.0,
                 max_pixels: int) -> None:
        self._path = path
        self._fps = fps_fallback
        self._max_pixels = max_pixels
        self._container: av.container.InputContainer | None = None
        self._frames: Iterator[av.VideoFrame] | None = None
        self._pending: ImageBGR | None = None  # the first frame, decoded by open
        self._pipe_used = False
        self._waiter: PipeWaiter | None = None  # a pipe not opened yet, opened without waiting

    def wait_ready(self, timeout_s: float | None) -> bool:
        """True when :meth:`open` will not wait for a writer: a file, or a pipe that holds
        data (or whose writer came and went); False after ``timeout_s`` seconds of an input
        pipe with nothing in it. Raises :class:`InputError` for a missing path. The thread
        that then calls ``open``."""
        if input_kind(self._path, "input file") != "pipe" or self._pipe_used:
            return True
        if self._waiter is None:
            self._waiter = PipeWaiter(self._path)
        return self._waiter.wait_readable(timeout_s)

    def open(self) -> None:
        import av

        path = self._path
        kind = input_kind(path, "input file")
        if kind == "pipe" and self._pipe_used:
            raise PipeEndedError(f"input {path} is a pipe that has ended; a pipe cannot be "
                                 "restarted (advanced.capture.loop needs a file)")
        target = str(path)
        if kind == "pipe":
            self.wait_ready(None)
            assert self._waiter is not None
            fd = self._waiter.blocking_fd()
            target = str(path) if fd is None else f"pipe:{fd}"
        self._pipe_used = kind == "pipe"
        try:
            container = av.open(target, mode="r")
        except (av.FFmpegError, UnicodeDecodeError) as exc:
            hint = (" (a pipe must carry a streamable format: MPEG-TS, Matroska/WebM, Y4M or "
                    "fragmented MP4)" if kind == "pipe" else "")
            self._close_pipe()
            raise InputError(f"input file {path} is not a video livecam can decode"
                             f"{hint}: {ffmpeg_reason(exc)}") from None
        try:
            image = self._probe(container)
        except BaseException:
            container.close()
            self._close_pipe()
            raise
        self._container, self._pending = container, image
        self._size_px = (image.shape[1], image.shape[0])

    def _probe(self, container: av.container.InputContainer) -> ImageBGR:
        path = self._path
        fmt = container.format.name
        if (fmt == "image2" or fmt.endswith("_pipe")) and "%" not in path.name:
            raise InputError(f"input file {path} is a still image, not a video: use "
                             f"--input image:{path}")
        if not container.streams.video:
            raise InputError(f"input file {path} has no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        width, height = stream.codec_context.width, stream.codec_context.height
        if width * height > self._max_pixels:
            raise self._too_large(width, height)
        rate = stream.average_rate or stream.guessed_rate
        if rate is not None and 0 < rate <= 1000:
            self._fps = float(rate)
        self._frames = iter(container.decode(stream))
        image = self._decode_next()
        if image is None:
            raise InputError(f"input file {path} holds no video frame that can be decoded")
        return image

    def _too_large(self, width: int, height: int) -> InputError:
        return InputError(f"input file {self._path} has {width}x{height} frames "
                          f"({width * height / 1e6:.0f} megapixels), above "
                          f"advanced.capture.max_image_megapixels={self._max_pixels / 1e6:g}: "
                          "scale it down, or raise advanced.capture.max_image_megapixels")

    def _decode_next(self) -> ImageBGR | None:
        import av

        assert self._frames is not None
        try:
            frame = next(self._frames)
        except StopIteration:
            return None
        except av.FFmpegError as exc:  # damaged data further in: the file ends here
            log.warning("input file %s: decoding stopped: %s", self._path, ffmpeg_reason(exc))
            return None
        if frame.width * frame.height > self._max_pixels:  # the size may change mid-stream
            log.error("%s", self._too_large(frame.width, frame.height))
            return None
        return self._decoded(frame)

    def read(self) -> ImageBGR | None:
        if self._container is None:
            raise CaptureError("file source is not open")
        image, self._pending = self._pending, None
        return image if image is not None else self._decode_next()

    def close(self) -> None:
        self._frames, self._pending = None, None
        self._forget_planes()
        if self._container is not None:
            self._container.close()
            self._container = None
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self._waiter is not None:
            self._waiter.close()
            self._waiter = None




class ImageSource(SourceBase):
    """One still image, delivered again and again at ``fps`` (the same read-only array).

    Images larger than ``max_pixels`` are refused from their header, before decoding; a
    JPEG or PNG larger than ``decode_pixels`` is decoded shrunk by a whole factor (see
    :func:`~livecam.capture.still.decode_image`), and the log says to what size.
    """

    live = False

    def __init__(self, *, path: Path, fps: float, max_pixels: int,
                 decode_pixels: int | None = None) -> None:
        self._path = path
        self._fps = fps
        self._max_pixels = max_pixels
        self._decode_pixels = decode_pixels
        self._image: ImageBGR | None = None

    def open(self) -> None:
        if input_kind(self._path, "input image") == "pipe":
            raise InputError(f"input image {self._path} is a pipe: image: needs a file (save "
                             "the image first)")
        image = decode_image(self._path, max_pixels=self._max_pixels,
                             label=f"input image {self._path}",
                             knob="advanced.capture.max_image_megapixels",
                             decode_pixels=self._decode_pixels)
        self._image = _readonly(image)
        self._size_px = (image.shape[1], image.shape[0])
        stored = header_size_px(self._path)
        if (stored is not None and self._decode_pixels is not None
                and stored[0] * stored[1] > image.shape[0] * image.shape[1]):
            w, h = stored
            # said: the frames (and an output of the input's size) are smaller than the file
            log.info("input image %s is %dx%d (%.0f MP): decoded at %dx%d, the size of this "
                     "run's frames (an image input is decoded to at most %.1f MP; set "
                     "capture.width and capture.height higher for more)", self._path, w, h,
                     w * h / 1e6, image.shape[1], image.shape[0], self._decode_pixels / 1e6)

    def read(self) -> ImageBGR | None:
        if self._image is None:
            raise CaptureError("image source is not open")
        return self._image

    def close(self) -> None:
        self._image = None
        self._size_px = (0, 0)


class SyntheticSource(SourceBase):
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
