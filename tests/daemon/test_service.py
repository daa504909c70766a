"""``serve``: a stop signal while the app is still starting ends the start at once.

Runs in the test's main thread (signal handlers live there) with a real App whose one stage
takes as long to open as a model load on a busy machine; the signal is sent to this process.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from livecam.app import App
from livecam.capture.sources import SyntheticSource
from livecam.config import Config
from livecam.core.stage import StageBase
from livecam.core.types import Packet
from livecam.daemon.service import serve
from livecam.output.sinks import NullSink


class SlowToOpen(StageBase):
    """A stage whose ``open`` waits (as a model load would) until ``loaded`` is set, or gives
    up after two minutes (``gave_up``)."""

    name = "slow"

    def __init__(self) -> None:
        self.opening = threading.Event()
        self.loaded = threading.Event()
        self.gave_up = False

    def open(self) -> None:
        self.opening.set()
        # in slices, as a model load returns to Python between its steps: a signal that
        # arrives just before a blocking wait starts is handled only when that wait ends (the
        # handler runs on the main thread between bytecodes), so one wait(120) made this test
        # take the whole 120 s in 1 run of 3 (it still passed)
        deadline = time.monotonic() + 120
        while not self.loaded.wait(0.05):
            if time.monotonic() > deadline:
                self.gave_up = True
                return


class Quick(StageBase):
    name = "quick"
    closed = False

    def close(self) -> None:
        self.closed = True


class CountingSink(NullSink):
    def __init__(self) -> None:
        self.opened = 0

    def open(self, *, width: int, height: int, fps: float) -> None:
        self.opened += 1


def test_sigterm_while_a_stage_is_opening_ends_the_start(fast_config: Config) -> None:
    quick, stage, sink = Quick(), SlowToOpen(), CountingSink()

    def build() -> App:
        return App(fast_config, source=SyntheticSource(width=64, height=48, fps=30), sink=sink,
                   stages=[quick, stage])

    def terminate_when_opening() -> None:
        if stage.opening.wait(60):
            os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_when_opening)
    killer.start()
    previous = signal.getsignal(signal.SIGTERM)
    reason = serve(build)
    killer.join(10)
    assert reason == "SIGTERM"
    assert not stage.loaded.is_set() and not stage.gave_up  # cut short, not waited for
    assert quick.closed and sink.opened == 0  # what the start had opened was freed
    assert signal.getsignal(signal.SIGTERM) is previous


def test_serve_runs_the_app_until_it_finishes(fast_config: Config) -> None:
    sink = CountingSink()

    def build() -> App:
        return App(fast_config, source=SyntheticSource(width=64, height=48, fps=30), sink=sink,
                   stages=[], max_frames=5)

    assert serve(build) == "finished"
    assert sink.opened == 1


class BusyUntilTheSinkCloses(StageBase):
    """A frame's processing that ends only once the sink is closed (``sink_closed``), or
    gives up after a minute (``gave_up``): a stop that waits for the pipeline thread before
    closing the sink waits here."""

    name = "busy"

    def __init__(self, sink_closed: threading.Event) -> None:
        self.sink_closed = sink_closed
        self.busy = threading.Event()
        self.gave_up = False
        self.closed = False

    def process(self, packet: Packet) -> Packet:
        self.busy.set()
        if not self.sink_closed.wait(60):
            self.gave_up = True
        return packet

    def close(self) -> None:
        self.closed = True


class ClosingSink(NullSink):
    def __init__(self) -> None:
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


def test_a_stop_before_exit_closes_the_sink_without_waiting_for_the_pipeline(
        fast_config: Config) -> None:
    """``livecam daemon`` exits without teardown after ``serve``: SIGTERM closes the
    recording at once and leaves the pipeline thread's last frame and the stages to the
    process's exit (issue 39 item 15: that frame took up to 0.47 s of a SIGTERM and closing
    the stages up to 0.32 s on a saturated machine). Before, the stop waited for the frame
    (here it never ends before the sink closes: the stop ran into the stage's minute)."""
    sink = ClosingSink()
    stage = BusyUntilTheSinkCloses(sink.closed)

    def build() -> App:
        return App(fast_config, source=SyntheticSource(width=64, height=48, fps=30), sink=sink,
                   stages=[stage])

    def terminate_when_busy() -> None:
        if stage.busy.wait(60):
            os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_when_busy)
    killer.start()
    reason = serve(build, stop_timeout_s=120, exiting=True)
    killer.join(10)
    assert reason == "SIGTERM"
    assert sink.closed.is_set() and not stage.gave_up
    assert not stage.closed  # left to the exit
