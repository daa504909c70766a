"""Network video inputs through PyAV (FFmpeg): ``rtmp://``, ``rtsp://``, ``srt://``, ``udp://``
(URL forms and listener mode: :mod:`livecam.core.netstreams`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from livecam.capture.base import DecodesVideo
from livecam.core.errors import CaptureError, NoSenderYet
from livecam.core.netstreams import ffmpeg_reason, missing_protocol, split_url
from livecam.core.types import ImageBGR

if TYPE_CHECKING:
    import av
    import av.container

log = logging.getLogger(__name__)

#: URL schemes ``--input`` reads through FFmpeg
INPUT_SCHEMES = ("rtmp", "rtmps", "rtsp", "srt", "udp")

#: Demuxer options for a short start and no buffering of frames FFmpeg could hand over now.
_LOW_LATENCY = {"fflags": "nobuffer", "flags": "low_delay", "probesize": "500000",
                "analyzeduration": "1000000"}


class NetworkSource(DecodesVideo):
    """Frames decoded from a network stream; ``live``: a lost stream raises
    :class:`CaptureError` from ``read`` and the capture thread reopens it with backoff.

    ``open`` fails with :class:`CaptureError` within ``timeout_s`` when no stream comes (a
    dead server, a listener nobody sent to), ``read`` when no frame arrives for that long.
    ``listener``: the run waits for a sender at start instead of failing (runtime.App).
    Only the capture thread calls ``open``/``read``/``close``.
    """

    live = True

    def __init__(self, *, url: str, timeout_s: float, fps_fallback: float,
                 size_px: tuple[int, int], max_pixels: int) -> None:
        self._url = split_url(url)
        self._timeout_s = timeout_s
        self._fps = fps_fallback
        self._size_px = size_px
        self._max_pixels = max_pixels
        self._container: av.container.InputContainer | None = None
        self._frames: Iterator[av.VideoFrame] | None = None
        self._pending: ImageBGR | None = None

    @property
    def listener(self) -> bool:
        return self._url.listen

    @property
    def shown(self) -> str:
        """The URL without its secrets (for messages)."""
        return self._url.shown

    def open(self) -> None:
        import av

        url = self._url
        wait = ("no sender connected" if url.listen else "no stream arrived")
        options = {**_LOW_LATENCY, **url.options}
        if "rtsp_flags" in options:
            # FFmpeg's RTSP listener fails at once (ERANGE) with its default of no limit; ours
            # ends first (the timeout below), so a wait reads as nobody sending, not a fault
            options["listen_timeout"] = str(round(self._timeout_s) + 5)
        try:
            container = av.open(url.url, mode="r", options=options,
                                timeout=(self._timeout_s, self._timeout_s))
        except av.ExitError:
            error = NoSenderYet if url.listen else CaptureError
            raise error(f"input {url.shown}: {wait} within "
                        f"advanced.capture.network_timeout_s={self._timeout_s:g} s") from None
        except (av.FFmpegError, OSError, UnicodeDecodeError) as exc:
            hint = (missing_protocol(url.scheme) if isinstance(exc, av.ProtocolNotFoundError)
                    else "check the URL and that the server runs")
            raise CaptureError(f"input {url.shown} cannot be opened ({ffmpeg_reason(exc)}): "
                               f"{hint}") from None
        try:
            if not container.streams.video:
                raise CaptureError(f"input {url.shown} carries no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            rate = stream.average_rate or stream.guessed_rate
            if rate is not None and 0 < rate <= 240:
                self._fps = float(rate)
            self._container = container
            self._frames = iter(container.decode(stream))
            image = self.read()
        except BaseException:
            self.close()
            raise
        self._pending = image
        self._size_px = (image.shape[1], image.shape[0])
        log.info("input %s: %dx%d at %g fps (%s)", url.shown, image.shape[1], image.shape[0],
                 self._fps, container.format.name)

    def read(self) -> ImageBGR:
        import av

        if self._frames is None:
            raise CaptureError("network source is not open")
        image, self._pending = self._pending, None
        if image is not None:
            return image
        try:
            frame = next(self._frames)
        except StopIteration:
            raise CaptureError(f"input {self._url.shown}: the stream ended") from None
        except av.ExitError:
            raise CaptureError(
                f"input {self._url.shown}: no frame for "
                f"advanced.capture.network_timeout_s={self._timeout_s:g} s") from None
        except (av.FFmpegError, OSError) as exc:
            raise CaptureError(f"input {self._url.shown} was lost "
                               f"({ffmpeg_reason(exc)})") from None
        if frame.width * frame.height > self._max_pixels:
            raise CaptureError(f"input {self._url.shown} sends {frame.width}x{frame.height} "
                               "frames, above advanced.capture.max_image_megapixels")
        return self._decoded(frame)

    def close(self) -> None:
        import av

        self._frames, self._pending = None, None
        self._forget_planes()
        if self._container is not None:
            container, self._container = self._container, None
            try:
                container.close()
            except (av.FFmpegError, OSError) as exc:
                log.debug("input %s: close: %s", self._url.shown, exc)
