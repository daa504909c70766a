"""Overload: the pipeline falls behind the camera, and says so.

Live mode never queues frames: when the stages are slower than the camera, frames are dropped
(the newest always wins) and latency stays bounded. That keeps the stream live but silently
lowers its frame rate, so :class:`OverloadMonitor` watches the last second and raises a warning
that the log, the status line, ``/api/status``, ``/metrics`` and the panel all show:

- more than ``drop_share_limit`` of the frames captured in the last second never finished the
  stages (dropped at a hop), or
- the median capture→output time of the frames processed in the last second is over
  ``latency_budget_ms`` (the A/V delay is not counted: it is wanted latency).

It clears once neither holds for ``clear_after_s``, so a borderline load does not flap.
Stages that want to degrade on their own (e.g. detect less often) may read
:attr:`OverloadMonitor.active` from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

_WINDOW_NS = 1_000_000_000


@dataclass(frozen=True)
class Overload:
    """One verdict. ``drop_share`` (0-1) and ``latency_p50_ms`` are over the last second
    (NaN when nothing was captured or processed in it); ``since_ns`` is when the current
    overload began (None when not overloaded); ``total_s`` sums every overloaded stretch."""

    active: bool = False
    reason: str = ""
    drop_share: float = float("nan")
    latency_p50_ms: float = float("nan")
    since_ns: int | None = None
    total_s: float = 0.0


class OverloadMonitor:
    """Fed by one thread (``update``, a few times a second); read by any (``state``,
    ``active``, ``wait_active``)."""

    def __init__(self, *, latency_budget_ms: float, drop_share_limit: float,
                 clear_after_s: float = 2.0, stream: int | None = None,
                 file_input: bool = False) -> None:
        """``stream``: the stream's index where a process runs several (the warning names
        it); ``file_input``: the input is a file, which can also be processed offline (the
        warning says how)."""
        self._stream = stream
        self._file_input = file_input
        self._budget_ms = latency_budget_ms
        self._drop_limit = drop_share_limit
        self._clear_after_ns = int(clear_after_s * 1e9)
        # (t_ns, captured, processed, latencies recorded so far)
        self._samples: deque[tuple[int, int, int, int]] = deque()
        self._last_bad_ns = 0
        self._t_prev_ns: int | None = None
        self._total_ns = 0
        self._state = Overload()
        self._changed = threading.Condition()

    @property
    def state(self) -> Overload:
        with self._changed:
            return self._state

    @property
    def active(self) -> bool:
        return self.state.active

    def overloaded_s(self, now_ns: int) -> float:
        """Seconds spent overloaded so far, the stretch still going on up to ``now_ns``
        included."""
        with self._changed:
            ongoing = (now_ns - self._t_prev_ns
                       if self._state.active and self._t_prev_ns is not None else 0)
            return (self._total_ns + max(0, ongoing)) / 1e9

    def wait_active(self, timeout_s: float) -> bool:
        """Block until an overload is reported (True) or ``timeout_s`` passed (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._state.active, timeout_s)

    def update(self, *, now_ns: int, captured: int, processed: int,
               latencies_ms: list[float], latency_total: int) -> Overload:
        """Judge the last second. ``captured``/``processed`` are the run's counters so far,
        ``latencies_ms`` the recent capture→output times (newest last) of which
        ``latency_total`` were ever recorded."""
        self._samples.append((now_ns, captured, processed, latency_total))
        while len(self._samples) > 2 and now_ns - self._samples[1][0] >= _WINDOW_NS:
            self._samples.popleft()
        t0, captured0, processed0, total0 = self._samples[0]
        new_latencies = latencies_ms[len(latencies_ms) - min(latency_total - total0,
                                                             len(latencies_ms)):]
        d_captured = captured - captured0
        drop_share = (max(0, d_captured - (processed - processed0)) / d_captured
                      if d_captured > 0 else float("nan"))
        latency = float(np.median(new_latencies)) if new_latencies else float("nan")
        reasons = []
        full_window = now_ns - t0 >= _WINDOW_NS * 0.9  # no verdict on a partial first second
        if full_window and drop_share > self._drop_limit:
            reasons.append(f"{drop_share:.0%} of frames dropped in the last second (limit "
                           f"{self._drop_limit:.0%})")
        if full_window and latency > self._budget_ms:
            reasons.append(f"latency {latency:.0f} ms (budget {self._budget_ms:.0f} ms)")
        return self._judge(now_ns, reasons, drop_share, latency)

    def _judge(self, now_ns: int, reasons: list[str], drop_share: float,
               latency: float) -> Overload:
        with self._changed:
            old = self._state
            if old.active and self._t_prev_ns is not None:
                self._total_ns += now_ns - self._t_prev_ns
            self._t_prev_ns = now_ns
            if reasons:
                self._last_bad_ns = now_ns
            active = bool(reasons) or (old.active
                                       and now_ns - self._last_bad_ns < self._clear_after_ns)
            since = (old.since_ns if old.active else now_ns) if active else None
            reason = "; ".join(reasons) if reasons else (old.reason if active else "")
            self._state = Overload(active=active, reason=reason, drop_share=drop_share,
                                   latency_p50_ms=latency, since_ns=since,
                                   total_s=self._total_ns / 1e9)
            self._changed.notify_all()
            new = self._state
        if new.active and not old.active:
            where = "" if self._stream is None else f"stream {self._stream}: "
            offline = ("; or, for a file input, --set advanced.pipeline.realtime=false to "
                       "process every frame offline" if self._file_input else "")
            log.warning("%spipeline overloaded: %s. Frames are being dropped (the newest always "
                        "wins) so the stream stays live at a lower frame rate; lower "
                        "capture.width/height, analysis.max_faces, or use a GPU%s", where,
                        new.reason, offline)
        elif old.active and not new.active:
            log.info("pipeline keeps up again (overloaded for %.1f s)",
                     (now_ns - (old.since_ns or now_ns)) / 1e9)
        return new
