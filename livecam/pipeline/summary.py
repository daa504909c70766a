"""The whole-run figures printed when a run ends (``livecam run``'s last line)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from livecam.core.metrics import Metrics


@dataclass(frozen=True)
class RunSummary:
    """Counts over the whole run; rates are per second of ``wall_s`` (start to stop)."""

    wall_s: float
    captured: int
    processed: int
    sent: int
    repeated: int
    dropped: int
    latency_mean_ms: float
    overloaded_s: float

    @classmethod
    def from_metrics(cls, metrics: Metrics, *, wall_s: float, overloaded_s: float
                     ) -> RunSummary:
        c = metrics.counters()
        return cls(wall_s=wall_s, captured=c.get("captured", 0),
                   processed=c.get("processed", 0), sent=c.get("sent", 0),
                   repeated=c.get("repeated", 0),
                   dropped=sum(c.get(k, 0) for k in ("dropped_capture", "dropped_pipeline",
                                                      "dropped_output")),
                   latency_mean_ms=metrics.latency_mean_ms(), overloaded_s=overloaded_s)

    @property
    def fps_out(self) -> float:
        """Frames sent per second of the run (repeats included: what the viewer got)."""
        return self.sent / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def fps_new(self) -> float:
        """New (not repeated) frames sent per second of the run."""
        return (self.sent - self.repeated) / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def drop_share(self) -> float:
        """Share of captured frames that were dropped (0 when nothing was captured)."""
        return self.dropped / self.captured if self.captured else 0.0

    def line(self) -> str:
        latency = ("-" if math.isnan(self.latency_mean_ms)
                   else f"{self.latency_mean_ms:.1f} ms")
        text = (f"whole run {self.wall_s:.1f} s: sent {self.sent} frames ({self.fps_out:.1f} "
                f"fps; {self.fps_new:.1f} fps new, {self.repeated} repeats), captured "
                f"{self.captured}, dropped {self.dropped} ({self.drop_share:.1%} of "
                f"captured), latency mean {latency}")
        if self.overloaded_s > 0:
            text += f", overloaded for {self.overloaded_s:.1f} s"
        return text
