"""A WHIP client on aiortc: sends a camera's frames to ``livecam serve`` and receives the
swapped frames on the same (``sendrecv``) video transceiver. Used by the tests, by
``scripts/bench_remote.py`` and by the thin client.

    client = WhipClient(url, token, frames=FrameFeed(fps=30))
    await client.connect()          # POST the offer; WhipError with the server's reason
    ... client.feed.put(image_bgr)  # camera frames in (any thread)
    image = await client.received() # swapped frames out (received_with_planes: and their I420)
    await client.close()            # DELETE the session
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from livecam.capture.base import copy_i420_planes, has_i420_planes
from livecam.core.errors import LivecamError
from livecam.core.types import ImageBGR, ImageI420
from livecam.remote.encoding import H264PacketEncoder, prefer_h264, sent_codec, to_video_frame

#: How many of the last sent frames' waits :meth:`FrameFeed.send_waits_ms` keeps
_WAITS_KEPT = 100
#: A received picture's I420 planes, made on first call (see :func:`lazy_planes_i420`)
PlanesI420 = Callable[[], ImageI420]


def lazy_planes_i420(frame: Any) -> PlanesI420 | None:
    """The decoded yuv420p ``frame``'s planes as one :data:`~livecam.core.types.ImageI420`
    array, copied out of the decoder's frame on the first call (a sink that does not take
    I420 never pays for it) and the same array after; None for another format or an odd
    size. Any thread."""
    if not has_i420_planes(frame):
        return None
    made: list[ImageI420] = []

    def planes() -> ImageI420:
        if not made:
            made.append(copy_i420_planes(frame))
        return made[0]

    return planes


class WhipError(LivecamError, ConnectionError):
    """The server refused the offer (``status``, its reason) or could not be reached."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class FrameFeed:
    """Frames to send, newest only: ``put`` from any thread. The outgoing track
    (:func:`feed_track`) sends each new frame as it arrives (the camera's own pace: no wait
    for a tick of its own), repeats the last one when no new one came (1.5 intervals of
    ``1/fps`` after a new frame, then every interval: the link keeps its pace), and calls
    ``on_sent(image)`` just before handing each to the encoder. A frame put with its I420
    planes (``planes_i420``: the camera's own, as the source decoded them) goes to the
    encoder as those planes, with no conversion from BGR. ``send_waits_ms()``: how long
    the last new frames waited between ``put`` and going to the encoder; ``repeats``: how
    many repeats went."""

    def __init__(self, *, fps: float, on_sent: Callable[[ImageBGR], None] | None = None) -> None:
        self.fps = fps
        self.on_sent = on_sent
        self._lock = threading.Lock()
        self._newest: ImageBGR | None = None
        self._newest_planes: ImageI420 | None = None
        self._puts = 0  # frames put so far: a new one since the last send when it grew
        self._t_put = 0.0  # time.monotonic() of the newest put
        self._waker: Callable[[], None] | None = None
        self._waits_ms: deque[float] = deque(maxlen=_WAITS_KEPT)
        self.repeats = 0  # frames sent again because no new one came

    def put(self, image_bgr: ImageBGR, planes_i420: ImageI420 | None = None) -> None:
        """``image_bgr`` to send next; ``planes_i420``: the (H * 3 / 2, W) uint8 I420
        planes it was decoded from, where it was (never written to after)."""
        with self._lock:
            self._newest, self._newest_planes = image_bgr, planes_i420
            self._puts += 1
            self._t_put = time.monotonic()
            waker = self._waker
        if waker is not None:
            waker()

    def newest(self) -> tuple[ImageBGR | None, int, float]:
        """The newest frame, how many frames were put so far, and when the newest was."""
        with self._lock:
            return self._newest, self._puts, self._t_put

    def planes_of(self, image_bgr: ImageBGR) -> ImageI420 | None:
        """The I420 planes put with ``image_bgr``, when it is the newest frame."""
        with self._lock:
            return self._newest_planes if image_bgr is self._newest else None

    def wake_with(self, waker: Callable[[], None] | None) -> None:
        """``waker()`` is called (on the putting thread) after each ``put``."""
        with self._lock:
            self._waker = waker

    def record_send(self, wait_s: float | None) -> None:
        """A frame went to the encoder: a new one that waited ``wait_s`` since its ``put``,
        or (None) a repeat."""
        with self._lock:
            if wait_s is None:
                self.repeats += 1
            else:
                self._waits_ms.append(wait_s * 1000.0)

    def send_waits_ms(self) -> list[float]:
        """The last new frames' waits between ``put`` and the encoder, ms, oldest first."""
        with self._lock:
            return list(self._waits_ms)


def feed_track(feed: FrameFeed) -> Any:
    """An aiortc video track sending ``feed``'s frames (see :class:`FrameFeed`), each as
    :func:`to_video_frame` makes it, stamped on a 90 kHz clock from the time it is sent.
    Event loop only. Its ``encoder`` (None: aiortc encodes the frames) is set to an
    :class:`~livecam.remote.encoding.H264PacketEncoder` once the answer says H.264: the
    track then hands aiortc packets encoded here."""
    from aiortc.mediastreams import MediaStreamTrack
    from av import Packet, VideoFrame

    class FeedTrack(MediaStreamTrack):
        kind = "video"

        def __init__(self) -> None:
            super().__init__()
            self._t0_ns: int | None = None
            self._t_sent = -1e9  # time.monotonic() of the last send
            self._sent_puts = 0  # feed's put count at the last send
            self._last_new = True  # the last send was a new frame, not a repeat
            self._frame_due: asyncio.Future[None] | None = None
            self._woken_by: asyncio.AbstractEventLoop | None = None
            self.encoder: H264PacketEncoder | None = None

        async def recv(self) -> VideoFrame | Packet:
            while True:
                frame = await self._next_frame()
                if self.encoder is None:
                    return frame
                packet = self.encoder.encode(frame)
                if packet is not None:
                    return packet

        def _poke(self) -> None:
            """Wake the waiting ``_next_frame`` (event loop only)."""
            if self._frame_due is not None and not self._frame_due.done():
                self._frame_due.set_result(None)

        async def _next_frame(self) -> VideoFrame:
            loop = asyncio.get_running_loop()
            if self._woken_by is not loop:
                poke = self._poke

                def waker() -> None:  # on the putting thread
                    with contextlib.suppress(RuntimeError):  # the loop closed: no session
                        loop.call_soon_threadsafe(poke)

                feed.wake_with(waker)
                self._woken_by = loop
            while True:
                image, puts, t_put = feed.newest()
                now = time.monotonic()
                new = image is not None and puts != self._sent_puts
                # a repeat 1.5 intervals after a new frame (a late camera frame is not
                # sent twice, repeat and frame), then every interval
                repeat_at = self._t_sent + (1.5 if self._last_new else 1.0) / feed.fps
                if new or (image is not None and now >= repeat_at):
                    break
                # until the next put, or (with a frame to repeat) the repeat's time
                self._frame_due = loop.create_future()
                timer = None if image is None else loop.call_at(
                    loop.time() + repeat_at - now, self._poke)
                try:
                    await self._frame_due
                finally:
                    self._frame_due = None
                    if timer is not None:
                        timer.cancel()
            assert image is not None  # the loop ends on a frame only
            feed.record_send(now - t_put if new else None)
            self._t_sent, self._sent_puts, self._last_new = now, puts, new
            if feed.on_sent is not None:
                feed.on_sent(image)
            frame = to_video_frame(image, feed.planes_of(image))
            now_ns = time.monotonic_ns()
            if self._t0_ns is None:
                self._t0_ns = now_ns
            frame.pts = (now_ns - self._t0_ns) * 90_000 // 1_000_000_000
            frame.time_base = fractions.Fraction(1, 90_000)
            return frame

    return FeedTrack()


class WhipClient:
    """One WHIP session with ``url`` (``…/whip``, query parameters kept). Event loop only."""

    def __init__(self, url: str, token: str, feed: FrameFeed, *, audio: bool = False,
                 timeout_s: float = 20.0, ssl: Any = None) -> None:
        self.url = url
        self.token = token
        self.feed = feed
        self.audio = audio
        self.timeout_s = timeout_s
        self.ssl = ssl
        self.location: str | None = None
        self.answer_sdp = ""
        self.codec = ""  # the video codec both ways, from the answer ("H264", "VP8")
        self.pc: Any = None
        self._frames: asyncio.Queue[tuple[ImageBGR, PlanesI420 | None] | None] = (
            asyncio.Queue(maxsize=2))
        self._tasks: set[asyncio.Task[None]] = set()

    async def connect(self) -> None:
        """Offer, get the answer (raises :class:`WhipError` with the server's reason)."""
        import aiohttp
        from aiortc import RTCPeerConnection, RTCSessionDescription

        from livecam.remote.jitter import complete_frames_at_marker

        pc = self.pc = RTCPeerConnection()
        track = feed_track(self.feed)
        prefer_h264(pc.addTransceiver(track, direction="sendrecv"))
        if self.audio:
            pc.addTransceiver("audio", direction="sendrecv")
        complete_frames_at_marker(pc)  # the swapped frames one frame sooner

        @pc.on("track")
        def on_track(track: Any) -> None:
            if track.kind == "video":
                task = asyncio.ensure_future(self._receive(track))
                self._tasks.add(task)

        await pc.setLocalDescription(await pc.createOffer())
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/sdp"}
        try:
            async with aiohttp.ClientSession() as http, http.post(
                    self.url, data=pc.localDescription.sdp, headers=headers, ssl=self.ssl,
                    timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as resp:
                body = await resp.text()
                if resp.status != 201:
                    await pc.close()
                    raise WhipError(f"{self.url} refused the offer ({resp.status}): "
                                    f"{body.strip()}", resp.status)
                self.location = str(resp.url.join(aiohttp.client.URL(resp.headers["Location"])))
                self.answer_sdp = body
        except (aiohttp.ClientError, TimeoutError) as exc:
            await pc.close()
            raise WhipError(f"no WHIP server at {self.url} ({type(exc).__name__}: {exc})"
                            ) from None
        self.codec = sent_codec(body)
        if self.codec == "H264":
            track.encoder = H264PacketEncoder(fps=self.feed.fps)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))

    async def _receive(self, track: Any) -> None:
        from aiortc.mediastreams import MediaStreamError

        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                break
            image = np.ascontiguousarray(frame.to_ndarray(format="bgr24"))
            if self._frames.full():  # newest only: a slow reader drops, it never queues
                with contextlib.suppress(asyncio.QueueEmpty):
                    self._frames.get_nowait()
            self._frames.put_nowait((image, lazy_planes_i420(frame)))
        await self._frames.put(None)

    async def received(self, timeout_s: float | None = None) -> ImageBGR | None:
        """The next swapped frame (None: the server ended the video); ``TimeoutError``."""
        got = await self.received_with_planes(timeout_s)
        return None if got is None else got[0]

    async def received_with_planes(self, timeout_s: float | None = None
                                   ) -> tuple[ImageBGR, PlanesI420 | None] | None:
        """The next swapped frame and its I420 planes as decoded (:func:`lazy_planes_i420`),
        or None (the server ended the video); ``TimeoutError``."""
        return await asyncio.wait_for(self._frames.get(), timeout_s)

    async def session_call(self, path: str = "", body: dict[str, Any] | None = None, *,
                           data: bytes | None = None, content_type: str = ""
                           ) -> tuple[int, Any]:
        """A call on the session's Location (``path``: "" for its state, "/command", "/photo")
        with its token: GET without ``body``/``data``, else POST of JSON ``body`` or of raw
        ``data`` as ``content_type``. (status, the JSON answer or the error's text);
        :class:`WhipError` when the server does not answer."""
        import aiohttp

        if self.location is None:
            raise WhipError("no session yet")
        headers = {"Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = content_type
        method = "GET" if body is None and data is None else "POST"
        try:
            async with aiohttp.ClientSession() as http, http.request(
                    method, self.location + path, json=body, data=data, headers=headers,
                    ssl=self.ssl, timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as resp:
                if resp.status == 200:
                    return resp.status, await resp.json()
                return resp.status, (await resp.text()).strip()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise WhipError(f"session {self.location}: no answer ({type(exc).__name__}: "
                            f"{exc})") from None

    async def close(self) -> None:
        """DELETE the session (best effort) and close the connection. Idempotent."""
        import aiohttp

        if self.location is not None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with aiohttp.ClientSession() as http, http.delete(
                        self.location, headers={"Authorization": f"Bearer {self.token}"},
                        ssl=self.ssl, timeout=aiohttp.ClientTimeout(total=5)):
                    pass
            self.location = None
        for task in self._tasks:
            task.cancel()
        if self.pc is not None:
            await self.pc.close()
