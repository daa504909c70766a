"""What the control API reports: the status document and the Prometheus text exposition.

:class:`StatusReporter` reads a :class:`ControlTarget` (the running app) and never calls
``Metrics.snapshot()``, whose fps are "since the previous call": the status line logger owns
those, and two readers would halve each other's rates. It keeps its own short history of
counters instead.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Any, Protocol

import numpy as np

from livecam.control.live import LiveView
from livecam.core.commands import CommandQueue
from livecam.core.metrics import Metrics
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

    @property
    def state(self) -> RuntimeState: ...

    def describe(self) -> dict[str, Any]:
        """Static facts of the run: ``backend``, ``stages``, ``input``, ``output``,
        ``width``, ``height``, ``fps``."""
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
        # (t_ns, captured, sent); the first sample is taken now, so rates right after start
        # are averaged over the reporter's whole life instead of over two close requests
        self._history: deque[tuple[int, int, int]] = deque([self._sample()])

    def _sample(self) -> tuple[int, int, int]:
        m = self._target.metrics
        return time.perf_counter_ns(), m.counter("captured"), m.counter("sent")

    def _rates(self) -> tuple[float, float]:
        now = self._sample()
        with self._lock:
            self._history.append(now)
            # the reference is the newest sample at least a window old (or the oldest one)
            while len(self._history) > 2 and now[0] - self._history[1][0] >= _RATE_WINDOW_NS:
                self._history.popleft()
            t0, captured0, sent0 = self._history[0]
        dt_s = max((now[0] - t0) / 1e9, 1e-9)
        return (now[1] - captured0) / dt_s, (now[2] - sent0) / dt_s

    def status(self) -> dict[str, Any]:
        """The status document served at ``/api/status`` and pushed on ``/api/events``."""
        target = self._target
        state = target.state
        m = target.metrics
        fps_in, fps_out = self._rates()
        latency = m.latencies_ms()
        last = target.live.last()
        assigned = dict(state.track_identities)
        tracks = [] if last is None else [
            {"track_id": tid, "identity": state.identity_for_track(tid),
             "assigned": tid in assigned}
            for tid in last.track_ids
        ]
        counters = {name: m.counter(name) for name in (
            "captured", "processed", "sent", "repeated", "dropped_capture", "dropped_output",
            "stage_errors", "capture_lost")}
        doc: dict[str, Any] = {
            "uptime_s": round((time.perf_counter_ns() - self._t_start_ns) / 1e9, 3),
            "fps_in": round(fps_in, 2),
            "fps_out": round(fps_out, 2),
            "latency_ms": {"p50": _finite(_percentile(latency, 50)),
                           "p99": _finite(_percentile(latency, 99))},
            "frames": counters,
            "stage_ms": {name: _finite(_percentile(times, 50))
                         for name, times in m.stage_times_ms().items()},
            "active_identity": state.active_identity,
            "bypass": state.bypass,
            "identities": list(state.identities),
            "tracks": tracks,
            "assignments": [{"track_id": tid, "identity": name}
                            for tid, name in state.track_identities],
            "generation": state.generation,
        }
        doc.update(target.describe())
        doc.update(self._extra)
        return doc


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float | None) -> str:
    return "NaN" if value is None else repr(float(value))


def prometheus_text(status: dict[str, Any]) -> str:
    """The Prometheus text exposition (format 0.0.4) of a status document."""
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str,
               samples: list[tuple[str, float | None]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{labels} {_num(value)}" for labels, value in samples)

    frames = status["frames"]
    metric("livecam_frames_total", "counter", "Frames by stage of their life.",
           [(f'{{kind="{k}"}}', float(v)) for k, v in frames.items()])
    metric("livecam_fps", "gauge", "Frames per second over the last second.",
           [('{direction="in"}', status["fps_in"]), ('{direction="out"}', status["fps_out"])])
    lat = status["latency_ms"]
    metric("livecam_latency_seconds", "summary", "Capture to sink latency (recent frames).",
           [('{quantile="0.5"}', None if lat["p50"] is None else lat["p50"] / 1e3),
            ('{quantile="0.99"}', None if lat["p99"] is None else lat["p99"] / 1e3)])
    metric("livecam_stage_seconds", "gauge", "Median time per frame of each stage.",
           [(f'{{stage="{_label(k)}"}}', None if v is None else v / 1e3)
            for k, v in status["stage_ms"].items()])
    metric("livecam_bypass", "gauge", "1 while the real face is sent through.",
           [("", 1.0 if status["bypass"] else 0.0)])
    metric("livecam_identities", "gauge", "Identities in the library.",
           [("", float(len(status["identities"])))])
    metric("livecam_tracks", "gauge", "Tracked faces in the last frame sent.",
           [("", float(len(status["tracks"])))])
    active = status["active_identity"]
    metric("livecam_active_identity", "gauge", "1 for the identity being swapped in.",
           [(f'{{name="{_label(active)}"}}', 1.0)] if active else [])
    metric("livecam_state_changes_total", "counter", "Runtime state changes so far.",
           [("", float(status["generation"]))])
    metric("livecam_uptime_seconds", "gauge", "Seconds since the control API started.",
           [("", status["uptime_s"])])
    remote = status.get("remote_engines", {})
    labels = {stage: f'{{stage="{_label(stage)}",url="{_label(str(h.get("url", "")))}"}}'
              for stage, h in remote.items()}
    if remote:
        metric("livecam_remote_engine_up", "gauge", "1 while the remote engine (Triton) "
               "answers; 0 while faces are covered and it reconnects.",
               [(labels[k], 1.0 if h.get("state") == "ready" else 0.0) for k, h in remote.items()])
        for key, help_text in (("requests", "Requests sent to the remote engine."),
                               ("failures", "Requests that failed or missed their deadline."),
                               ("reconnects", "Times the remote engine came back.")):
            metric(f"livecam_remote_engine_{key}_total", "counter", help_text,
                   [(labels[k], float(h.get(key, 0))) for k, h in remote.items()])
        metric("livecam_remote_engine_request_seconds", "summary", "Round trip of one request.",
               [(labels[k][:-1] + f',quantile="{q}"}}',
                 None if h["request_ms"][p] is None else h["request_ms"][p] / 1e3)
                for k, h in remote.items() for q, p in (("0.5", "p50"), ("0.99", "p99"))])
    metric("livecam_info", "gauge", "Backend and output of this run.",
           [(f'{{backend="{_label(str(status.get("backend", "")))}",'
             f'output="{_label(str(status.get("output", "")))}"}}', 1.0)])
    return "\n".join(lines) + "\n"
