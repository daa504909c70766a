"""Run metrics: counters, latencies, stage times and output intervals, safe across threads.

Two views of the same measurements:

- Prometheus (``registry``, served at ``/metrics``): monotonic counters and histograms over the
  whole run, from which a scraper derives rates and quantiles itself.
- Recent windows for people (the status line, ``/api/status``, the panel): the last ``window``
  latencies and stage times, and the output intervals of the last 10 s.

Times are taken with ``time.perf_counter_ns()``. Host CPU: every call that a stream's threads
make per frame (``count``, ``record_stage_ns``, ``record_send``) also adds the CPU time the
calling thread used since its previous such call (``time.thread_time_ns``), so the run's
CPU time is that of its own threads (capture, pipeline, stage workers, the GPU collector,
output), whatever else the process runs; per frame it is that over the frames processed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

#: Capture→sink latency buckets, s: frame-interval steps up to a few frames, then coarse.
LATENCY_BUCKETS_S = (0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
                     0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0)
#: Per-stage time buckets, s: most stages take 0.1-30 ms.
STAGE_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
                   0.075, 0.1, 0.25, 0.5, 1.0)
#: Interval between two sends, s. Includes 1.5 frame intervals at 60, 30 and 25 fps
#: (0.025, 0.05, 0.06): the output repeats a frame at 1.5 intervals, so a longer gap means the
#: output thread itself was held up.
OUTPUT_INTERVAL_BUCKETS_S = (0.005, 0.01, 0.0167, 0.02, 0.025, 0.0334, 0.04, 0.05, 0.06,
                             0.0667, 0.08, 0.1, 0.15, 0.25, 0.5, 1.0, 2.0, 5.0)

#: Frame counters exposed as ``livecam_frames_total{kind=...}``; other counters (stage_errors,
#: capture_lost, ...) become ``livecam_<name>_total``.
FRAME_COUNTERS = ("captured", "processed", "sent", "repeated", "dropped_capture",
                  "dropped_pipeline", "dropped_output")
_COUNTER_HELP = {
    "stage_errors": "Frames on which a stage raised (sent unswapped).",
    "capture_lost": "Times the capture device was lost (reopened with backoff).",
}
_GAP_WINDOW_NS = 10_000_000_000


@dataclass(frozen=True)
class Snapshot:
    """Metrics at one moment. Rates are over the time since the previous snapshot."""

    t_ns: int
    counters: dict[str, int]
    fps_in: float
    fps_out: float
    latency_p50_ms: float
    latency_p99_ms: float
    stage_p50_ms: dict[str, float] = field(default_factory=dict)
    #: host CPU time of the run's own threads per frame processed, ms (NaN: none processed)
    cpu_ms_per_frame: float = float("nan")

    def status_line(self) -> str:
        stages = " ".join(f"{k}={v:.1f}ms" for k, v in self.stage_p50_ms.items())
        c = self.counters
        dropped = sum(c.get(k, 0) for k in ("dropped_capture", "dropped_pipeline",
                                             "dropped_output"))
        return (
            f"fps in {self.fps_in:5.1f} out {self.fps_out:5.1f} | latency p50 "
            f"{self.latency_p50_ms:5.1f} ms p99 {self.latency_p99_ms:5.1f} ms | dropped "
            f"{dropped} repeated {c.get('repeated', 0)}"
            + ("" if self.cpu_ms_per_frame != self.cpu_ms_per_frame
               else f" | cpu {self.cpu_ms_per_frame:.1f} ms/frame")
            + (f" | {stages}" if stages else "")
        )


def _percentile(values: deque[float], q: float) -> float:
    if not values:
        return float("nan")
    return float(np.percentile(np.fromiter(values, dtype=np.float64), q))


class _Counters(Collector):
    """Exposes :class:`Metrics` counters (a plain dict, also set from mailbox drop counts) as
    Prometheus counters at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[CounterMetricFamily]:
        counters = self._metrics.counters()
        frames = CounterMetricFamily("livecam_frames", "Frames by what happened to them: "
                                     "captured, processed by the stages, sent (repeats "
                                     "included), repeated, dropped at each hop.",
                                     labels=["kind"])
        for kind in FRAME_COUNTERS:
            frames.add_metric([kind], counters.get(kind, 0))
        yield frames
        for name in sorted(set(counters) - set(FRAME_COUNTERS)):
            yield CounterMetricFamily(f"livecam_{name}", _COUNTER_HELP.get(name, name),
                                      value=counters[name])
        yield CounterMetricFamily(
            "livecam_host_cpu_seconds", "Host CPU time of this stream's own threads (capture, "
            "pipeline, stage workers, GPU collector, output); over livecam_frames_total"
            "{kind=\"processed\"}: CPU per frame.", value=self._metrics.cpu_ns() / 1e9)


class Metrics:
    """Shared by all threads of one run; every method takes a short lock.

    ``registry`` holds this run's Prometheus collectors (one registry per run, so two apps in
    one process, as in tests, never share or clash).
    """

    def __init__(self, window: int = 1000) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._latency_ms: deque[float] = deque(maxlen=window)
        self._pipeline_latency_ms: deque[float] = deque(maxlen=window)
        self._pipeline_latency_total = 0
        self._latency_count = 0
        self._latency_sum_ms = 0.0
        self._stage_ms: dict[str, deque[float]] = {}
        # (t_send_ns, interval_ns) of recent sends, for the longest gap of the last 10 s
        self._intervals: deque[tuple[int, int]] = deque(maxlen=4096)
        self._t_last_send_ns: int | None = None
        self._window = window
        self._last = (time.perf_counter_ns(), 0, 0, 0, 0)  # t, captured, sent, processed, cpu
        self._cpu_ns = 0
        self._cpu_last: dict[int, int] = {}  # thread ident -> its CPU time at its last call
        self.registry = CollectorRegistry()
        self._latency_hist = Histogram(
            "livecam_latency_seconds", "Capture to sink time of each new frame sent (includes "
            "output.delay_ms).", buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self._pipeline_hist = Histogram(
            "livecam_pipeline_latency_seconds", "Capture to output-thread time of each "
            "processed frame (stages and hops; before the A/V delay and pacing).",
            buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self._stage_hist = Histogram(
            "livecam_stage_seconds", "Time of each stage per frame.", ["stage"],
            buckets=STAGE_BUCKETS_S, registry=self.registry)
        self._interval_hist = Histogram(
            "livecam_output_interval_seconds", "Time between two consecutive sends to the "
            "sink (repeats included).", buckets=OUTPUT_INTERVAL_BUCKETS_S,
            registry=self.registry)
        self.registry.register(_Counters(self))

    def _note_cpu(self) -> None:
        """Add the calling thread's CPU time since its previous call (lock held)."""
        now = time.thread_time_ns()
        ident = threading.get_ident()
        last = self._cpu_last.get(ident)
        self._cpu_last[ident] = now
        if last is not None and now >= last:  # an ident reused by a new thread: skip once
            self._cpu_ns += now - last

    def cpu_ns(self) -> int:
        """Host CPU time of the run's threads so far (see the module docstring), ns."""
        with self._lock:
            return self._cpu_ns

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._note_cpu()
            self._counters[name] = self._counters.get(name, 0) + n

    def set_counter(self, name: str, value: int) -> None:
        """Set a counter kept elsewhere (a mailbox's drop count); must never decrease."""
        with self._lock:
            self._counters[name] = value

    def record_latency_ns(self, latency_ns: int) -> None:
        """Capture→sink time of a new frame just sent (output thread)."""
        with self._lock:
            self._latency_ms.append(latency_ns / 1e6)
            self._latency_count += 1
            self._latency_sum_ms += latency_ns / 1e6
        self._latency_hist.observe(latency_ns / 1e9)

    def record_pipeline_latency_ns(self, latency_ns: int) -> None:
        """Capture→output-thread time of a processed frame (output thread, on arrival)."""
        with self._lock:
            self._pipeline_latency_ms.append(latency_ns / 1e6)
            self._pipeline_latency_total += 1
        self._pipeline_hist.observe(latency_ns / 1e9)

    def record_stage_ns(self, stage: str, elapsed_ns: int) -> None:
        with self._lock:
            self._note_cpu()
            ring = self._stage_ms.get(stage)
            if ring is None:
                ring = self._stage_ms[stage] = deque(maxlen=self._window)
            ring.append(elapsed_ns / 1e6)
        self._stage_hist.labels(stage).observe(elapsed_ns / 1e9)

    def record_send(self, t_ns: int) -> None:
        """A frame (new or repeated) went to the sink at ``t_ns`` (output thread)."""
        with self._lock:
            self._note_cpu()
            last, self._t_last_send_ns = self._t_last_send_ns, t_ns
            if last is None:
                return
            self._intervals.append((t_ns, t_ns - last))
        self._interval_hist.observe((t_ns - last) / 1e9)

    def counter(self, name: str) -> int:
        with self._lock:
            return self._counters.get(name, 0)

    def counters(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counters)

    def latencies_ms(self) -> list[float]:
        """Capture→sink times of the last ``window`` new frames sent, oldest first."""
        with self._lock:
            return list(self._latency_ms)

    def pipeline_latencies_ms(self) -> tuple[int, list[float]]:
        """(how many were ever recorded, the capture→output-thread times of the last
        ``window`` processed frames, oldest first): the count finds those since a past call."""
        with self._lock:
            return self._pipeline_latency_total, list(self._pipeline_latency_ms)

    def stage_times_ms(self) -> dict[str, list[float]]:
        with self._lock:
            return {k: list(v) for k, v in self._stage_ms.items()}

    def longest_gap_ms(self, now_ns: int | None = None) -> float:
        """The longest interval between two sends in the last 10 s (NaN before two sends).
        A gap still open (nothing sent since) counts up to ``now_ns``."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        with self._lock:
            longest = max((gap for t, gap in self._intervals if now - t <= _GAP_WINDOW_NS),
                          default=-1)
            if self._t_last_send_ns is not None:
                longest = max(longest, now - self._t_last_send_ns)
        return float("nan") if longest < 0 else longest / 1e6

    def latency_mean_ms(self) -> float:
        """Mean capture→sink time over the whole run (NaN before the first frame)."""
        with self._lock:
            count, total_ms = self._latency_count, self._latency_sum_ms
        return total_ms / count if count else float("nan")

    def snapshot(self) -> Snapshot:
        """Current values; fps and CPU per frame are measured since the previous call."""
        now = time.perf_counter_ns()
        with self._lock:
            counters = dict(self._counters)
            t0, captured0, sent0, processed0, cpu0 = self._last
            captured, sent = counters.get("captured", 0), counters.get("sent", 0)
            processed = counters.get("processed", 0)
            self._last = (now, captured, sent, processed, self._cpu_ns)
            dt_s = max((now - t0) / 1e9, 1e-9)
            frames = processed - processed0
            return Snapshot(
                t_ns=now,
                counters=counters,
                fps_in=(captured - captured0) / dt_s,
                fps_out=(sent - sent0) / dt_s,
                latency_p50_ms=_percentile(self._latency_ms, 50),
                latency_p99_ms=_percentile(self._latency_ms, 99),
                stage_p50_ms={k: _percentile(v, 50) for k, v in self._stage_ms.items()},
                cpu_ms_per_frame=((self._cpu_ns - cpu0) / 1e6 / frames if frames > 0
                                  else float("nan")),
            )
