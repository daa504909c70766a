"""The pipeline thread: takes the newest frame, runs the stages, hands the result to output."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from livecam.control.commands import (
    Command,
    CommandQueue,
    ControlHooks,
    EffectCommand,
    Quit,
    Ticket,
)
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
                 on_quit: Callable[[], None] | None = None,
                 hooks: ControlHooks | None = None) -> None:
        self._stages = list(stages)
        self._pending_stages: list[Stage] | None = None
        self._hooks = hooks
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

    def replace_stages(self, stages: Sequence[Stage]) -> None:
        """Install already-opened ``stages`` before the next frame (any thread may call; a
        reload opens them off the pipeline thread). The pipeline thread closes the old ones."""
        with self._state_lock:
            stale, self._pending_stages = self._pending_stages, list(stages)
        for stage in stale or ():
            stage.close()

    def close_stages(self) -> None:
        """Close the current and any not-yet-installed stages (idempotent; after ``stop``)."""
        with self._state_lock:
            stages = self._stages + (self._pending_stages or [])
            self._pending_stages = None
        for stage in stages:
            stage.close()

    def _install_pending_stages(self) -> None:
        with self._state_lock:
            pending, self._pending_stages = self._pending_stages, None
        if pending is None:
            return
        old, self._stages = self._stages, pending
        for stage in old:
            if stage not in pending:
                stage.close()
        log.info("stages now: %s", ", ".join(s.name for s in pending))

    def apply_commands(self) -> None:
        for command, ticket in self._commands.drain():
            self._apply(command, ticket)

    def _apply(self, command: Command, ticket: Ticket | None = None) -> None:
        if isinstance(command, Quit):
            log.info("quit requested")
            self._stop.set()
            if self._on_quit is not None:
                self._on_quit()
        else:
            if isinstance(command, EffectCommand) and self._hooks is not None:
                try:
                    command.perform(self._hooks)
                except Exception as exc:  # a failed snapshot must not stop the pipeline
                    log.error("command %s failed: %s", command, exc)
            with self._state_lock:
                self._state = command.apply(self._state)
            log.info("command %s", command)
        if ticket is not None:
            ticket.resolve(self._state, self._metrics.counter("sent"))

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
                self._install_pending_stages()
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
