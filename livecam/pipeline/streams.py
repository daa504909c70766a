"""Several streams in one process: one input → output pair each, run, controlled and stopped
together.

A :class:`StreamSet` holds one :class:`~livecam.pipeline.runtime.App` per stream (its own
capture, pipeline and output threads, metrics, runtime state and command queue), so one
stream's stall or failure never holds another's output. What the streams share is decided
where they are built (:func:`livecam.app.build_streams`): on the CPU nothing (each stream has
its own stage chain); on a CUDA GPU one GPU pipeline that swaps the faces of every stream in
one generator call. Controls (the API, hotkeys) belong to the set: a command without a stream
goes to every stream (:class:`~livecam.core.commands.CommandFanOut`), the API can also name
one (``?stream=K``, ``livecam ctl --stream K``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence

from livecam.core.commands import CommandFanOut
from livecam.core.types import RuntimeState
from livecam.output import GuiSink
from livecam.pipeline.running import ControlSource, run_to_end, stop_controls
from livecam.pipeline.runtime import App
from livecam.pipeline.summary import RunSummary

log = logging.getLogger(__name__)


class StreamSet:
    """The streams of one run (see the module docstring).

    ``start`` starts every stream (a failure stops those already started and raises), then
    the controls; ``wait`` blocks until every stream is done (frame limit, input ended, quit);
    ``stop`` stops all streams at once, so the whole set stops within about ``timeout_s``
    however many streams there are. ``commands`` reaches every stream. At most one stream
    may draw a preview window (it is drawn by the thread that calls ``wait``).
    """

    def __init__(self, apps: Sequence[App]) -> None:
        if not apps:
            raise ValueError("a stream set needs at least one stream")
        guis = [a for a in apps if isinstance(a.sink, GuiSink)]
        if len(guis) > 1:
            raise ValueError("at most one stream may show a preview window")
        self.apps = list(apps)
        self.commands = CommandFanOut([a.commands for a in self.apps])
        self.controls: list[ControlSource] = []
        self._gui = guis[0] if guis else None
        self.stop_timings_ms: dict[str, float] = {}

    @property
    def state(self) -> RuntimeState:
        """The first stream's runtime state (every stream starts from the same one)."""
        return self.apps[0].state

    @property
    def done(self) -> bool:
        return all(a.done for a in self.apps)

    @property
    def output_error(self) -> BaseException | None:
        """The first stream's output error, if any stream's output failed."""
        return next((a.output_error for a in self.apps if a.output_error is not None), None)

    def start(self) -> None:
        started: list[App] = []
        try:
            # every stream opened (models, GPU graphs) before any runs: a stream opening
            # while others run waits for the GIL behind them
            for app in self.apps:
                started.append(app)
                app.open()
            for app in self.apps:
                app.start()
            for control in self.controls:
                control.start()
        except BaseException:
            self._stop_all(started, 0.9)
            raise
        if len(self.apps) > 1:
            log.info("%d streams running", len(self.apps))
        state = self.apps[0].state if self.apps else None
        if state is not None and state.active_identity is None and not state.identities:
            # said once the run is up, so a start-up error stays a single line
            log.warning("no identity in the library: frames pass through unswapped (the "
                        "real face is sent); add one with `livecam identity add NAME PHOTO`")

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until every stream is done (True) or ``timeout_s`` passed (False); on the
        window's thread the preview window is drawn meanwhile."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            pending = [a for a in self.apps if not a.done]
            if not pending:
                return True
            left_s = None if deadline is None else deadline - time.monotonic()
            if left_s is not None and left_s <= 0:
                return False
            step_s = 0.05 if left_s is None else min(left_s, 0.05)
            # the window's app draws it while waiting (closing it ends that stream)
            (self._gui if self._gui in pending else pending[0]).wait(step_s)

    def stop(self, timeout_s: float = 0.9) -> None:
        """Stop the controls, then every stream in parallel. Idempotent."""
        t0 = time.perf_counter_ns()
        stop_controls(self.controls)
        t_controls = (time.perf_counter_ns() - t0) / 1e6
        self._stop_all(self.apps, timeout_s)
        timings = {"controls": t_controls}
        for app in self.apps:  # the slowest stream's time per step
            for key, ms in app.stop_timings_ms.items():
                timings[key] = max(timings.get(key, 0.0), ms)
        self.stop_timings_ms = timings

    @staticmethod
    def _stop_all(apps: Sequence[App], timeout_s: float) -> None:
        if len(apps) == 1:
            apps[0].stop(timeout_s=timeout_s)
            return
        threads = [threading.Thread(target=a.stop, kwargs={"timeout_s": timeout_s},
                                    name=f"livecam-stop-{i}", daemon=True)
                   for i, a in enumerate(apps)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout_s + 1.0
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def run(self) -> None:
        """start, wait until every stream is done (or Ctrl-C), stop (:func:`run_to_end`)."""
        run_to_end(self)

    def summary(self) -> RunSummary:
        """Whole-run figures over every stream (counts added, the longest wall time)."""
        return combine([a.summary() for a in self.apps])

    def summaries(self) -> list[RunSummary]:
        return [a.summary() for a in self.apps]


def combine(parts: Sequence[RunSummary]) -> RunSummary:
    """One summary for several streams: counts summed, the longest wall time, the latency
    mean weighted by frames sent, overloaded time of the most overloaded stream."""
    if len(parts) == 1:
        return parts[0]
    sent = sum(p.sent - p.repeated for p in parts)
    weighted = [(p.latency_mean_ms, p.sent - p.repeated) for p in parts
                if not math.isnan(p.latency_mean_ms)]
    mean = (sum(m * n for m, n in weighted) / sum(n for _, n in weighted)
            if weighted and sum(n for _, n in weighted) else float("nan"))
    return RunSummary(wall_s=max(p.wall_s for p in parts),
                      captured=sum(p.captured for p in parts),
                      processed=sum(p.processed for p in parts), sent=sum(p.sent for p in parts),
                      repeated=sum(p.repeated for p in parts),
                      dropped=sum(p.dropped for p in parts),
                      latency_mean_ms=mean if sent else float("nan"),
                      overloaded_s=max(p.overloaded_s for p in parts))
