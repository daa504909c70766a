"""Frames between aiortc's event loop and a stream's threads.

A session's camera arrives on the event loop (``await track.recv()``) and is handed to the
stream's capture thread through :class:`SessionSource` (newest frame only: a slow pipeline
drops, it never queues); the stream's output thread hands each frame it sends to
:class:`SessionSink`, which :class:`SwappedTrack` (the outgoing video on the same
transceiver) sends back. Only what the pipeline sent goes back: before the first swapped
frame the track sends nothing, never the camera itself.

**Repeats are thinned.** The output thread keeps its pace by repeating the last frame when no
new one came (a slow pipeline: at 3 new frames a second, 27 repeats). Each frame handed to
the track costs a VP8 encode here (~8 ms at 720p, a repeat as much as a new frame) and a
decode and conversion at the client, for no new picture: so a repeat goes to the track only
when nothing went for :data:`REPEAT_EVERY_S`, which keeps the link visibly alive (the thin
client covers after 1 s without a frame). New frames always go, at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from livecam.core.errors import CaptureError
from livecam.core.types import ImageBGR

#: aiortc's video clock (RTP timestamps of video are 90 kHz).
VIDEO_TIME_BASE = fractions.Fraction(1, 90_000)
#: A repeated frame goes back at most this often (s): 4 a second, not the output's fps.
REPEAT_EVERY_S = 0.25


class SessionSource:
    """The camera of one remote session as a live :class:`~livecam.capture.FrameSource`.

    ``push`` (the event loop; any thread) keeps the newest frame and counts the ones the
    capture thread did not take in time; it takes the decoded ``av.VideoFrame`` itself (or
    anything with ``width``, ``height`` and ``to_ndarray(format=)``), which is converted to
    BGR (and resized) by ``read``, in the capture thread, for the frames taken only: a slow
    pipeline takes 3 of 30 a second, and the event loop, which also carries the RTP, does no
    conversion at all; ``end`` says the session is over (``read`` then
    returns None and the stream ends). ``open`` waits for the first frame (its size is the
    stream's size; later frames of another size are resized to it, as browsers change
    resolution under load) for ``first_frame_timeout_s``; ``read`` raises ``CaptureError``
    when no frame came for ``stall_s`` (the capture thread then retries, and the output
    keeps sending the last swapped frame or the cover).
    """

    live = True

    def __init__(self, *, fps: float, first_frame_timeout_s: float = 15.0,
                 stall_s: float = 2.0) -> None:
        self._fps = fps
        self._first_timeout_s = first_frame_timeout_s
        self._stall_s = stall_s
        self._cond = threading.Condition()
        self._newest: ImageBGR | Any = None
        self._size: tuple[int, int] | None = None
        self._ended = False
        self.pushed = 0
        self.overwritten = 0

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def size_px(self) -> tuple[int, int]:
        if self._size is None:
            raise CaptureError("the remote camera has sent no frame yet")
        return self._size

    def push(self, frame: ImageBGR | Any) -> None:
        """Hand over one camera frame: (H, W, 3) uint8 BGR, or a decoded video frame
        (converted when taken). Any thread."""
        with self._cond:
            if self._newest is not None:
                self.overwritten += 1
            self._newest = frame
            self.pushed += 1
            self._cond.notify_all()

    def end(self) -> None:
        """The session is over: ``read`` returns None from now on. Any thread; idempotent."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def open(self) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._newest is not None or self._ended,
                                       self._first_timeout_s if self._size is None
                                       else self._stall_s):
                raise CaptureError(f"the remote camera sent no frame in "
                                   f"{self._first_timeout_s:g} s")
            if self._size is None and self._newest is not None:
                self._size = _size_of(self._newest)

    def read(self) -> ImageBGR | None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._newest is not None or self._ended,
                                       self._stall_s):
                raise CaptureError(f"the remote camera stalled (no frame for "
                                   f"{self._stall_s:g} s)")
            if self._ended:
                return None
            frame, self._newest = self._newest, None
            size = self._size
        image = frame if isinstance(frame, np.ndarray) else np.ascontiguousarray(
            frame.to_ndarray(format="bgr24"))
        if size is not None and image.shape[1::-1] != size:
            import cv2

            image = np.ascontiguousarray(cv2.resize(image, size))
        return image

    def close(self) -> None:
        pass  # the session owns the connection; the stream owns nothing here


def _size_of(frame: ImageBGR | Any) -> tuple[int, int]:
    """(width, height) of an image or a video frame."""
    if isinstance(frame, np.ndarray):
        return int(frame.shape[1]), int(frame.shape[0])
    return int(frame.width), int(frame.height)


class SessionSink:
    """The frames one stream sends, handed to :class:`SwappedTrack` on ``loop``.

    ``send`` is called by the stream's output thread only (paced at the output's fps, the
    last frame repeated, the same array, when no new one came); it never blocks: the track
    takes the newest. A repeat is handed over only when nothing was for ``repeat_every_s``
    (the module docstring says why); ``sent`` counts what was handed over, ``repeats_skipped``
    the rest, ``dropped`` the frames handed over that a newer one replaced before the track
    took them (the event loop, which encodes and sends, was behind: the newest goes, never a
    queue of older ones). ``clock``: seconds, monotonic (tests give their own).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, *,
                 repeat_every_s: float = REPEAT_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._loop = loop
        self._newest: ImageBGR | None = None
        self._event = asyncio.Event()
        self._closed = False
        self._repeat_every_s = repeat_every_s
        self._clock = clock
        self._last: ImageBGR | None = None
        self._t_last = 0.0
        self.size_px = (0, 0)
        self.sent = 0
        self.repeats_skipped = 0
        self.dropped = 0

    def open(self, *, width: int, height: int, fps: float) -> None:
        self.size_px = (width, height)

    def send(self, image_bgr: ImageBGR) -> None:
        now = self._clock()
        if image_bgr is self._last and now - self._t_last < self._repeat_every_s:
            self.repeats_skipped += 1
            return
        self._last, self._t_last = image_bgr, now
        self.sent += 1
        with contextlib.suppress(RuntimeError):  # the loop closed: the session is gone
            self._loop.call_soon_threadsafe(self._hand_over, image_bgr)

    def _hand_over(self, image_bgr: ImageBGR | None) -> None:
        if self._newest is not None:
            self.dropped += 1
        self._newest = image_bgr
        self._event.set()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._hand_over, None)

    async def next_frame(self) -> ImageBGR | None:
        """The next frame the stream sent (None: the stream closed). Event loop only."""
        await self._event.wait()
        self._event.clear()
        image, self._newest = self._newest, None
        return image


def make_swapped_track(sink: SessionSink) -> Any:
    """An aiortc video track sending what ``sink`` receives (timestamps from the wall clock
    at hand-over, 90 kHz), converted by :func:`~livecam.remote.encoding.to_video_frame`.
    Ends (``MediaStreamError``) once the stream closed. Its ``encoder`` (None: aiortc
    encodes the frames) is set to an :class:`~livecam.remote.encoding.H264PacketEncoder`
    when the answer says H.264: the track then hands aiortc packets encoded here."""
    from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
    from av import Packet, VideoFrame

    from livecam.remote.encoding import H264PacketEncoder, to_video_frame

    class SwappedTrack(MediaStreamTrack):
        kind = "video"

        def __init__(self) -> None:
            super().__init__()
            self._t0_ns: int | None = None
            self.encoder: H264PacketEncoder | None = None

        async def recv(self) -> VideoFrame | Packet:
            while True:
                image = await sink.next_frame()
                if image is None:
                    self.stop()
                    raise MediaStreamError
                now = time.monotonic_ns()
                if self._t0_ns is None:
                    self._t0_ns = now
                frame = to_video_frame(image)
                frame.pts = (now - self._t0_ns) * 90_000 // 1_000_000_000
                frame.time_base = VIDEO_TIME_BASE
                if self.encoder is None:
                    return frame
                packet = self.encoder.encode(frame)
                if packet is not None:
                    return packet

    return SwappedTrack()
