"""What the control API reports: the status document and the Prometheus state metrics.

:class:`StatusReporter` reads a :class:`ControlTarget` (the running app) and never calls
``Metrics.snapshot()``, whose fps are "since the previous call": the status line logger owns
those, and two readers would halve each other's rates. It keeps its own short history of
counters instead. The document is for people (panel, ``livecam ctl status``): recent fps and
percentiles. ``/metrics`` serves counters and histograms instead (``Metrics.registry``) plus
the runtime state through :class:`StateCollector`; Prometheus derives rates and quantiles.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from livecam.control.live import LiveView
from livecam.core.commands import CommandQueue
from livecam.core.metrics import Metrics
from livecam.core.overload import OverloadMonitor
from livecam.core.types import RuntimeState

#: fps are averaged over at least this long (shorter right after start).
_RATE_WINDOW_NS = 1_000_000_000


class ControlTarget(Protocol):
    """The running app as the control sources see it (implemented by ``livecam.app.App``).

    Every member may be used from any thread.
    """

    commands: CommandQueue
    metrics: Metrics
    live: LiveView
    overload: OverloadMonitor

    @property
    def state(self) -> RuntimeState: ...

    @property
    def done(self) -> bool:
        """The run has ended (quit, input ended, stopped); it takes no more commands."""
        ...

    def describe(self) -> dict[str, Any]:
        """Facts of the run: ``backend``, ``stages``, ``input``, ``output``, ``width``,
        ``height``, ``fps``, ``delay_ms`` (the A/V delay in force), ``stream`` (its index
        among the streams of the process), ``in_flight`` (frames in the GPU ring)."""
        ...


def _finite(value: float) -> float | None:
    return None if math.isnan(value) or math.isinf(value) else round(value, 3)


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


class StatusReporter:
    """Builds status documents for ``target``; any thread may call, calls are serialised."""

    def __init__(self, target: ControlTarget, extra: dict[str, Any] | None = None) -> None:
        self._target = target
        self._extra = dict(extra or {})
        self._lock = threading.Lock()
        self._t_start_ns = time.perf_counter_ns()
        # (t_ns, captured, sent, processed, host CPU ns); the first sample is taken now, so
        # rates right after start are averaged over the reporter's whole life instead of over
        # two close requests
        self._history: deque[tuple[int, int, int, int, int]] = deque([self._sample()])
        self._cpu = (float("nan"), float("nan"))  # ms per frame, % of one core

    def _sample(self) -> tuple[int, int, int, int, int]:
        m = self._target.metrics
        return (time.perf_counter_ns(), m.counter("captured"), m.counter("sent"),
                m.counter("processed"), m.cpu_ns())

    def _rates(self) -> tuple[float, float]:
        """fps in and out over the last window; also sets the host CPU's (``_cpu``)."""
        now = self._sample()
        with self._lock:
            self._history.append(now)
            # the reference is the newest sample at least a window old (or the oldest one)
            while len(self._history) > 2 and now[0] - self._history[1][0] >= _RATE_WINDOW_NS:
                self._history.popleft()
            t0, captured0, sent0, processed0, cpu0 = self._history[0]
        dt_ns = max(now[0] - t0, 1)
        frames = now[3] - processed0
        self._cpu = ((now[4] - cpu0) / 1e6 / frames if frames > 0 else float("nan"),
                     100.0 * (now[4] - cpu0) / dt_ns)
        return (now[1] - captured0) / (dt_ns / 1e9), (now[2] - sent0) / (dt_ns / 1e9)

    def status(self) -> dict[str, Any]:
        """The status document served at ``/api/status`` and pushed on ``/api/events``."""
        target = self._target
        state = target.state
        m = target.metrics
        # a stream that has ended sends nothing: its rate is 0, not the last second's fading
        fps_in, fps_out = (0.0, 0.0) if target.done else self._rates()
        latency = m.latencies_ms()
        _, pipeline_latency = m.pipeline_latencies_ms()
        last = target.live.last()
        assigned = dict(state.track_identities)
        tracks = [] if last is None else [
            {"track_id": tid, "identity": state.identity_for_track(tid),
             "assigned": tid in assigned}
            for tid in last.track_ids
        ]
        counters = {name: m.counter(name) for name in (
            "captured", "processed", "sent", "repeated", "dropped_capture", "dropped_pipeline",
            "dropped_output", "stage_errors", "capture_lost")}
        overload = target.overload.state
        now_ns = time.perf_counter_ns()
        doc: dict[str, Any] = {
            "uptime_s": round((now_ns - self._t_start_ns) / 1e9, 3),
            "fps_in": round(fps_in, 2),
            "fps_out": round(fps_out, 2),
            "latency_ms": {"p50": _finite(_percentile(latency, 50)),
                           "p99": _finite(_percentile(latency, 99))},
            "pipeline_latency_ms": {"p50": _finite(_percentile(pipeline_latency, 50)),
                                    "p99": _finite(_percentile(pipeline_latency, 99))},
            "longest_gap_ms": _finite(m.longest_gap_ms(now_ns)),
            # the stream's own threads' CPU time (capture, pipeline, workers, output) over
            # the last window: per frame processed, and as a share of one core
            "host_cpu": {"ms_per_frame": _finite(self._cpu[0]),
                         "percent_of_core": _finite(self._cpu[1])},
            "frames": counters,
            "stage_ms": {name: _finite(_percentile(times, 50))
                         for name, times in m.stage_times_ms().items()},
            "overload": {
                "active": overload.active, "reason": overload.reason,
                "since_s": (None if overload.since_ns is None
                            else round((now_ns - overload.since_ns) / 1e9, 3)),
                "total_s": round(overload.total_s, 3),
                "drop_share": _finite(overload.drop_share),
                "latency_p50_ms": _finite(overload.latency_p50_ms),
            },
            "stopped": target.done,
            "active_identity": state.active_identity,
            "bypass": state.bypass,
            # said in the status, not only at start: a forgotten --identity with an empty
            # library sends the real face, and a panel or `ctl status` must show why
            "passthrough_reason": (
                "no identity chosen: frames pass through unswapped (add one with `livecam "
                "identity add NAME PHOTO`, then pick it)"
                if state.active_identity is None and not state.track_identities
                and not state.bypass else None),
            "identities": list(state.identities),
            "tracks": tracks,
            "assignments": [{"track_id": tid, "identity": name}
                            for tid, name in state.track_identities],
            "generation": state.generation,
        }
        doc.update(target.describe())
        doc.update(self._extra)
        return doc


class StateCollector(Collector):
    """The runtime state as Prometheus metrics, read from ``target`` at scrape time (register
    it in ``target.metrics.registry``)."""

    def __init__(self, target: ControlTarget) -> None:
        self._target = target

    def collect(self) -> Iterator[Metric]:
        target = self._target
        state = target.state
        facts = target.describe()
        overload = target.overload.state
        last = target.live.last()
        yield GaugeMetricFamily("livecam_bypass", "1 while the real face is sent through.",
                                value=1.0 if state.bypass else 0.0)
        yield GaugeMetricFamily("livecam_identities", "Identities in the library.",
                                value=len(state.identities))
        yield GaugeMetricFamily("livecam_tracks", "Tracked faces in the last frame sent.",
                                value=0 if last is None else len(last.track_ids))
        active = GaugeMetricFamily("livecam_active_identity", "1 for the identity being "
                                   "swapped in (absent when none).", labels=["name"])
        if state.active_identity:
            active.add_metric([state.active_identity], 1.0)
        yield active
        yield CounterMetricFamily("livecam_state_changes", "Runtime state changes (commands "
                                  "that changed something).", value=state.generation)
        yield GaugeMetricFamily("livecam_overloaded", "1 while the pipeline falls behind the "
                                "camera (see the status document's overload.reason).",
                                value=1.0 if overload.active else 0.0)
        yield CounterMetricFamily("livecam_overloaded_seconds", "Time spent overloaded.",
                                  value=overload.total_s)
        yield GaugeMetricFamily("livecam_output_delay_seconds", "The A/V delay in force.",
                                value=float(facts.get("delay_ms", 0.0)) / 1e3)
        info = InfoMetricFamily("livecam_run", "What this run does.")
        info.add_metric([], {key: str(facts.get(key, "")) for key in
                             ("backend", "input", "output", "width", "height", "fps")})
        yield info
        yield from _remote_engine_metrics(facts.get("remote_engines") or {})


def _remote_engine_metrics(remote: dict[str, Any]) -> Iterator[Metric]:
    """The link state of remote engines (Triton), one sample per stage and server address."""
    if not remote:
        return
    labels = ["stage", "url"]
    up = GaugeMetricFamily("livecam_remote_engine_up", "1 while the remote engine (Triton) "
                           "answers; 0 while faces are covered and it reconnects.", labels=labels)
    counters = {key: CounterMetricFamily(f"livecam_remote_engine_{key}", text, labels=labels)
                for key, text in (("requests", "Requests sent to the remote engine."),
                                  ("failures", "Requests that failed or missed their deadline."),
                                  ("reconnects", "Times the remote engine came back."))}
    request = GaugeMetricFamily("livecam_remote_engine_request_seconds", "Round trip of one "
                                "request, recent requests.", labels=[*labels, "quantile"])
    in_flight = GaugeMetricFamily("livecam_remote_engine_in_flight", "Requests sent to the "
                                  "remote engine and not answered yet "
                                  "(advanced.engine.triton_in_flight frames' worth at most).",
                                  labels=labels)
    for stage, health in remote.items():
        values = [stage, str(health.get("url", ""))]
        up.add_metric(values, 1.0 if health.get("state") == "ready" else 0.0)
        in_flight.add_metric(values, float(health.get("in_flight", 0)))
        for key, family in counters.items():
            family.add_metric(values, float(health.get(key, 0)))
        for quantile, key in (("0.5", "p50"), ("0.99", "p99")):
            ms = health.get("request_ms", {}).get(key)
            if ms is not None:
                request.add_metric([*values, quantile], ms / 1e3)
    yield up
    yield in_flight
    yield from counters.values()
    yield request
