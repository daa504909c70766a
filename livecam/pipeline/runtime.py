"""``App``: one run's threads and resources (capture, pipeline, output, status, controls).

Built and wired by :mod:`livecam.app`; this module only runs what it is given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from livecam.capture import FrameSource
from livecam.capture.thread import CaptureThread
from livecam.config import Config
from livecam.core.commands import CommandQueue, stream_snapshot_path
from livecam.core.errors import CaptureError
from livecam.core.handed import FrameCover, PreviewSink
from livecam.core.mailbox import Mailbox, Policy
from livecam.core.metrics import Metrics
from livecam.core.overload import OverloadMonitor
from livecam.core.reload_result import ReloadResult
from livecam.core.stage import (
    AnyStage,
    ChecksFit,
    Prepares,
    host_frames_of,
    source_i420_wanted,
)
from livecam.core.switching import switch_interval
from livecam.core.types import Frame, ImageBGR, Packet, RuntimeState
from livecam.output import FrameSink, GuiSink
from livecam.output.thread import OutputThread
from livecam.pipeline.reload import Reloader, StageFactory
from livecam.pipeline.running import ControlSource, run_to_end, stop_controls
from livecam.pipeline.scheduler import Scheduler
from livecam.pipeline.stopwatch import Stopwatch, slowest
from livecam.pipeline.streamlog import StreamLog
from livecam.pipeline.summary import RunSummary
from livecam.pipeline.watch import StatusWatcher

log = logging.getLogger(__name__)

#: Longest a GUI sink's pump waits for a frame: key presses and a closed window are noticed
#: at least this often even when no frame comes.
_GUI_PUMP_S = 0.02
#: Longest ``open`` waits for an input pipe's first bytes (its frame size sets the output's)
#: before the capture thread takes the wait over.
_PIPE_WAIT_S = 2.0


def prepare_stages(stages: Sequence[AnyStage], width_px: int, height_px: int,
                   logger: logging.Logger | StreamLog = log) -> None:
    """Prepare every stage that offers it for ``width_px`` x ``height_px`` frames (CUDA-graph
    capture takes seconds: done before the output starts rather than on the first frames). A
    size of 0 (a live source not there yet) prepares nothing: the first frame does it. Every
    stage that checks whether it fits (:class:`ChecksFit`: the GPU memory plan) is asked
    first, so a start that cannot hold compiles and captures nothing."""
    if width_px <= 0 or height_px <= 0:
        return
    for stage in stages:
        if isinstance(stage, ChecksFit):
            stage.check_fits(width_px, height_px)
    for stage in stages:
        if not isinstance(stage, Prepares):
            continue
        t0 = time.perf_counter()
        logger.info("preparing stage %s for %dx%d frames before the output starts",
                    stage.name, width_px, height_px)
        stage.prepare(width_px, height_px)
        logger.info("stage %s ready in %.1f s", stage.name, time.perf_counter() - t0)


class App:
    """One run: owns the source, the stages, the sink and the three threads.

    ``start`` opens everything in the calling thread (so errors surface as exceptions with clear
    messages before any thread runs), ``wait`` blocks until the output is done, ``stop`` ends
    the run within about a second even if the capture device is blocked. Any thread may call
    ``commands.put``. With a :class:`~livecam.output.GuiSink` (the preview window), ``wait``
    called on the thread that called ``start`` draws the window while it waits (the GUI
    belongs to that thread), and the user closing the window ends the run.

    Control (see ``livecam.control``): ``live`` holds the last frame sent (panel preview,
    snapshots); ``controls`` are started after the threads and stopped first; the app is the
    :class:`~livecam.core.commands.ControlHooks` of its scheduler (``request_reload``,
    ``save_snapshot``, ``set_output_delay``). ``overload`` judges every 0.25 s whether the
    stages keep up (live mode); ``summary()`` gives the whole-run figures. With
    ``wait_for_source`` a live source that cannot be opened at start does not fail the run (nor
    does a network input in listener mode, waiting for its sender):
    the output sends black frames at ``capture`` size until it appears. Stages with slow
    set-up per frame size (:class:`~livecam.core.stage.Prepares`: CUDA-graph capture) are
    prepared for the source's size in ``start``, before the output sends anything.
    """

    def __init__(self, config: Config, *, source: FrameSource, sink: FrameSink,
                 stages: Sequence[AnyStage], error_cover: FrameCover, live: PreviewSink,
                 state: RuntimeState | None = None,
                 max_frames: int | None = None,
                 on_sent: Callable[[Packet | None, ImageBGR], None] | None = None,
                 commands: CommandQueue | None = None,
                 stage_factory: StageFactory | None = None,
                 config_loader: Callable[[], Config] | None = None,
                 identity_names: Callable[[], Sequence[str]] | None = None,
                 wait_for_source: bool = False, input_label: str = "",
                 output_label: str = "", stream: int | None = None) -> None:
        self.config = config
        self.source = source
        self.sink = sink
        self.stages = list(stages)
        self.metrics = Metrics()
        self.overload = OverloadMonitor(
            latency_budget_ms=config.pipeline.overload_latency_ms,
            drop_share_limit=config.pipeline.overload_drop_share, stream=stream,
            file_input=input_label.startswith("file:"))
        self.commands = commands or CommandQueue()
        self.live = live
        self._error_cover = error_cover
        self.controls: list[ControlSource] = []
        self._wait_for_source = wait_for_source
        self._labels = (input_label, output_label)
        #: this app's index among the streams of one process (None: the only one)
        self.stream = stream
        self._log = StreamLog(log, stream)
        self._reloader = Reloader(self, stage_factory=stage_factory,
                                  config_loader=config_loader, identity_names=identity_names)
        self._initial_state = state or RuntimeState()
        self._max_frames = max_frames
        self._on_sent = on_sent
        self._done = threading.Event()
        self._first_out = threading.Event()  # the first processed frame has been sent
        self._resources = ExitStack()  # the sink and the GIL switch interval
        self._stage_closes = ExitStack()  # the stages (left open by a stop before exit)
        # (width, height, fps, source open) once open() has run
        self._opened: tuple[int, int, float, bool] | None = None
        self._capture: CaptureThread | None = None
        self._scheduler: Scheduler | None = None
        self._output: OutputThread | None = None
        self._watcher: StatusWatcher | None = None
        self._t_start_ns: int | None = None
        self._t_stop_ns: int | None = None
        self._gui_thread: int | None = None
        self.output_size_px = (0, 0)
        self.output_fps = 0.0
        self.stop_timings_ms: dict[str, float] = {}
        self._close_ms: dict[str, float] = {}  # each close of a stop, by what it closed
        #: where open() went: each stage's open, the source, the stages' prepare, the sink
        self.open_timings_ms: dict[str, float] = {}

    @property
    def state(self) -> RuntimeState:
        return self._scheduler.state if self._scheduler is not None else self._initial_state

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def output_error(self) -> BaseException | None:
        return None if self._output is None else self._output.error

    def open(self) -> None:
        """Open the stages, the source and the sink (models load, GPU graphs are captured: the
        slow part of a start) without starting a thread. Idempotent; :meth:`start` calls it.
        :class:`~livecam.pipeline.streams.StreamSet` opens every stream before it starts any,
        so the last streams do not open while the first ones already run (on the H200, 16
        streams took 104 s to start, each opening against the running ones for the GIL)."""
        if self._opened is not None:
            return
        cfg = self.config
        laps = Stopwatch()
        try:
            self._resources.enter_context(
                switch_interval(cfg.pipeline.gil_switch_interval_ms / 1000.0))
            for stage in self.stages:
                stage.open()
                laps.lap(f"open {stage.name}")
                self._stage_closes.callback(self._timed_close, f"close {stage.name}",
                                            stage.close)
            source_open = self._open_source()
            laps.lap("source")
            src_w, src_h = self.source.size_px
            prepare_stages(self.stages, src_w, src_h, self._log)
            laps.lap("prepare")
            if src_w <= 0 or src_h <= 0:  # an input pipe not open yet
                src_w, src_h = cfg.capture.width, cfg.capture.height
            width = cfg.output.width or src_w
            height = cfg.output.height or src_h
            fps = cfg.output.fps or self.source.fps
            self.sink.open(width=width, height=height, fps=fps)
            self._resources.callback(self._timed_close, "close sink", self.sink.close)
            laps.lap("sink")
            if isinstance(self.sink, GuiSink):
                self._gui_thread = threading.get_ident()
        except BaseException:
            self.source.close()
            self._stage_closes.close()
            self._resources.close()
            raise
        self._stage_closes.callback(self._timed_close, "close stages", self._close_current_stages)
        self._opened = (width, height, fps, source_open)
        self.open_timings_ms = laps.laps_ms

    def start(self) -> None:
        """Open (:meth:`open`, unless done) and start the capture, pipeline and output threads
        and the controls."""
        self.open()
        assert self._opened is not None
        width, height, fps, source_open = self._opened
        cfg = self.config
        realtime = cfg.pipeline.realtime
        self.output_size_px, self.output_fps = (width, height), fps
        policy: Policy = "latest" if realtime else "block"
        frames: Mailbox[Frame] = Mailbox(policy=policy)
        packets: Mailbox[Packet] = Mailbox(policy=policy)
        self._output = OutputThread(sink=self.sink, inbox=packets, metrics=self.metrics,
                                    width=width, height=height, fps=fps, realtime=realtime,
                                    max_frames=self._max_frames, on_done=self._mark_done,
                                    on_sent=self._sent, delay_ms=cfg.output.delay_ms,
                                    input_waiting=self._input_waiting)
        self._scheduler = Scheduler(stages=self.stages, inbox=frames, outbox=packets,
                                    commands=self.commands, metrics=self.metrics,
                                    state=self._initial_state,
                                    error_log_interval_s=cfg.pipeline.stage_error_log_interval_s,
                                    on_quit=self._mark_done, hooks=self,
                                    threads=cfg.pipeline.threads, hop_policy=policy,
                                    error_cover=self._error_cover)
        self._capture = CaptureThread(source=self.source, outbox=frames, metrics=self.metrics,
                                      realtime=realtime, loop=cfg.capture.loop,
                                      reconnect_initial_s=cfg.capture.reconnect_initial_s,
                                      reconnect_max_s=cfg.capture.reconnect_max_s,
                                      host_frames=host_frames_of(self.stages),
                                      source_i420=source_i420_wanted(self.stages),
                                      # a file's start is content not to skip; a
                                      # synthetic pattern stands in for a camera
                                      first_out=(self._first_out if self._labels[0]
                                                 .startswith("file:") else None))
        self._t_start_ns = time.perf_counter_ns()
        self._scheduler.start()
        self._capture.start(already_open=source_open)
        self._output.start()  # after the capture says whether its input is open
        self._watcher = StatusWatcher(
            metrics=self.metrics, overload=self.overload, frames=frames, packets=packets,
            scheduler=self._scheduler, output=self._output, done=self._done, realtime=realtime,
            status_interval_s=cfg.pipeline.status_interval_s, stream=self.stream)
        self._watcher.start()
        self._log.info("running: %dx%d at %g fps, stages: %s, %s mode; opened in %s", width,
                       height, fps, ", ".join(s.name for s in self.stages),
                       "live" if realtime else "offline", slowest(self.open_timings_ms))
        try:
            for control in self.controls:
                control.start()
        except BaseException:
            self.stop()
            raise

    def _mark_done(self) -> None:
        """The run is over (frame limit, input ended, quit, stop): stop the clock. Any thread."""
        if self._t_stop_ns is None and self._t_start_ns is not None:
            self._t_stop_ns = time.perf_counter_ns()
        self.commands.close()  # nothing drains it any more: the control API says so
        self._done.set()

    def _open_source(self) -> bool:
        """Open the source; True if open. A live source may be missing with wait_for_source.
        An input pipe that has sent nothing within ``_PIPE_WAIT_S`` is left to the capture
        thread to open (it may never write: the controls must still come up and a stop must
        still work); the output then runs at the ``capture`` size meanwhile. A network input
        in listener mode is left to the capture thread too (it waits for its sender)."""
        if getattr(self.source, "listener", False):
            # a network input in listener mode waits for its sender (OBS started after us):
            # the capture thread listens, the output sends black frames until a sender comes
            self._log.info("input %s: waiting for a sender; black frames until one comes",
                           getattr(self.source, "shown", ""))
            return False
        wait_ready = getattr(self.source, "wait_ready", None)
        if callable(wait_ready):
            deadline = time.monotonic() + _PIPE_WAIT_S
            # short slices: a stop signal's handler runs between them on the main thread
            while not wait_ready(0.05):
                if time.monotonic() >= deadline:
                    self._log.info("input %s has sent nothing yet: the output starts at the "
                                   "capture size and the frames follow when it does",
                                   self._labels[0] or "pipe")
                    return False
        try:
            self.source.open()
            return True
        except CaptureError as exc:
            if not (self._wait_for_source and self.source.live):
                raise
            self._log.warning("%s; sending black frames until it can be opened", exc)
            return False

    def _input_waiting(self) -> bool:
        """The input is not open (yet, or again): the output may send its idle frame. The
        output thread."""
        return self._capture is None or not self._capture.is_open

    def _sent(self, packet: Packet | None, image: ImageBGR) -> None:
        if packet is not None:
            self._first_out.set()
        self.live.update(packet, image)
        if self._on_sent is not None:
            self._on_sent(packet, image)

    def _timed_close(self, name: str, close: Callable[[], None]) -> None:
        """Run ``close``, its time kept for ``stop_timings_ms`` (where a stop's time goes)."""
        t0 = time.perf_counter_ns()
        try:
            close()
        finally:
            self._close_ms[name] = (time.perf_counter_ns() - t0) / 1e6

    def _close_current_stages(self) -> None:
        if self._scheduler is not None:
            self._scheduler.close_stages()

    # -- control hooks and facts (any thread) -------------------------------------------

    def describe(self) -> dict[str, Any]:
        """Facts of the run for the status document (the A/V delay may change live)."""
        backends = [f"{s.name}:{s.backend}" for s in self.stages if hasattr(s, "backend")]
        doc = {"backend": ", ".join(backends) or ", ".join(s.name for s in self.stages),
               "stages": [s.name for s in self.stages], "input": self._labels[0],
               "output": self._labels[1], "width": self.output_size_px[0],
               "height": self.output_size_px[1], "fps": self.output_fps,
               "delay_ms": self.output_delay_ms,
               "stream": 0 if self.stream is None else self.stream,
               "in_flight": 0 if self._scheduler is None else self._scheduler.in_flight}
        # and the link state of remote engines (a stage with ``health()``)
        healths = [(s.name, getattr(s, "health", None)) for s in self.stages]
        remote = {name: h for name, fn in healths if callable(fn) and (h := fn()) is not None}
        if remote:
            doc["remote_engines"] = remote
        return doc

    @property
    def output_delay_ms(self) -> float:
        """The A/V delay in force (``output.delay_ms``, or as last set live)."""
        if self._output is not None:
            return self._output.delay_ms
        return self.config.output.delay_ms

    def set_output_delay(self, delay_ms: float) -> None:
        """Hold frames ``delay_ms`` after capture from the next frame on. Pipeline thread
        (the :class:`~livecam.core.commands.SetOutputDelay` hook)."""
        if self._output is not None:
            self._output.set_delay_ms(delay_ms)
        self._log.info("A/V delay now %.0f ms", delay_ms)

    def save_snapshot(self, path: str) -> None:
        """Write the last frame sent to ``path`` (PNG/JPEG by suffix; with several streams,
        this stream's :func:`~livecam.core.commands.stream_snapshot_path`), or raise
        :class:`OSError` saying why not. Pipeline thread."""
        self.live.save_snapshot(Path(stream_snapshot_path(path, self.stream)))

    def request_reload(self, result: ReloadResult | None = None) -> None:
        """Re-read the config file and identity library and swap in new stages, in a
        background thread so frames keep flowing (SIGHUP, ``livecam ctl reload``); ``result``
        learns how it ended."""
        self._reloader.request(result)

    @property
    def started(self) -> bool:
        """``start`` has built the pipeline (any thread)."""
        return self._scheduler is not None

    def replace_stages(self, stages: Sequence[AnyStage]) -> None:
        """Open ``stages`` (built for a reload), prepare them for the source's frame size and
        hand them to the pipeline, which installs them before its next frame. They are closed
        again when opening fails (raised) or the run ended meanwhile. The reload thread."""
        opened: list[AnyStage] = []
        try:
            for stage in stages:
                stage.open()
                opened.append(stage)
            prepare_stages(stages, *self.source.size_px, logger=self._log)
        except BaseException:
            for stage in opened:
                stage.close()
            raise
        if self._done.is_set() or self._scheduler is None:
            for stage in stages:
                stage.close()
            return
        self._scheduler.replace_stages(stages)
        self.stages = list(stages)

    def summary(self) -> RunSummary:
        """Whole-run figures (from start to stop, or to now while running)."""
        end_ns = self._t_stop_ns or time.perf_counter_ns()
        wall_s = (end_ns - (self._t_start_ns or end_ns)) / 1e9
        return RunSummary.from_metrics(self.metrics, wall_s=wall_s,
                                       overloaded_s=self.overload.overloaded_s(end_ns))

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the run is done (frame limit reached, input ended, quit, preview window
        closed); True if done. On the GUI thread of a window sink it draws the window
        meanwhile."""
        if self._gui_thread is None or threading.get_ident() != self._gui_thread:
            return self._done.wait(timeout_s)
        assert isinstance(self.sink, GuiSink)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._done.is_set():
            left_s = _GUI_PUMP_S if deadline is None else deadline - time.monotonic()
            if left_s <= 0:
                return False
            if not self.sink.pump(timeout_s=min(left_s, _GUI_PUMP_S)):
                self._log.info("preview window closed: stopping")
                self._mark_done()
        return True

    def stop(self, timeout_s: float = 0.9, *, exiting: bool = False) -> None:
        """End the run and free everything. Idempotent; returns within about ``timeout_s``
        plus what closing the sink and stages takes. ``stop_timings_ms`` says where it went.

        ``exiting``: the process ends right after without tearing down the interpreter
        (``livecam daemon``): the capture and pipeline threads are asked to stop but not
        waited for, and the stages are left open, since the exit frees them; the output
        thread is still ended and the sink closed, so a recording is complete. On a saturated
        2-core machine the pipeline thread's last frame takes up to 0.47 s and closing the
        stages up to 0.32 s of a SIGTERM."""
        deadline = time.monotonic() + timeout_s
        timings = Stopwatch()
        self._mark_done()
        stop_controls(self.controls)
        timings.lap("controls")
        threads = [t for t in (self._capture, self._scheduler, self._output) if t is not None]
        for t in threads:
            t.request_stop()
        if self._capture is not None and not exiting:
            self._capture.stop(join_timeout_s=max(0.0, (deadline - time.monotonic()) / 3))
        timings.lap("capture")
        if self._scheduler is not None and not exiting:
            self._scheduler.stop(join_timeout_s=max(0.0, (deadline - time.monotonic()) / 2))
        timings.lap("pipeline")
        if self._output is not None:
            self._output.stop(join_timeout_s=max(0.0, deadline - time.monotonic()))
        timings.lap("output")
        if self._watcher is not None:
            self._watcher.update_drop_counters()
        if self._capture is None and self._opened is not None:
            self.source.close()  # opened, never started: no capture thread owns it
        if not exiting:
            self._stage_closes.close()
        self._resources.close()
        timings.lap("close")
        self.stop_timings_ms = {**timings.laps_ms, **self._close_ms}

    def run(self) -> None:
        """start, wait until done (or Ctrl-C), stop (:func:`run_to_end`)."""
        run_to_end(self)
