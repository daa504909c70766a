"""The pipeline thread: takes the newest frame, runs the stages, hands the result to output."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from livecam.control.commands import Command, CommandQueue, Quit
from livecam.pipeline.mailbox import Mailbox, MailboxClosed
from livecam.pipeline.metrics import Metrics
from livecam.pipeline.stage import Stage
from livecam.types import Frame, Packet, RuntimeState

log = logging.getLogger(__name__)


class Scheduler:
    """Runs ``stages`` in order on each frame from ``inbox`` and puts the packet in ``outbox``.

    Between frames it drains ``commands`` and applies them to the runtime state, so a command
    takes effect from the next frame on. A stage that raises does not stop the run: the frame is
    sent unswapped and the error is logged at most once per ``error_log_interval_s``.
    Frames are processed one at a time, in capture order; nothing here can reorder them.
    """

    def __init__(self, *, stages: Sequence[Stage], inbox: Mailbox[Frame],
                 outbox: Mailbox[Packet], commands: CommandQueue, metrics: Metrics,
                 state: RuntimeState, error_log_interval_s: float = 5.0,
                 on_quit: Callable[[], None] | None = None) -> None:
        self._stages = list(stages)
        self._inbox = inbox
        self._outbox = outbox
        self._commands = commands
        self._metrics = metrics
        self._state = state
        self._error_log_interval_ns = int(error_log_interval_s * 1e9)
        self._last_error_log_ns: dict[str, int] = {}
        self._on_quit = on_quit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="livecam-pipeline", daemon=True)
        self._state_lock = threading.Lock()

    @property
    def state(self) -> RuntimeState:
        """The runtime state the next frame will be processed under (any thread may read)."""
        with self._state_lock:
            return self._state

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end without waiting for it (see ``stop``)."""
        self._stop.set()

    def stop(self, join_timeout_s: float = 0.5) -> None:
        self._stop.set()
        self._thread.join(join_timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def apply_commands(self) -> None:
        for command in self._commands.drain():
            self._apply(command)

    def _apply(self, command: Command) -> None:
        if isinstance(command, Quit):
            log.info("quit requested")
            self._stop.set()
            if self._on_quit is not None:
                self._on_quit()
            return
        with self._state_lock:
            self._state = command.apply(self._state)
        log.info("command %s", command)

    def process(self, frame: Frame) -> Packet:
        """Run every stage on ``frame`` (pipeline thread only)."""
        packet = Packet.from_frame(frame, self._state)
        for stage in self._stages:
            t0 = time.perf_counter_ns()
            try:
                packet = stage.process(packet)
            except Exception as exc:  # a broken stage must not freeze the camera
                self._metrics.count("stage_errors")
                self._log_stage_error(stage.name, exc)
                return Packet.from_frame(frame, self._state)
            finally:
                self._metrics.record_stage_ns(stage.name, time.perf_counter_ns() - t0)
        return packet

    def _log_stage_error(self, name: str, exc: Exception) -> None:
        now = time.perf_counter_ns()
        last = self._last_error_log_ns.get(name)
        if last is None or now - last >= self._error_log_interval_ns:
            self._last_error_log_ns[name] = now
            log.error("stage %s failed (%s: %s); sending the frame unswapped", name,
                      type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG))

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.apply_commands()
                try:
                    frame = self._inbox.get(timeout_s=0.05)
                except MailboxClosed:
                    break
                if frame is None:
                    continue
                packet = self.process(frame)
                self._metrics.count("processed")
                while not self._outbox.put(packet, timeout_s=0.1):
                    if self._stop.is_set() or self._outbox.closed:
                        return
        finally:
            self._outbox.close()
