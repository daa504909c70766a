"""Per-stage timing of the frame program with CUDA events (host clock on the CPU).

:class:`StageTimer` is passed as the program's ``mark`` callback in an *eager* run: each mark
records an event on the current stream, so stage times are device times, not launch times.
(Inside a CUDA graph the stages cannot be told apart; the benchmark times the graph as a whole.)
One thread.
"""

from __future__ import annotations

import time
from typing import Any

import torch


class StageTimer:
    """``start()``, then ``timer(name)`` after each stage, then ``stages_ms()`` (waits)."""

    def __init__(self, device: torch.device | str) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self._marks: list[tuple[str, Any]] = []

    def _stamp(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter_ns()

    def start(self) -> None:
        self._marks = [("start", self._stamp())]

    def __call__(self, name: str) -> None:
        self._marks.append((name, self._stamp()))

    def stages_ms(self) -> dict[str, float]:
        """Milliseconds per stage since the previous mark (same names summed)."""
        out: dict[str, float] = {}
        if self.cuda and self._marks:
            self._marks[-1][1].synchronize()
        for (_, prev), (name, cur) in zip(self._marks, self._marks[1:], strict=False):
            ms = float(prev.elapsed_time(cur)) if self.cuda else (cur - prev) / 1e6
            out[name] = out.get(name, 0.0) + ms
        return out
