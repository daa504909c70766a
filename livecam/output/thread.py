"""The output thread: paces frames to the sink at the configured fps and never stalls."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

import cv2
import numpy as np

from livecam.core.mailbox import Mailbox, MailboxClosed
from livecam.core.metrics import Metrics
from livecam.core.types import ImageBGR, ImageI420, Packet
from livecam.output.base import FrameSink, I420Sink

log = logging.getLogger(__name__)

#: Frames the pacer may send early, in frame intervals: absorbs input jitter so a frame that
#: arrives a little early goes out at once instead of waiting for the next tick.
_BURST_FRAMES = 0.5
#: How much faster than the frame rate the pacer's bucket refills. At exactly the rate, a
#: bucket left short once (a burst of frames after start-up or a hiccup) stays short for the
#: whole run when frames then come at exactly that rate: every frame waits the same 10 ms
#: (a CPU run of `livecam run`) to 21 ms (capture→sink 29 ms for 8 ms of work on the H200).
#: 1/16 faster pays that back within 16 frames a frame's worth.
_CATCH_UP = 1.0 / 16.0


class Pacer:
    """When a new frame may go out without exceeding ``1 / period_s`` frames a second on
    average (by more than ``_CATCH_UP``): a token bucket refilled ``_CATCH_UP`` faster than
    that rate, holding at most ``1 + _BURST_FRAMES`` tokens; a new frame takes one
    (:meth:`wait_s` says how long to wait for it). Repeats of the last frame take none: a
    repeat stands in for a frame that did not come and must not delay the next one that does
    (the black frames repeated while the pipeline starts left the bucket short). Times are
    ``time.perf_counter`` seconds; one thread."""

    def __init__(self, period_s: float, now_s: float) -> None:
        self.tokens = 1.0
        self._t_refill = now_s
        self._refill_s = period_s / (1.0 + _CATCH_UP)  # seconds a token takes to come back

    def _refill(self, now_s: float) -> None:
        self.tokens = min(1.0 + _BURST_FRAMES,
                          self.tokens + (now_s - self._t_refill) / self._refill_s)
        self._t_refill = now_s

    def wait_s(self, now_s: float) -> float:
        """Seconds until a new frame may be sent (0: now): until the bucket holds a token."""
        self._refill(now_s)
        return max(0.0, (1.0 - self.tokens) * self._refill_s)

    def sent(self, now_s: float, *, new: bool) -> None:
        """A frame went out at ``now_s`` (``new`` False: a repeat, which takes no token)."""
        self._refill(now_s)
        if new:
            self.tokens -= 1.0


class OutputThread:
    """Takes packets from ``inbox`` and sends their images to ``sink``.

    Real-time mode: a new frame is sent as soon as it is due, unless that would exceed ``fps``
    on average (:class:`Pacer`: token bucket, half a frame of burst; repeats take no token).
    A frame is due ``delay_ms`` after its capture (the A/V delay, 0 = at once): frames wait in
    a delay line, oldest first; when several are due at once only the newest is sent and the
    others count as dropped. When nothing new has been sent for 1.5 frame intervals, the last
    frame is sent again (then every interval), so OBS/Zoom never see the camera freeze. Before
    the first frame, the idle (black) frame is sent only while ``input_waiting()`` says the
    input is not open (a missing camera, a silent pipe; None: always): once it is, the first
    frame sent is the input's first (not 12-17 black frames while the stages warm up).
    Offline mode (``realtime=False``): every packet is
    sent once, in order, as fast as the sink takes it (no delay).

    A sink that takes I420 (:class:`~livecam.output.base.I420Sink`) gets a picture that
    arrived as I420 (:meth:`~livecam.core.types.Packet.planes_i420`; the thin client's) as
    those planes, repeats included, unless it had to be resized to the output's size.

    Stops by itself after ``max_frames`` sends (repeats included) or when the inbox closes (the
    input ended) and the delay line has sent what it held, then calls ``on_done``.
    ``delay_ms`` may be changed from any thread (:meth:`set_delay_ms`).
    """

    def __init__(self, *, sink: FrameSink, inbox: Mailbox[Packet], metrics: Metrics,
                 width: int, height: int, fps: float, realtime: bool,
                 max_frames: int | None = None, on_done: Callable[[], None] | None = None,
                 on_sent: Callable[[Packet | None, ImageBGR], None] | None = None,
                 delay_ms: float = 0.0,
                 input_waiting: Callable[[], bool] | None = None) -> None:
        self._sink = sink
        self._input_waiting = input_waiting
        self._inbox = inbox
        self._metrics = metrics
        self._size_px = (width, height)
        self._period_s = 1.0 / fps
        self._realtime = realtime
        self._max_frames = max_frames
        self._on_done = on_done
        self._on_sent = on_sent
        self._delay_ns = int(delay_ms * 1e6)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="livecam-output", daemon=True)
        self._held: deque[Packet] = deque()
        # the sink is open by now: whether it takes I420 planes (pictures that arrived so)
        self._i420 = isinstance(sink, I420Sink) and sink.takes_i420
        self.sent = 0
        self.dropped = 0  # frames that were due together with a newer one (delay line)
        self.error: BaseException | None = None

    @property
    def delay_ms(self) -> float:
        return self._delay_ns / 1e6

    def set_delay_ms(self, delay_ms: float) -> None:
        """Hold frames ``delay_ms`` after capture from now on (any thread). A shorter delay
        sends the newest frame that is now due and drops the older ones; a longer one repeats
        the last frame until the first frame is due again."""
        self._delay_ns = int(delay_ms * 1e6)

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end without waiting for it (see ``stop``)."""
        self._stop.set()

    def stop(self, join_timeout_s: float = 0.5) -> None:
        """Ask the thread to end and wait up to ``join_timeout_s`` for it; a thread never
        started (a stop signal while the run was starting) has nothing to wait for."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(join_timeout_s)

    def join(self, timeout_s: float | None = None) -> bool:
        if self._thread.ident is not None:
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

    def _planes(self, packet: Packet, image: ImageBGR) -> ImageI420 | None:
        """``packet``'s I420 planes for a sink that takes them, when ``image`` (what goes
        out) is the packet's own picture, not resized; else None."""
        if image is not packet.image_bgr or not self._i420:
            return None
        return packet.planes_i420()

    def _send(self, packet: Packet | None, image: ImageBGR,
              planes: ImageI420 | None = None) -> None:
        if planes is not None:
            self._sink.send_i420(planes)  # type: ignore[attr-defined]  # _i420: an I420Sink
        else:
            self._sink.send(image)
        now_ns = time.perf_counter_ns()
        self.sent += 1
        self._metrics.count("sent")
        self._metrics.record_send(now_ns)
        if packet is not None:
            self._metrics.record_latency_ns(now_ns - packet.frame.t_capture_ns)
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
                image = self._fit(packet.image_bgr)
                self._send(packet, image, self._planes(packet, image))

    def _take(self, timeout_s: float) -> bool:
        """Move the inbox's packet (waiting up to ``timeout_s``) into the delay line; False
        once the inbox is closed."""
        try:
            packet = self._inbox.get(timeout_s=timeout_s)
        except MailboxClosed:
            return False
        if packet is not None:
            self._metrics.record_pipeline_latency_ns(time.perf_counter_ns()
                                                     - packet.frame.t_capture_ns)
            self._held.append(packet)
        return True

    def _newest_due(self, now_ns: int) -> Packet | None:
        """Pop the frames due by ``now_ns``; return the newest (the others are dropped)."""
        due: Packet | None = None
        delay = self._delay_ns
        while self._held and self._held[0].frame.t_capture_ns + delay <= now_ns:
            if due is not None:
                self.dropped += 1
            due = self._held.popleft()
        return due

    def _run_realtime(self) -> None:
        period = self._period_s
        width, height = self._size_px
        last_image: ImageBGR = np.zeros((height, width, 3), np.uint8)
        last_planes: ImageI420 | None = None
        t_last_send = time.perf_counter()
        pacer = Pacer(period, t_last_send)
        last_was_new = True
        inbox_open = True
        while not self._done():
            if not inbox_open and not self._held:
                return  # the input ended (a file without advanced.capture.loop): so does the output
            repeat_at = t_last_send + (1.5 if last_was_new else 1.0) * period
            wake_at = repeat_at
            if self._held:
                wake_at = min(wake_at, (self._held[0].frame.t_capture_ns + self._delay_ns) / 1e9)
            timeout = min(max(0.0, wake_at - time.perf_counter()), 0.1)
            if inbox_open:
                inbox_open = self._take(timeout)
            elif timeout > 0:
                self._stop.wait(timeout)
            now = time.perf_counter()
            packet = self._newest_due(int(now * 1e9))
            if packet is None and now < repeat_at:
                continue  # nothing due yet, and not yet time to repeat
            if packet is None and self.sent == 0 and self._input_waiting is not None \
                    and not self._input_waiting():
                t_last_send = now  # the input is open: its first frame comes first
                continue
            wait = pacer.wait_s(now) if packet is not None else 0.0
            if wait > 0.0:
                self._stop.wait(wait)
                if inbox_open:
                    inbox_open = self._take(0)
                newer = self._newest_due(time.perf_counter_ns())
                if newer is not None:  # newest wins
                    self.dropped += 1
                    packet = newer
            if packet is not None:
                last_image = self._fit(packet.image_bgr)
                last_planes = self._planes(packet, last_image)
            self._send(packet, last_image, last_planes)
            t_last_send = time.perf_counter()
            pacer.sent(t_last_send, new=packet is not None)
            last_was_new = packet is not None
