"""Where a start or a stop of a stream went: named laps of one clock, and a line for the log."""

from __future__ import annotations

import time


class Stopwatch:
    """Milliseconds between successive ``lap`` calls, by name (a name lapped again adds up)."""

    def __init__(self) -> None:
        self._t_ns = time.perf_counter_ns()
        self.laps_ms: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter_ns()
        self.laps_ms[name] = self.laps_ms.get(name, 0.0) + (now - self._t_ns) / 1e6
        self._t_ns = now


def slowest(laps_ms: dict[str, float], most: int = 3) -> str:
    """``"<all> s (<name> <s> s, ...)"``: the whole of ``laps_ms`` and its ``most`` longest."""
    parts = sorted(laps_ms.items(), key=lambda kv: -kv[1])[:most]
    return (f"{sum(laps_ms.values()) / 1e3:.1f} s ("
            + ", ".join(f"{name} {ms / 1e3:.1f} s" for name, ms in parts) + ")")
