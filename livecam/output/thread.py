"""The output thread: paces frames to the sink at the configured fps and never stalls."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import cv2
import numpy as np

from livecam.core.mailbox import Mailbox, MailboxClosed
from livecam.core.metrics import Metrics
from livecam.core.types import ImageBGR, Packet
from livecam.output.base import FrameSink

log = logging.getLogger(__name__)

#: Frames the pacer may send early, in frame intervals: absorbs input jitter so a frame that
#: arrives a little early goes out at once instead of waiting for the next tick.
_BURST_FRAMES = 0.5


class OutputThread:
    """Takes packets from ``inbox`` and sends their images to ``sink``.

    Real-time mode: a new frame is sent as soon as it arrives, unless that would exceed ``fps``
    on average (token bucket, half a frame of burst). When no new frame has come for 1.5 frame
    intervals, the last one is sent again (then every interval), so OBS/Zoom never see the
    camera freeze; before the first frame a black frame is sent. Offline mode
    (``realtime=False``): every packet is sent once, in order, as fast as the sink takes it.

    Stops by itself after ``max_frames`` sends (repeats included) or when the inbox closes, then
    calls ``on_done``.
    """

    def __init__(self, *, sink: FrameSink, inbox: Mailbox[Packet], metrics: Metrics,
                 width: int, height: int, fps: float, realtime: bool,
                 max_frames: int | None = None, on_done: Callable[[], None] | None = None,
                 on_sent: Callable[[Packet | None, ImageBGR], None] | None = None) -> None:
        self._sink = sink
        self._inbox = inbox
        self._metrics = metrics
        self._size_px = (width, height)
        self._period_s = 1.0 / fps
        self._realtime = realtime
        self._max_frames = max_frames
        self._on_done = on_done
        self._on_sent = on_sent
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="livecam-output", daemon=True)
        self.sent = 0
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end without waiting for it (see ``stop``)."""
        self._stop.set()

    def stop(self, join_timeout_s: float = 0.5) -> None:
        self._stop.set()
        self._thread.join(join_timeout_s)

    def join(self, timeout_s: float | None = None) -> bool:
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _fit(self, image: ImageBGR) -> ImageBGR:
        width, height = self._size_px
        if image.shape[1] != width or image.shape[0] != height:
            return np.asarray(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA))
        return image

    def _send(self, packet: Packet | None, image: ImageBGR) -> None:
        self._sink.send(image)
        self.sent += 1
        self._metrics.count("sent")
        if packet is not None:
            self._metrics.record_latency_ns(time.perf_counter_ns() - packet.frame.t_capture_ns)
        else:
            self._metrics.count("repeated")
        if self._on_sent is not None:
            self._on_sent(packet, image)

    def _done(self) -> bool:
        return self._stop.is_set() or (
            self._max_frames is not None and self.sent >= self._max_frames
        )

    def _run(self) -> None:
        try:
            if self._realtime:
                self._run_realtime()
            else:
                self._run_offline()
        except Exception as exc:
            self.error = exc
            log.error("output failed: %s", exc)
        finally:
            if self._on_done is not None:
                self._on_done()

    def _run_offline(self) -> None:
        while not self._done():
            try:
                packet = self._inbox.get(timeout_s=0.1)
            except MailboxClosed:
                return
            if packet is not None:
                self._send(packet, self._fit(packet.image_bgr))

    def _run_realtime(self) -> None:
        period = self._period_s
        width, height = self._size_px
        last_image: ImageBGR = np.zeros((height, width, 3), np.uint8)
        tokens = 1.0
        t_refill = t_last_send = time.perf_counter()
        last_was_new = True
        inbox_open = True
        while not self._done():
            wait_s = (1.5 if last_was_new else 1.0) * period
            timeout = max(0.0, t_last_send + wait_s - time.perf_counter())
            packet: Packet | None = None
            if inbox_open:
                try:
                    packet = self._inbox.get(timeout_s=min(timeout, 0.1))
                except MailboxClosed:
                    inbox_open = False  # pipeline ended: keep repeating until stopped
            elif timeout > 0:
                self._stop.wait(min(timeout, 0.1))
            now = time.perf_counter()
            if packet is None and now - t_last_send < wait_s:
                continue  # nothing new yet, and not yet time to repeat
            tokens = min(1.0 + _BURST_FRAMES, tokens + (now - t_refill) / period)
            t_refill = now
            if tokens < 1.0:
                self._stop.wait((1.0 - tokens) * period)
                if inbox_open:
                    try:
                        packet = self._inbox.get(timeout_s=0) or packet  # newest wins
                    except MailboxClosed:
                        inbox_open = False
                now = time.perf_counter()
                tokens = min(1.0 + _BURST_FRAMES, tokens + (now - t_refill) / period)
                t_refill = now
            if packet is not None:
                last_image = self._fit(packet.image_bgr)
            self._send(packet, last_image)
            tokens -= 1.0
            t_last_send = time.perf_counter()
            last_was_new = packet is not None
