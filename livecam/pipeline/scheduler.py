"""The pipeline thread(s): take the newest frame, run the stages, hand the result to output."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from livecam.core.commands import (
    Command,
    CommandQueue,
    ControlHooks,
    EffectCommand,
    Quit,
    Ticket,
)
from livecam.core.handed import FrameCover
from livecam.core.mailbox import Mailbox, Policy
from livecam.core.metrics import Metrics
from livecam.core.stage import AnyStage
from livecam.core.types import Frame, Packet, RuntimeState
from livecam.pipeline.chain import (
    GroupRunner,
    Job,
    StageGroups,
    StageWorker,
    newest_items,
    split_stages,
    split_tail,
)
from livecam.pipeline.inflight import Finisher

log = logging.getLogger(__name__)

class Scheduler:
    """Runs ``stages`` in order on each frame from ``inbox`` and puts the packet in ``outbox``.

    Between frames it drains ``commands`` and applies them to the runtime state, so a command
    takes effect from the next frame on. A stage that raises does not stop the run: the frame is
    sent with its faces covered by ``error_cover`` (the whole frame when no face is known yet;
    unswapped only when that cover is ``real``) and the error is logged at most once per
    ``error_log_interval_s``.
    Frames are processed one at a time per thread, in capture order; nothing here can reorder
    them.

    ``threads`` > 1 splits the stages into that many groups (see
    :func:`~livecam.pipeline.chain.split_stages`: analysis | swap for 2) run by a chain of
    threads joined by one-item mailboxes with ``hop_policy`` ("latest": a slow group drops
    frames, counted in the ``dropped_pipeline`` counter; "block": nothing dropped, for files).
    Commands are still applied in one place, the first thread, between two frames, and each
    frame carries its state in its packet, so every group sees a command from the same frame on.

    An asynchronous last stage (:class:`~livecam.core.stage.AsyncStage`: the GPU pipeline)
    keeps up to its ``capacity`` frames in flight; a collector thread
    (:class:`~livecam.pipeline.inflight.Finisher`) puts them out in order. The thread that
    feeds it asks for room before it takes a frame, so the frame it takes is the newest.
    """

    def __init__(self, *, stages: Sequence[AnyStage], inbox: Mailbox[Frame],
                 outbox: Mailbox[Packet], commands: CommandQueue, metrics: Metrics,
                 state: RuntimeState, error_log_interval_s: float = 5.0,
                 on_quit: Callable[[], None] | None = None,
                 hooks: ControlHooks | None = None, threads: int = 1,
                 hop_policy: Policy = "latest", error_cover: FrameCover) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self._stages = list(stages)
        body, self._tail = split_tail(self._stages)
        self._groups: StageGroups = split_stages(body, threads)
        self._pending_stages: list[AnyStage] | None = None
        self._hooks = hooks
        self._inbox = inbox
        self._outbox = outbox
        self._commands = commands
        self._metrics = metrics
        self._state = state
        self._runner = GroupRunner(metrics, error_log_interval_s,
                                   error_cover=error_cover)
        self._on_quit = on_quit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="livecam-pipeline", daemon=True)
        self._state_lock = threading.Lock()
        self._seq = -1
        self._next_index = 0  # Frame.index after the last frame taken: the next state's first
        # hop k carries jobs from group k to group k + 1; worker k runs group k + 1
        self._hops: list[Mailbox[Job]] = [Mailbox(policy=hop_policy)
                                          for _ in range(threads - 1)]
        self._finisher = Finisher(outbox=outbox, runner=self._runner, metrics=metrics,
                                  stop=self._stop, on_put=lambda: self._passed_on(True))
        self._workers = [
            StageWorker(group=k, inbox=self._hops[k - 1],
                        outbox=self._hops[k] if k < threads - 1 else None,
                        finisher=self._finisher if k == threads - 1 else None,
                        runner=self._runner, stop=self._stop,
                        on_put=lambda: self._passed_on(False))
            for k in range(1, threads)
        ]

    @property
    def state(self) -> RuntimeState:
        """The runtime state the next frame will be processed under (any thread may read)."""
        with self._state_lock:
            return self._state

    @property
    def threads(self) -> int:
        """How many threads run the stages (1 + the workers)."""
        return 1 + len(self._workers)

    @property
    def dropped(self) -> int:
        """Frames dropped between stage groups so far (0 with one thread or "block")."""
        return sum(hop.dropped for hop in self._hops)

    @property
    def in_flight(self) -> int:
        """Frames handed to the asynchronous last stage and not yet put out."""
        return self._finisher.in_flight

    def start(self) -> None:
        self._finisher.start()
        for worker in self._workers:
            worker.start()
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the threads to end without waiting for them (see ``stop``)."""
        self._stop.set()
        self._runner.stopping.set()
        for hop in self._hops:
            hop.close()

    def stop(self, join_timeout_s: float = 0.5) -> None:
        """End every pipeline thread, waiting ``join_timeout_s`` for all of them together."""
        deadline = time.monotonic() + join_timeout_s
        self.request_stop()
        if self._thread.ident is not None:  # not started: a stop while the run was starting
            self._thread.join(max(0.0, deadline - time.monotonic()))
        for worker in self._workers:
            worker.join(deadline - time.monotonic())
        self._finisher.join(deadline - time.monotonic())

    @property
    def alive(self) -> bool:
        return (self._thread.is_alive() or any(w.alive for w in self._workers)
                or self._finisher.alive)

    def replace_stages(self, stages: Sequence[AnyStage]) -> None:
        """Install already-opened ``stages`` before the next frame (any thread may call; a
        reload opens them off the pipeline thread). The pipeline thread closes the old ones
        once no frame in flight still uses them."""
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
            pending = self._pending_stages
        if pending is None:
            return
        if not self._wait_until_idle():
            return  # stopping: close_stages closes old and pending alike
        with self._state_lock:
            pending, self._pending_stages = self._pending_stages, None
        if pending is None:
            return
        old, self._stages = self._stages, pending
        body, self._tail = split_tail(pending)
        self._groups = split_stages(body, self.threads)
        for stage in old:
            if stage not in pending:
                stage.close()
        log.info("stages now: %s", ", ".join(s.name for s in pending))

    def _wait_until_idle(self) -> bool:
        """Wait until every frame this thread started has left the workers and the
        asynchronous last stage, so old stages are closed only when no thread runs them (one
        pipeline bubble per reload). False if the run is stopping."""
        seq = self._seq
        for worker in self._workers:
            # a frame dropped at a hop never reaches the worker; a later one (seq too) does
            while not worker.wait_done(seq, 0.05):
                if self._stop.is_set() or not worker.alive:
                    return False
                if worker.done_seq < seq and self._hops[worker.group - 1].closed:
                    return False
        while seq >= 0 and not self._finisher.wait_done(seq, 0.05):
            if self._stop.is_set() or not self._finisher.alive or self._finisher.closed:
                return False
        return True

    def apply_commands(self) -> None:
        for command, ticket in self._commands.drain():
            self._apply(command, ticket)

    def _apply(self, command: Command, ticket: Ticket | None = None) -> None:
        error = None
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
                    error = str(exc)
            with self._state_lock:
                before = self._state.active_identity
                self._state = command.apply(self._state)
                after = self._state.active_identity
            if after != before:  # the name, not StepIdentity(step=1): what a user chose
                log.info("identity now %s (%s)", "none" if after is None else repr(after),
                         type(command).__name__)
            else:
                log.info("command %s", command)
        if ticket is not None:
            ticket.resolve(self._state, frames_sent=self._metrics.counter("sent"),
                           first_frame_index=self._next_index, error=error)

    def _start_job(self, frame: Frame) -> Job:
        self._seq += 1
        self._next_index = frame.index + 1
        return Job(seq=self._seq, frame=frame, packet=Packet.from_frame(frame, self._state),
                   groups=self._groups, tail=self._tail)

    def _passed_on(self, finished: bool) -> None:
        if finished:
            self._metrics.count("processed")
        self._metrics.set_counter("dropped_pipeline", self.dropped)

    def _each_turn(self) -> None:
        self._install_pending_stages()
        self.apply_commands()

    def _run(self) -> None:
        first: Mailbox[Job] | None = self._hops[0] if self._hops else None
        try:
            room = None if first is not None else (
                lambda timeout_s: self._finisher.wait_room(self._tail, timeout_s))
            for frame in newest_items(self._inbox, self._stop, room=room,
                                      each_turn=self._each_turn):
                job = self._runner.run(self._start_job(frame), 0)
                if first is None:
                    while not self._finisher.deliver(job, timeout_s=0.1):
                        if self._stop.is_set() or self._finisher.closed:
                            return
                    continue
                while not first.put(job, timeout_s=0.1):
                    if self._stop.is_set() or first.closed:
                        return
                self._passed_on(False)
        finally:
            # the finisher closes ``outbox`` once what is in flight is out; with workers, the
            # last one ends it after passing on what it holds
            if first is not None:
                first.close()
            else:
                self._finisher.end()
