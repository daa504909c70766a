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
from collections.abc import Callable
from typing import Any

import numpy as np

from livecam.core.errors import LivecamError
from livecam.core.types import ImageBGR, ImageI420
from livecam.remote.encoding import H264PacketEncoder, prefer_h264, sent_codec, to_video_frame

#: A received picture's I420 planes, made on first call (see :func:`lazy_planes_i420`)
PlanesI420 = Callable[[], ImageI420]


def lazy_planes_i420(frame: Any) -> PlanesI420 | None:
    """The decoded yuv420p ``frame``'s planes as one :data:`~livecam.core.types.ImageI420`
    array, copied out of the decoder's frame on the first call (a sink that does not take
    I420 never pays for it) and the same array after; None for another format or an odd
    size. Any thread."""
    if frame.format.name != "yuv420p" or frame.width % 2 or frame.height % 2:
        return None
    made: list[ImageI420] = []

    def planes() -> ImageI420:
        if not made:
            made.append(np.ascontiguousarray(frame.to_ndarray(), np.uint8))
        return made[0]

    return planes


class WhipError(LivecamError, ConnectionError):
    """The server refused the offer (``status``, its reason) or could not be reached."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class FrameFeed:
    """Frames to send, newest only: ``put`` from any thread; the outgoing track takes one per
    ``1/fps`` (repeating the last one when none came, so the link keeps its pace) and calls
    ``on_sent(image)`` just before handing each to the encoder."""

    def __init__(self, *, fps: float, on_sent: Callable[[ImageBGR], None] | None = None) -> None:
        self.fps = fps
        self.on_sent = on_sent
        self._lock = threading.Lock()
        self._newest: ImageBGR | None = None

    def put(self, image_bgr: ImageBGR) -> None:
        with self._lock:
            self._newest = image_bgr

    def take(self) -> ImageBGR | None:
        with self._lock:
            return self._newest


def feed_track(feed: FrameFeed) -> Any:
    """An aiortc video track sending ``feed``'s newest frame every ``1/feed.fps`` s, each as
    :func:`to_video_frame` makes it, stamped on a 90 kHz clock. Event loop only. Its
    ``encoder`` (None: aiortc encodes the frames) is set to an
    :class:`~livecam.remote.encoding.H264PacketEncoder` once the answer says H.264: the
    track then hands aiortc packets encoded here."""
    from aiortc.mediastreams import MediaStreamTrack
    from av import Packet, VideoFrame

    class FeedTrack(MediaStreamTrack):
        kind = "video"

        def __init__(self) -> None:
            super().__init__()
            self._t0: float | None = None
            self._n = 0
            self.encoder: H264PacketEncoder | None = None

        async def recv(self) -> VideoFrame | Packet:
            while True:
                frame = await self._next_frame()
                if self.encoder is None:
                    return frame
                packet = self.encoder.encode(frame)
                if packet is not None:
                    return packet

        async def _next_frame(self) -> VideoFrame:
            if self._t0 is None:
                self._t0 = time.monotonic()
            due = self._t0 + self._n / feed.fps
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            image = feed.take()
            while image is None:  # nothing to send yet
                await asyncio.sleep(1.0 / feed.fps)
                image = feed.take()
            if feed.on_sent is not None:
                feed.on_sent(image)
            frame = to_video_frame(image)
            frame.pts = round(self._n * 90_000 / feed.fps)
            frame.time_base = fractions.Fraction(1, 90_000)
            self._n += 1
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

        pc = self.pc = RTCPeerConnection()
        track = feed_track(self.feed)
        prefer_h264(pc.addTransceiver(track, direction="sendrecv"))
        if self.audio:
            pc.addTransceiver("audio", direction="sendrecv")

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
