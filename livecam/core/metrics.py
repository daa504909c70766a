"""Run metrics: counters, capture→sink latency and per-stage timings, safe across threads.

Times are taken with ``time.perf_counter_ns()``. Latency and stage timings keep the last
``window`` samples, so percentiles describe recent behaviour, not the whole run.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np


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

    def status_line(self) -> str:
        stages = " ".join(f"{k}={v:.1f}ms" for k, v in self.stage_p50_ms.items())
        c = self.counters
        return (
            f"fps in {self.fps_in:5.1f} out {self.fps_out:5.1f} | latency p50 "
            f"{self.latency_p50_ms:5.1f} ms p99 {self.latency_p99_ms:5.1f} ms | dropped "
            f"{c.get('dropped_capture', 0)}+{c.get('dropped_output', 0)} repeated "
            f"{c.get('repeated', 0)}" + (f" | {stages}" if stages else "")
        )


def _percentile(values: deque[float], q: float) -> float:
    if not values:
        return float("nan")
    return float(np.percentile(np.fromiter(values, dtype=np.float64), q))


class Metrics:
    """Shared by all threads of one run; every method takes a short lock."""

    def __init__(self, window: int = 1000) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._latency_ms: deque[float] = deque(maxlen=window)
        self._stage_ms: dict[str, deque[float]] = {}
        self._window = window
        self._last = (time.perf_counter_ns(), 0, 0)  # t, captured, sent

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + n

    def set_counter(self, name: str, value: int) -> None:
        with self._lock:
            self._counters[name] = value

    def record_latency_ns(self, latency_ns: int) -> None:
        with self._lock:
            self._latency_ms.append(latency_ns / 1e6)

    def record_stage_ns(self, stage: str, elapsed_ns: int) -> None:
        with self._lock:
            ring = self._stage_ms.get(stage)
            if ring is None:
                ring = self._stage_ms[stage] = deque(maxlen=self._window)
            ring.append(elapsed_ns / 1e6)

    def counter(self, name: str) -> int:
        with self._lock:
            return self._counters.get(name, 0)

    def latencies_ms(self) -> list[float]:
        with self._lock:
            return list(self._latency_ms)

    def stage_times_ms(self) -> dict[str, list[float]]:
        with self._lock:
            return {k: list(v) for k, v in self._stage_ms.items()}

    def snapshot(self) -> Snapshot:
        """Current values; fps are measured since the previous call."""
        now = time.perf_counter_ns()
        with self._lock:
            counters = dict(self._counters)
            t0, captured0, sent0 = self._last
            captured, sent = counters.get("captured", 0), counters.get("sent", 0)
            self._last = (now, captured, sent)
            dt_s = max((now - t0) / 1e9, 1e-9)
            return Snapshot(
                t_ns=now,
                counters=counters,
                fps_in=(captured - captured0) / dt_s,
                fps_out=(sent - sent0) / dt_s,
                latency_p50_ms=_percentile(self._latency_ms, 50),
                latency_p99_ms=_percentile(self._latency_ms, 99),
                stage_p50_ms={k: _percentile(v, 50) for k, v in self._stage_ms.items()},
            )
