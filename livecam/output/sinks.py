"""Frame sinks: virtual camera (pyvirtualcam), video file (PyAV), null. The preview window is
in :mod:`livecam.output.window`."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import stat
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

from livecam.core.errors import OutputError
from livecam.core.types import ImageBGR, ImageI420

log = logging.getLogger(__name__)


def virtualcam_help() -> str:
    """What to do on this platform when no virtual camera device exists."""
    if sys.platform.startswith("linux"):
        return ("install v4l2loopback and create a device: `sudo apt install v4l2loopback-dkms` "
                "then `sudo modprobe v4l2loopback devices=1 exclusive_caps=1 "
                "card_label=livecam` (exclusive_caps=1 is needed for Chrome, Meet and Zoom)")
    if sys.platform == "darwin":
        return ("install OBS Studio (28 or newer), start its Virtual Camera once (Start Virtual "
                "Camera) so macOS registers it, then stop it and run livecam again")
    return ("install OBS Studio (28 or newer); its installer registers the OBS Virtual Camera "
            "that livecam writes to (do not start it in OBS while livecam uses it)")


def backend_takes_i420(backend: str, platform: str = sys.platform) -> bool:
    """Whether pyvirtualcam's ``backend`` on ``platform`` is better sent I420 than BGR: its
    device's own format is a YUV one, so I420 reaches it without colour maths, where BGR
    costs pyvirtualcam a colour conversion (libyuv) every frame."""
    if platform.startswith("linux"):
        return backend == "v4l2loopback"  # native I420: written to the device as it is
    if platform == "win32":
        # obs: native NV12, I420 -> NV12 only moves the chroma. unitycapture: native RGBA,
        # BGR -> RGBA is a shuffle where I420 would be a colour conversion
        return backend == "obs"
    if platform == "darwin":
        return backend == "obs"  # native UYVY (both OBS backends): I420 -> UYVY repacks
    return False  # another platform: BGR, which every backend takes


class VirtualCamSink:
    """A virtual camera through pyvirtualcam: v4l2loopback on Linux, OBS Virtual Camera on
    Windows and macOS, or any backend registered with ``pyvirtualcam.register_backend``.

    ``i420`` (the thin client, whose frames arrive as I420): open the camera in I420 where
    :func:`backend_takes_i420` says so for the backend asked for (or, when none is, the
    platform's first, which pyvirtualcam tries first); ``send_i420`` then hands the planes
    over as they are, and ``send`` converts a BGR image (the cover card, a repeat of one)
    with OpenCV. A backend registered under another name, and any odd size, gets BGR."""

    def __init__(self, *, device: str = "", backend: str = "", i420: bool = False) -> None:
        self._device = device or None
        self._backend = backend or None
        self._want_i420 = i420
        self._i420 = False
        self._cam: Any = None

    def open(self, *, width: int, height: int, fps: float) -> None:
        import pyvirtualcam

        if self._backend is not None and self._backend not in pyvirtualcam.camera.BACKENDS:
            known = ", ".join(pyvirtualcam.camera.BACKENDS)
            raise OutputError(f"advanced.output.backend {self._backend!r} is not a pyvirtualcam "
                              f"backend here (available: {known})")
        first = self._backend or next(iter(pyvirtualcam.camera.BACKENDS), "")
        self._i420 = (self._want_i420 and not (width % 2 or height % 2)
                      and backend_takes_i420(first))
        fmt = pyvirtualcam.PixelFormat.I420 if self._i420 else pyvirtualcam.PixelFormat.BGR
        try:
            self._cam = pyvirtualcam.Camera(width, height, fps, fmt=fmt, device=self._device,
                                            backend=self._backend)
        except Exception as exc:  # pyvirtualcam raises RuntimeError listing every backend
            said = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise OutputError(f"no virtual camera could be opened ({said}). To fix: "
                              f"{virtualcam_help()}") from None
        log.info("virtual camera: %s (%s) %dx%d@%g %s", self._cam.device, self._cam.backend,
                 width, height, fps, fmt.value)

    @property
    def device(self) -> str:
        return "" if self._cam is None else str(self._cam.device)

    @property
    def takes_i420(self) -> bool:
        return self._i420

    def send(self, image_bgr: ImageBGR) -> None:
        if self._i420:
            import cv2

            self._cam.send(cv2.cvtColor(image_bgr, cv2.COLOR_BGR2YUV_I420))
        else:
            self._cam.send(image_bgr)

    def send_i420(self, planes_i420: ImageI420) -> None:
        if not self._i420:  # opened in BGR: a caller that did not ask takes_i420
            import cv2

            self._cam.send(cv2.cvtColor(planes_i420, cv2.COLOR_YUV2BGR_I420))
        else:
            self._cam.send(planes_i420)

    def close(self) -> None:
        if self._cam is not None:
            self._cam.close()
            self._cam = None


#: a keyframe this often (s): the most of a recording a crash can lose in an MP4/MOV file
KEYFRAME_INTERVAL_S = 2.0

#: MP4/MOV written as fragments, each from a keyframe (index up front, a small index per
#: fragment), each packet handed to the OS at once (FFmpeg's 512 KiB write buffer held several
#: seconds of a small video): a process killed mid-write leaves a playable file up to its last
#: fragment, where a plain MP4 (index written at close) is unreadable. Matroska is written in
#: clusters anyway.
_FRAGMENTED = {"movflags": "frag_keyframe+empty_moov+default_base_moof", "flush_packets": "1"}


class FileSink:
    """An H.264 (or ``codec``) video file written with PyAV at a constant frame rate; MP4 and
    MOV in fragments a keyframe apart (:data:`KEYFRAME_INTERVAL_S`), so a crash keeps all but
    the last seconds.

    ``low_delay`` (a live run's recording): x264/x265 with ``tune=zerolatency``, so the
    encoder holds no frames back (no lookahead, no B-frames). Its buffered frames are what
    ``close`` must encode: with the defaults some 16 frames, which take up to 0.6 s of a
    SIGTERM's stop on a saturated 2-core machine. Offline runs keep the
    defaults (smaller files for the same ``crf``).
    """

    def __init__(self, *, path: Path, codec: str = "libx264", crf: int = 20,
                 low_delay: bool = False) -> None:
        self._path = path
        self._codec = codec
        self._crf = crf
        self._low_delay = low_delay
        self._container: Any = None
        self._file: Any = None
        self._stream: Any = None
        self._failed = False  # a write failed (and said so)

    def open(self, *, width: int, height: int, fps: float) -> None:
        import av

        if width % 2 or height % 2:
            raise OutputError(f"file output needs an even size for H.264, got {width}x{height}: "
                              "set output.width/output.height")
        if not self._path.parent.is_dir():
            raise OutputError(f"output folder {self._path.parent} does not exist")
        if self._path.is_dir():
            raise OutputError(f"output {self._path} is a folder: name a file in it, such as "
                              f"{self._path / 'livecam.mp4'}")
        created = False
        try:
            fragmented = self._path.suffix.lower() in (".mp4", ".m4v", ".mov")
            created = not os.path.lexists(self._path)
            # written through a Python file, not FFmpeg's own: FFmpeg's MP4 muxer drops a
            # fragment's write error (a disk that fills part-way: every mux and the close
            # returned, and the file was cut short after exit 0); Python's write raises it.
            # Not truncated before the container and codec are accepted.
            fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_BINARY", 0),
                         0o666)
            self._file = io.FileIO(fd, "wb")  # an fd given: nothing is truncated here
            self._file.name = str(self._path)  # PyAV picks the container by the name
            self._container = av.open(self._file, mode="w",
                                      container_options=_FRAGMENTED if fragmented else None)
            stream = self._container.add_stream(self._codec,
                                                rate=Fraction(fps).limit_denominator(1001))
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.ftruncate(fd, 0)
        except (av.error.FFmpegError, ValueError, OSError) as exc:
            if self._container is not None:  # opened, then the stream was refused
                with contextlib.suppress(av.error.FFmpegError, ValueError, OSError):
                    self._container.close()
                self._container = None
            if self._file is not None:
                self._file.close()
                self._file = None
                if created:
                    with contextlib.suppress(OSError):
                        self._path.unlink()
            # PyAV's ValueError: a container that cannot hold the codec, or an unknown suffix
            hint = (f"; {self._codec} video: use a .mp4, .mkv or .mov file"
                    if isinstance(exc, ValueError) else "")
            raise OutputError(f"cannot write {self._path}: {exc}{hint}") from None
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        if self._codec in ("libx264", "libx265"):
            options = {"crf": str(self._crf), "preset": "veryfast",
                       "g": str(max(1, round(KEYFRAME_INTERVAL_S * fps)))}
            if self._low_delay:
                options["tune"] = "zerolatency"
            stream.options = options
        self._stream = stream

    def send(self, image_bgr: ImageBGR) -> None:
        import av

        frame = av.VideoFrame.from_ndarray(image_bgr, format="bgr24")
        try:
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        except (av.error.FFmpegError, OSError) as exc:  # a full disk, a removed drive
            self._failed = True
            raise OutputError(f"cannot write {self._path}: {exc}") from None

    def close(self) -> None:
        """Write what the encoder still holds and close the file. Raises :class:`OutputError`
        when that fails (a full disk), unless a frame's write already said so."""
        import av

        if self._container is None:
            return
        container, self._container = self._container, None
        file, self._file = self._file, None
        try:
            if self._failed:  # PyAV crashes (SIGSEGV) flushing a file whose header failed
                with contextlib.suppress(av.error.FFmpegError, OSError):
                    container.close()
                return
            for packet in self._stream.encode(None):
                container.mux(packet)
            # the muxer writes what it still buffers (the last fragment, the index) here: a
            # disk that fills now is said too, not left as a file cut short after exit 0
            container.close()
            file.close()
        except (av.error.FFmpegError, OSError) as exc:
            with contextlib.suppress(av.error.FFmpegError, OSError):
                container.close()
            raise OutputError(f"cannot finish {self._path}: {exc}") from None
        finally:
            with contextlib.suppress(OSError):
                file.close()


class NullSink:
    """Discards frames (benchmarks, headless analysis)."""

    def open(self, *, width: int, height: int, fps: float) -> None:
        return None

    def send(self, image_bgr: ImageBGR) -> None:
        return None

    def close(self) -> None:
        return None
