"""Per-session figures of ``livecam serve`` for ``/metrics`` (labelled with the session's
``user``, and its ``stream`` where several streams run): frames in from the camera and out to
the client with their rates, and what the peer connection's RTP statistics say (packets
received and lost, jitter, round-trip time), polled once a second on the server's event loop
and read at scrape time from any thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_POLL_S = 1.0


class SessionStats:
    """Counters of one session. ``frame_in``: the event loop; reads: any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.frames_in = 0
        self._t_in: deque[int] = deque(maxlen=512)
        self.packets_received = 0
        self.packets_lost = 0
        self.jitter_ms = 0.0
        self.rtt_ms = float("nan")

    def frame_in(self) -> None:
        now = time.monotonic_ns()
        with self._lock:
            self.frames_in += 1
            self._t_in.append(now)

    def fps_in(self) -> float:
        """Camera frames received in the last second."""
        now = time.monotonic_ns()
        with self._lock:
            return float(sum(1 for t in self._t_in if now - t <= 1_000_000_000))

    async def poll(self, pc: Any) -> None:
        """Read ``pc``'s inbound RTP statistics every second until cancelled."""
        while True:
            with contextlib.suppress(Exception):  # a closing connection has no stats
                report = await pc.getStats()
                for stat in report.values():
                    if getattr(stat, "type", "") == "inbound-rtp" and stat.kind == "video":
                        with self._lock:
                            self.packets_received = int(stat.packetsReceived or 0)
                            self.packets_lost = max(0, int(stat.packetsLost or 0))
                            self.jitter_ms = float(stat.jitter or 0.0) * 1000.0
                    elif (getattr(stat, "type", "") == "remote-inbound-rtp"
                          and stat.kind == "video" and stat.roundTripTime is not None):
                        with self._lock:  # from the client's receiver reports
                            self.rtt_ms = float(stat.roundTripTime) * 1000.0
            await asyncio.sleep(_POLL_S)

    def collector(self, session: Any) -> Collector:
        """A Prometheus collector of this session (``session.sink`` counts frames out)."""
        return _SessionCollector(self, session)


class _SessionCollector(Collector):
    def __init__(self, stats: SessionStats, session: Any) -> None:
        self._stats = stats
        self._session = session
        self._sent: deque[tuple[int, int]] = deque(maxlen=64)

    def _fps_out(self) -> float:
        now = time.monotonic_ns()
        self._sent.append((now, self._session.sink.sent))
        while len(self._sent) > 2 and now - self._sent[1][0] >= 1_000_000_000:
            self._sent.popleft()
        t0, n0 = self._sent[0]
        return 0.0 if now == t0 else (self._session.sink.sent - n0) / ((now - t0) / 1e9)

    def collect(self) -> Iterator[Metric]:
        s = self._stats
        user = self._session.user
        yield _labelled(CounterMetricFamily, "livecam_session_frames_in",
                        "Camera frames received from the session's client.", user, s.frames_in)
        yield _labelled(CounterMetricFamily, "livecam_session_frames_out",
                        "Frames sent back to the session's client (repeats of the last one "
                        "included, at most 4 a second).", user, self._session.sink.sent)
        yield _labelled(CounterMetricFamily, "livecam_session_frames_dropped",
                        "Frames to send back that a newer one replaced before the encoder "
                        "took them (the session's sender was behind).", user,
                        self._session.sink.dropped)
        yield _labelled(CounterMetricFamily, "livecam_session_repeats_skipped",
                        "Repeats of the last frame not sent back (nothing new to encode).",
                        user, self._session.sink.repeats_skipped)
        yield _labelled(GaugeMetricFamily, "livecam_session_fps_in",
                        "Camera frames received in the last second.", user, s.fps_in())
        yield _labelled(GaugeMetricFamily, "livecam_session_fps_out",
                        "Frames sent back per second since the previous scrape.", user,
                        self._fps_out())
        yield _labelled(CounterMetricFamily, "livecam_session_packets_received",
                        "RTP video packets received (the peer connection's statistics).",
                        user, s.packets_received)
        yield _labelled(CounterMetricFamily, "livecam_session_packets_lost",
                        "RTP video packets lost on the way in.", user, s.packets_lost)
        yield _labelled(GaugeMetricFamily, "livecam_session_jitter_ms",
                        "Interarrival jitter of the incoming video, ms.", user, s.jitter_ms)
        yield _labelled(GaugeMetricFamily, "livecam_session_rtt_ms",
                        "Round-trip time to the client (RTCP), ms; NaN until known.", user,
                        s.rtt_ms)


def _labelled(kind: Any, name: str, doc: str, user: str, value: float) -> Metric:
    family = kind(name, doc, labels=["user"])
    family.add_metric([user], value)
    return family
