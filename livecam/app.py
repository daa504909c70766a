"""The one place that builds and wires the objects of a run.

``build_app`` turns a config and ``--input``/``--output`` specs into an :class:`App`: capture
thread → mailbox → pipeline thread (stages) → mailbox → output thread → sink, plus a status
reporter. Nothing else in the package constructs threads or picks implementations.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from livecam.capture import FrameSource, make_source, parse_input
from livecam.capture.thread import CaptureThread
from livecam.config import Config
from livecam.control.commands import CommandQueue
from livecam.output import FrameSink, make_sink, parse_output
from livecam.output.thread import OutputThread
from livecam.pipeline.mailbox import Mailbox, Policy
from livecam.pipeline.metrics import Metrics
from livecam.pipeline.passthrough import PassThrough
from livecam.pipeline.scheduler import Scheduler
from livecam.pipeline.stage import Stage
from livecam.types import Frame, ImageBGR, Packet, RuntimeState

log = logging.getLogger(__name__)


class App:
    """One run: owns the source, the stages, the sink and the three threads.

    ``start`` opens everything in the calling thread (so errors surface as exceptions with clear
    messages before any thread runs), ``wait`` blocks until the output is done, ``stop`` ends
    the run within about a second even if the capture device is blocked. Any thread may call
    ``commands.put``.
    """

    def __init__(self, config: Config, *, source: FrameSource, sink: FrameSink,
                 stages: Sequence[Stage], state: RuntimeState | None = None,
                 max_frames: int | None = None,
                 on_sent: Callable[[Packet | None, ImageBGR], None] | None = None) -> None:
        self.config = config
        self.source = source
        self.sink = sink
        self.stages = list(stages)
        self.metrics = Metrics()
        self.commands = CommandQueue()
        self._initial_state = state or RuntimeState()
        self._max_frames = max_frames
        self._on_sent = on_sent
        self._done = threading.Event()
        self._resources = ExitStack()
        self._capture: CaptureThread | None = None
        self._scheduler: Scheduler | None = None
        self._output: OutputThread | None = None
        self._status: threading.Thread | None = None
        self.output_size_px = (0, 0)
        self.output_fps = 0.0

    @property
    def state(self) -> RuntimeState:
        return self._scheduler.state if self._scheduler is not None else self._initial_state

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def output_error(self) -> BaseException | None:
        return None if self._output is None else self._output.error

    def start(self) -> None:
        cfg = self.config
        realtime = cfg.pipeline.realtime
        try:
            for stage in self.stages:
                stage.open()
                self._resources.callback(stage.close)
            self.source.open()
            src_w, src_h = self.source.size_px
            width = cfg.output.width or src_w
            height = cfg.output.height or src_h
            fps = cfg.output.fps or self.source.fps
            self.sink.open(width=width, height=height, fps=fps)
            self._resources.callback(self.sink.close)
        except BaseException:
            self.source.close()
            self._resources.close()
            raise
        self.output_size_px, self.output_fps = (width, height), fps
        policy: Policy = "latest" if realtime else "block"
        frames: Mailbox[Frame] = Mailbox(policy=policy)
        packets: Mailbox[Packet] = Mailbox(policy=policy)
        self._frames_box, self._packets_box = frames, packets
        self._output = OutputThread(sink=self.sink, inbox=packets, metrics=self.metrics,
                                    width=width, height=height, fps=fps, realtime=realtime,
                                    max_frames=self._max_frames, on_done=self._done.set,
                                    on_sent=self._on_sent)
        self._scheduler = Scheduler(stages=self.stages, inbox=frames, outbox=packets,
                                    commands=self.commands, metrics=self.metrics,
                                    state=self._initial_state,
                                    error_log_interval_s=cfg.pipeline.stage_error_log_interval_s,
                                    on_quit=self._done.set)
        self._capture = CaptureThread(source=self.source, outbox=frames, metrics=self.metrics,
                                      realtime=realtime, loop=cfg.capture.loop,
                                      reconnect_initial_s=cfg.capture.reconnect_initial_s,
                                      reconnect_max_s=cfg.capture.reconnect_max_s)
        self._output.start()
        self._scheduler.start()
        self._capture.start(already_open=True)
        if cfg.pipeline.status_interval_s > 0:
            self._status = threading.Thread(target=self._report_status, name="livecam-status",
                                            daemon=True)
            self._status.start()
        log.info("running: %dx%d at %g fps, stages: %s, %s mode", width, height, fps,
                 ", ".join(s.name for s in self.stages), "live" if realtime else "offline")

    def _report_status(self) -> None:
        interval = self.config.pipeline.status_interval_s
        self.metrics.snapshot()
        while not self._done.wait(interval):
            self._update_drop_counters()
            log.info("%s", self.metrics.snapshot().status_line())

    def _update_drop_counters(self) -> None:
        self.metrics.set_counter("dropped_capture", self._frames_box.dropped)
        self.metrics.set_counter("dropped_output", self._packets_box.dropped)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the run is done (frame limit reached, input ended, quit); True if done."""
        return self._done.wait(timeout_s)

    def stop(self, timeout_s: float = 0.9) -> None:
        """End the run and free everything. Idempotent; returns within about ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        self._done.set()
        threads = [t for t in (self._capture, self._scheduler, self._output) if t is not None]
        for t in threads:
            t.request_stop()
        if self._capture is not None:
            self._capture.stop(join_timeout_s=max(0.0, (deadline - time.monotonic()) / 3))
        if self._scheduler is not None:
            self._scheduler.stop(join_timeout_s=max(0.0, (deadline - time.monotonic()) / 2))
        if self._output is not None:
            self._output.stop(join_timeout_s=max(0.0, deadline - time.monotonic()))
        if self._capture is not None:
            self._update_drop_counters()
        self._resources.close()

    def run(self) -> None:
        """start, wait until done (or Ctrl-C), stop."""
        self.start()
        try:
            while not self.wait(0.2):
                pass
        finally:
            self.stop()
        if self.output_error is not None:
            raise self.output_error


def build_stages(config: Config, state: RuntimeState) -> list[Stage]:
    """The per-frame stages for this config; a no-op stage when nothing is to be swapped."""
    return [PassThrough()]


def build_app(config: Config, *, input_spec: str, output_spec: str,
              max_frames: int | None = None, state: RuntimeState | None = None,
              stages: Sequence[Stage] | None = None) -> App:
    """Parse the specs and wire an :class:`App` (nothing is opened yet)."""
    source = make_source(parse_input(input_spec), config.capture)
    sink = make_sink(parse_output(output_spec), config.output)
    state = state or RuntimeState()
    if stages is None:
        stages = build_stages(config, state)
    return App(config, source=source, sink=sink, stages=stages, state=state,
               max_frames=max_frames)
