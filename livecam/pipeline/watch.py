"""The status thread of a run: drop counters, the overload judgement and the status line.

Every ``_WATCH_TICK_S`` it copies the mailboxes' drop counts into the metrics and (live mode)
judges overload; every ``advanced.pipeline.status_interval_s`` it logs the status line, at once when
an overload begins, at WARNING while it lasts.
"""

from __future__ import annotations

import logging
import threading
import time

from livecam.core.mailbox import Mailbox
from livecam.core.metrics import Metrics
from livecam.core.overload import OverloadMonitor
from livecam.core.types import Frame, Packet
from livecam.output.thread import OutputThread
from livecam.pipeline.scheduler import Scheduler

log = logging.getLogger(__name__)

#: How often the watcher updates drop counters and judges overload, s (a warning shows within
#: the 1 s judging window plus one tick).
_WATCH_TICK_S = 0.25


class StatusWatcher:
    """Watches one started run until ``done`` is set (see the module docstring).

    ``frames``/``packets`` are the mailboxes into the pipeline and into the output;
    ``realtime`` is the run's mode (overload is judged only live); ``status_interval_s`` 0
    logs no status line; ``stream`` prefixes the line with the stream's index (None: the only
    stream). ``start``: the thread that starts the run; ``update_drop_counters``: any thread.
    """

    def __init__(self, *, metrics: Metrics, overload: OverloadMonitor,
                 frames: Mailbox[Frame], packets: Mailbox[Packet], scheduler: Scheduler,
                 output: OutputThread, done: threading.Event, realtime: bool,
                 status_interval_s: float, stream: int | None) -> None:
        self._metrics = metrics
        self._overload = overload
        self._frames, self._packets = frames, packets
        self._scheduler = scheduler
        self._output = output
        self._done = done
        self._realtime = realtime
        self._interval_ns = int(status_interval_s * 1e9)
        self._stream = stream
        self._thread = threading.Thread(target=self._watch, name="livecam-status", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def update_drop_counters(self) -> None:
        self._metrics.set_counter("dropped_capture", self._frames.dropped)
        self._metrics.set_counter("dropped_output", self._packets.dropped + self._output.dropped)
        self._metrics.set_counter("dropped_pipeline", self._scheduler.dropped)

    def _watch(self) -> None:
        next_line_ns = time.perf_counter_ns() + self._interval_ns
        self._metrics.snapshot()
        while not self._done.wait(_WATCH_TICK_S):
            self.update_drop_counters()
            now_ns = time.perf_counter_ns()
            began = False
            if self._realtime:
                was_active = self._overload.active
                total, latencies = self._metrics.pipeline_latencies_ms()
                self._overload.update(now_ns=now_ns, captured=self._metrics.counter("captured"),
                                      processed=self._metrics.counter("processed"),
                                      latencies_ms=latencies, latency_total=total)
                began = self._overload.active and not was_active
            # an overload shows in the status line at once, not at the next regular one
            if self._interval_ns and (now_ns >= next_line_ns or began):
                next_line_ns = now_ns + self._interval_ns
                self._log_status_line()

    def _log_status_line(self) -> None:
        line = self._metrics.snapshot().status_line()
        if self._stream is not None:
            line = f"stream {self._stream}: {line}"
        delay_ms = self._output.delay_ms
        if delay_ms:
            line += f" | delay {delay_ms:.0f} ms"
        overload = self._overload.state
        if overload.active:
            log.warning("%s | OVERLOADED: %s", line, overload.reason)
        else:
            log.info("%s", line)
