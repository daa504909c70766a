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

Streams come and go while the set runs (``livecam ctl stream add|remove``, ``/api/streams``,
the sessions of ``livecam serve``): :meth:`StreamSet.add_stream` builds, opens and starts a
new stream beside the running ones (they keep running: nothing they use is locked while it
opens), :meth:`StreamSet.remove_stream` stops one. Each stream has an id that is never
reused (the start's pairs are 0, 1, ...; ``?stream=K`` names an id).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from livecam.capture.base import FrameSource
from livecam.core.commands import Command, CommandFanOut, CommandQueue, Ticket
from livecam.core.errors import LivecamError
from livecam.core.types import RuntimeState
from livecam.output import FrameSink, GuiSink
from livecam.pipeline.running import ControlSource, run_to_end, stop_controls
from livecam.pipeline.runtime import App
from livecam.pipeline.summary import RunSummary

log = logging.getLogger(__name__)

#: Builds stream ``k`` for ``(input_spec, output_spec)`` (nothing opened yet), or with the
#: given ``(source, sink)`` (the specs are then only labels: a remote session's); raises
#: :class:`~livecam.core.errors.UsageError`/``ConfigError`` for specs it cannot run.
Endpoints = tuple[FrameSource, FrameSink]
#: The kind of app the set holds: the composition root's (:class:`livecam.app.App`).
AppT = TypeVar("AppT", bound=App)
AppFactory = Callable[[int, str, str, "Endpoints | None"], AppT]


class StreamLimitError(LivecamError, RuntimeError):
    """A stream cannot be added now (the set is at ``advanced.pipeline.max_streams``, is stopping,
    or was built without a way to add streams)."""


class _SetCommands:
    """The commands of the set as one queue: every stream running at ``put`` time."""

    def __init__(self, streams: StreamSet[Any]) -> None:
        self._streams = streams

    @property
    def queues(self) -> tuple[CommandQueue, ...]:
        """The queues of the streams running now."""
        return tuple(a.commands for a in self._streams.apps)

    def put(self, command: Command, *, timeout_s: float = 1.0) -> Ticket:
        apps = self._streams.apps
        if not apps:
            raise LivecamError("no stream is running: add one first")
        return CommandFanOut([a.commands for a in apps]).put(command, timeout_s=timeout_s)


class StreamSet(Generic[AppT]):
    """The streams of one run (see the module docstring).

    ``start`` starts every stream (a failure stops those already started and raises), then
    the controls; ``wait`` blocks until every stream is done (frame limit, input ended, quit);
    ``stop`` stops all streams at once, so the whole set stops within about ``timeout_s``
    however many streams there are. ``commands`` reaches every stream running at the time.
    At most one stream may draw a preview window (it is drawn by the thread that calls
    ``wait``).

    ``factory`` (:data:`AppFactory`) lets streams be added while the set runs, up to
    ``max_streams`` at once. Without ``hold_open`` the set is done once every stream is done,
    and its last stream cannot be removed; with it (``livecam serve``: sessions come and go)
    the set may have no stream at all and runs until ``stop``. ``apps`` and ``targets()`` are
    snapshots; any thread may call ``add_stream``/``remove_stream``, which block while the
    stream opens or stops (never while another stream works).
    """

    def __init__(self, apps: Sequence[AppT], *, factory: AppFactory[AppT] | None = None,
                 max_streams: int | None = None, hold_open: bool = False) -> None:
        if not apps and not hold_open:
            raise ValueError("a stream set needs at least one stream")
        guis = [a for a in apps if isinstance(a.sink, GuiSink)]
        if len(guis) > 1:
            raise ValueError("at most one stream may show a preview window")
        self._lock = threading.Lock()  # guards _streams, _next_id, _adding
        self._streams: dict[int, AppT] = dict(enumerate(apps))
        self._next_id = len(apps)
        self._adding = 0
        self._factory = factory
        self._max_streams = max_streams
        self._hold_open = hold_open
        self._stopping = threading.Event()
        self._started = threading.Event()
        self._removed: list[RunSummary] = []
        self.commands = _SetCommands(self)
        #: the identities live elsewhere (the thin client's server): an empty local library
        #: is then no sign of a pass-through run, and is not warned about
        self.identities_elsewhere = False
        self.controls: list[ControlSource] = []
        self._gui = guis[0] if guis else None
        self.stop_timings_ms: dict[str, float] = {}

    @property
    def apps(self) -> list[AppT]:
        """The streams now in the set, in id order (a snapshot)."""
        with self._lock:
            return list(self._streams.values())

    def targets(self) -> dict[int, AppT]:
        """The streams now in the set by id (a snapshot)."""
        with self._lock:
            return dict(self._streams)

    def add_stream(self, input_spec: str, output_spec: str, *,
                   endpoints: Endpoints | None = None) -> int:
        """Build, open and start a stream for ``input_spec`` → ``output_spec`` (or for the
        given ``endpoints``, labelled so) beside the running ones; its id. Raises
        :class:`StreamLimitError` when the set is not running, is full or cannot add
        streams, the factory's ``UsageError``/``ConfigError`` for specs
        it cannot run, and what opening raised (the stream is then freed)."""
        if self._factory is None:
            raise StreamLimitError("this livecam was started without a way to add streams")
        with self._lock:
            if not self._started.is_set() or self._stopping.is_set():
                raise StreamLimitError("livecam is not running streams now (starting or "
                                       "stopping): try again once it runs")
            if (self._max_streams is not None
                    and len(self._streams) + self._adding >= self._max_streams):
                raise StreamLimitError(
                    f"already {len(self._streams) + self._adding} streams, the most "
                    f"advanced.pipeline.max_streams ({self._max_streams}) allows: remove one first")
            k = self._next_id
            self._next_id += 1
            self._adding += 1
        added = False
        try:
            app = self._factory(k, input_spec, output_spec, endpoints)
            if isinstance(app.sink, GuiSink):
                raise StreamLimitError("a stream added while livecam runs cannot show a "
                                       "preview window: send it to virtualcam, file:PATH or null")
            try:
                app.open()
                app.start()
            except BaseException:
                app.stop(timeout_s=0.9)
                raise
            with self._lock:
                stopping = self._stopping.is_set()
                if not stopping:
                    self._streams[k] = app
                    added = True
        finally:
            with self._lock:
                self._adding -= 1
                if not added and self._next_id == k + 1:
                    self._next_id = k  # never seen by anyone: the next add takes it
        if stopping:
            app.stop(timeout_s=0.9)
            raise StreamLimitError("livecam is stopping: the stream was not added")
        log.info("stream %d added: %s -> %s", k, input_spec, output_spec)
        return k

    def remove_stream(self, k: int, timeout_s: float = 0.9) -> RunSummary:
        """Stop stream ``k`` and take it out of the set; its summary. ``KeyError`` when no
        stream ``k`` is in the set; :class:`StreamLimitError` for the last stream of a set
        without ``hold_open`` (that would end livecam: quit does that)."""
        with self._lock:
            if k in self._streams and len(self._streams) == 1 and not self._hold_open:
                raise StreamLimitError(f"stream {k} is the last one: removing it would end "
                                       "livecam (add another first, or quit)")
            app = self._streams.pop(k)
        app.stop(timeout_s=timeout_s)
        summary = app.summary()
        with self._lock:
            self._removed.append(summary)
        log.info("stream %d removed: %s", k, summary.line())
        return summary

    @property
    def state(self) -> RuntimeState:
        """The first stream's runtime state (every stream starts from the same one)."""
        return self.apps[0].state

    @property
    def done(self) -> bool:
        if self._hold_open or self._stopping.is_set():
            return self._stopping.is_set()
        return all(a.done for a in self.apps)

    @property
    def output_error(self) -> BaseException | None:
        """The first stream's output error, if any stream's output failed."""
        return next((a.output_error for a in self.apps if a.output_error is not None), None)

    def start(self) -> None:
        started: list[AppT] = []
        apps = self.apps
        try:
            # every stream opened (models, GPU graphs) before any runs: a stream opening
            # while others run waits for the GIL behind them
            for app in apps:
                started.append(app)
                app.open()
            for app in apps:
                app.start()
            self._started.set()
            for control in self.controls:
                control.start()
        except BaseException:
            self._stopping.set()
            self._stop_all(started, 0.9)
            raise
        if len(apps) > 1:
            log.info("%d streams running", len(apps))
        state = apps[0].state if apps else None
        if (state is not None and state.active_identity is None and not state.identities
                and not self.identities_elsewhere):
            # said once the run is up, so a start-up error stays a single line
            log.warning("no identity in the library: frames pass through unswapped (the "
                        "real face is sent); add one with `livecam identity add NAME PHOTO`")

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until every stream is done (True) or ``timeout_s`` passed (False); on the
        window's thread the preview window is drawn meanwhile."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            pending = [a for a in self.apps if not a.done]
            if self.done:
                return True
            left_s = None if deadline is None else deadline - time.monotonic()
            if left_s is not None and left_s <= 0:
                return False
            step_s = 0.05 if left_s is None else min(left_s, 0.05)
            if not pending:  # held open with no stream running
                self._stopping.wait(step_s)
                continue
            # the window's app draws it while waiting (closing it ends that stream)
            (self._gui if self._gui in pending else pending[0]).wait(step_s)

    def request_stop(self) -> None:
        """Make ``wait`` return (a set held open is then done); the caller then calls
        ``stop``. Any thread, a signal handler included."""
        self._stopping.set()

    def stop(self, timeout_s: float = 0.9, *, exiting: bool = False) -> None:
        """Stop the controls, then every stream in parallel (``exiting``: see
        :meth:`App.stop`). Idempotent."""
        t0 = time.perf_counter_ns()
        self._stopping.set()  # no stream is added from here on
        stop_controls(self.controls)
        t_controls = (time.perf_counter_ns() - t0) / 1e6
        apps = self.apps
        self._stop_all(apps, timeout_s, exiting)
        timings = {"controls": t_controls}
        for app in apps:  # the slowest stream's time per step
            for key, ms in app.stop_timings_ms.items():
                timings[key] = max(timings.get(key, 0.0), ms)
        self.stop_timings_ms = timings

    @staticmethod
    def _stop_all(apps: Sequence[App], timeout_s: float, exiting: bool = False) -> None:
        if not apps:
            return
        if len(apps) == 1:
            apps[0].stop(timeout_s=timeout_s, exiting=exiting)
            return
        threads = [threading.Thread(target=a.stop,
                                    kwargs={"timeout_s": timeout_s, "exiting": exiting},
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
        """Whole-run figures over every stream, removed ones included (counts added, the
        longest wall time)."""
        with self._lock:
            removed = list(self._removed)
        parts = [a.summary() for a in self.apps] + removed
        return combine(parts) if parts else RunSummary(
            wall_s=0.0, captured=0, processed=0, sent=0, repeated=0, dropped=0,
            latency_mean_ms=float("nan"), overloaded_s=0.0)

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
