"""The thin client's one stage (``livecam run --remote URL``): camera frames go to a ``livecam
serve`` over WHIP, the swapped frames that come back go to the local output.

:class:`RemoteSwapStage` hands each frame to a WHIP session run on its own thread and event
loop (newest frame only: a slow link drops frames, it never queues them) and returns the
newest swapped frame received. It never returns the camera frame itself: before the first
swapped frame, and whenever none came for ``stall_s`` (the link dropped or stalled), it returns
the **cover frame** (a dark card saying what happened) while the session is re-made with
backoff (0.5 s doubling to 10 s). ``health()`` (in ``livecam ctl status`` as
``remote_engines``, and on the status line) says whether the link is up, how often it was
re-made and the last error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

import cv2
import numpy as np

from livecam.core.backoff import Backoff
from livecam.core.stage import StageBase
from livecam.core.types import ImageBGR, Packet
from livecam.remote.client import FrameFeed, WhipClient, WhipError

log = logging.getLogger(__name__)

_BACKOFF_S = (0.5, 10.0)  # first and longest wait between sessions


def cover_frame(size_px: tuple[int, int], text: str) -> ImageBGR:
    """A dark (H, W, 3) uint8 card with ``text``: what the output shows while no swapped frame
    is at hand (never the camera)."""
    w, h = size_px
    image = np.zeros((h, w, 3), np.uint8)
    scale = max(0.4, w / 1600)
    cv2.putText(image, text, (max(8, w // 20), h // 2), cv2.FONT_HERSHEY_SIMPLEX, scale,
                (200, 200, 200), max(1, round(scale * 2)), cv2.LINE_AA)
    return image


class RemoteSwapStage(StageBase):
    """See the module docstring. ``process``: the pipeline thread; ``health``: any thread."""

    name = "remote"
    backend = "whip"

    def __init__(self, url: str, token: str, *, fps: float, stall_s: float = 1.0) -> None:
        self.url = url
        self._token = token
        self._fps = fps
        self._stall_s = stall_s
        self._feed = FrameFeed(fps=fps)
        self._lock = threading.Lock()
        self._newest: ImageBGR | None = None
        self._t_newest = 0.0
        self._state = "connecting"
        self._error = ""
        self._connects = 0
        self._covered = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._cover: ImageBGR | None = None

    def open(self) -> None:
        self._thread = threading.Thread(target=self._run, name="livecam-remote", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def process(self, packet: Packet) -> Packet:
        image = packet.image_bgr
        self._feed.put(image)
        h, w = image.shape[:2]
        with self._lock:
            newest, t_newest, state = self._newest, self._t_newest, self._state
        if newest is None or time.monotonic() - t_newest > self._stall_s:
            self._covered += 1
            why = {"connected": "stalled"}.get(state, state)
            if self._cover is None or self._cover.shape[:2] != (h, w):
                self._cover = cover_frame((w, h), f"livecam: remote swap {why}...")
            return packet.with_fields(image_bgr=self._cover)
        if newest.shape[:2] != (h, w):
            newest = np.ascontiguousarray(cv2.resize(newest, (w, h)), dtype=np.uint8)
        return packet.with_fields(image_bgr=newest)

    def health(self) -> dict[str, Any]:
        with self._lock:
            age = time.monotonic() - self._t_newest if self._newest is not None else None
            return {"url": self.url, "state": self._state, "sessions_made": self._connects,
                    "covered_frames": self._covered, "last_error": self._error,
                    "last_frame_age_s": None if age is None else round(age, 3)}

    def _set(self, state: str, error: str | None = None) -> None:
        with self._lock:
            if state != self._state:
                log.info("remote swap %s: %s%s", self.url, state,
                         f" ({error})" if error else "")
            self._state = state
            if error is not None:
                self._error = error

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._sessions())
        finally:
            loop.close()

    async def _sessions(self) -> None:
        """Make the session, take its frames; on a drop or stall make it again, with backoff."""
        waits = Backoff(*_BACKOFF_S)
        while not self._stopping.is_set():
            client = WhipClient(self.url, self._token, self._feed, timeout_s=10.0)
            try:
                await client.connect()
                self._connects += 1
                self._set("connected")
                got_one = False
                while not self._stopping.is_set():
                    try:
                        image = await client.received(timeout_s=max(self._stall_s * 3, 2.0)
                                                      if got_one else 30.0)
                    except TimeoutError:
                        raise WhipError("no swapped frame came back in time (stalled)"
                                        ) from None
                    if image is None:
                        raise WhipError("the server ended the session")
                    got_one = True
                    waits.reset()
                    with self._lock:
                        self._newest, self._t_newest = image, time.monotonic()
            except WhipError as exc:
                if exc.status in (401, 404, 415, 422):
                    self._set("refused", str(exc))  # retrying will not help; still retried slowly
                    waits.slowest()
                else:
                    self._set("reconnecting", str(exc))
            except Exception as exc:  # aiortc's own failures: the link is down either way
                self._set("reconnecting", f"{type(exc).__name__}: {exc}")
            finally:
                with contextlib.suppress(Exception):
                    await client.close()
            if self._stopping.is_set():
                return
            delay = waits.next_s()
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and not self._stopping.is_set():
                await asyncio.sleep(0.05)
