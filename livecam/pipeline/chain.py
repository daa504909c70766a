"""The pieces of a pipeline split over several threads: stage groups, jobs and workers.

With ``advanced.pipeline.threads: 2`` the scheduler's own thread runs the first group of stages
(analysis) and hands each frame, through a one-item :class:`Mailbox`, to a :class:`StageWorker`
that runs the rest (swap), so frame k+1's analysis overlaps frame k's swap on another core (both
release the GIL in their native code). Every hop holds at most one job, so latency stays bounded
and a slow group drops frames ("latest") or holds its producer back ("block"); one worker per
hop takes jobs in the order they were put, so frames are never reordered.

A :class:`Job` carries the stage groups it was started with, so a frame runs on one consistent
set of stages even while a reload installs new ones, and the runtime state it was started under
(also in its packet), so a command takes effect for every group from the same frame on. An
asynchronous last stage (:class:`~livecam.core.stage.AsyncStage`, the GPU pipeline) is not in
a group: it is the job's ``tail``, which :class:`~livecam.pipeline.inflight.Finisher` drives.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import numpy as np

from livecam.core.handed import FrameCover
from livecam.core.mailbox import Mailbox, MailboxClosed
from livecam.core.metrics import Metrics
from livecam.core.stage import AsyncStage, Stage
from livecam.core.types import Frame, Packet, Unswappable, WithheldFaces

log = logging.getLogger(__name__)

StageGroups = tuple[tuple[Stage, ...], ...]


def split_tail(stages: Sequence[Stage | AsyncStage]
               ) -> tuple[tuple[Stage, ...], AsyncStage | None]:
    """The synchronous stages and the asynchronous last stage (None when there is none).

    Only the last stage may be asynchronous: a frame leaves an async stage on another thread,
    after the stages before it. Raises ValueError for one anywhere else.
    """
    stages = tuple(stages)
    tail = stages[-1] if stages and _is_async(stages[-1]) else None
    body = stages[:-1] if tail is not None else stages
    for stage in body:
        if _is_async(stage):
            raise ValueError(f"stage {stage.name!r} is asynchronous: only the last stage may "
                             "be")
    return body, tail  # type: ignore[return-value]


def _is_async(stage: object) -> bool:
    return isinstance(stage, AsyncStage)


def split_stages(stages: Sequence[Stage], groups: int) -> StageGroups:
    """Split ``stages`` (in order) into exactly ``groups`` contiguous groups, some maybe empty.

    Each of the first ``groups - 1`` stages gets a group of its own and the rest share the last
    one: with analysis + swap and 2 groups that is analysis | swap, the split that puts the two
    GIL-releasing halves of the classic path on two cores. Fewer stages than groups leaves the
    last groups empty (their workers just forward frames), so a reload may change the number
    of stages without restarting threads.
    """
    if groups < 1:
        raise ValueError(f"groups must be at least 1, got {groups}")
    stages = tuple(stages)
    head = [(s,) for s in stages[:groups - 1]]
    rest = stages[groups - 1:]
    out = [*head, rest]
    out += [()] * (groups - len(out))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Job:
    """One frame on its way through the stage groups.

    ``seq`` grows by one per frame the scheduler takes (gaps: frames dropped at a hop).
    ``packet`` is the work so far; ``failed`` means a stage raised and ``packet`` is the frame
    with its faces covered (see :class:`GroupRunner`), which the remaining groups pass on
    untouched. ``groups`` are the stages this frame runs on, fixed when it started, and
    ``tail`` its asynchronous last stage.
    """

    seq: int
    frame: Frame
    packet: Packet
    groups: StageGroups
    failed: bool = False
    tail: AsyncStage | None = None


class GroupRunner:
    """Runs one group of a job's stages, timing each stage; a stage that raises turns the job
    into its frame with every face covered (``failed``) and is logged at most once per
    interval.

    Fail closed: the faces known when the stage raised (found and withheld) are covered by
    ``error_cover`` on the captured frame; when none is known (the analysis itself failed) the
    whole frame is. With ``advanced.swap.unswappable: real`` the frame goes out unswapped. Any
    thread may call ``run``; each stage is only ever run by one thread at a time.
    """

    def __init__(self, metrics: Metrics, error_log_interval_s: float, *,
                 error_cover: FrameCover) -> None:
        self._metrics = metrics
        self._interval_ns = int(error_log_interval_s * 1e9)
        self._last_log_ns: dict[str, int] = {}
        self._lock = threading.Lock()
        self._cover = error_cover
        self._cover_lock = threading.Lock()  # several workers may fail at once
        self.stopping = threading.Event()  # set when the run stops: see ``_log_error``

    def run(self, job: Job, group: int) -> Job:
        if job.failed:
            return job
        packet = job.packet
        for stage in job.groups[group]:
            t0 = time.perf_counter_ns()
            try:
                packet = stage.process(packet)
            except Exception as exc:  # a broken stage must not freeze the camera
                return self.fail(replace(job, packet=packet), stage.name, exc)
            finally:
                self._metrics.record_stage_ns(stage.name, time.perf_counter_ns() - t0)
        return replace(job, packet=packet)

    def fail(self, job: Job, stage_name: str, exc: Exception) -> Job:
        """``job`` after stage ``stage_name`` raised ``exc`` on ``job.packet`` (the packet it
        was given): counted, logged at most once per interval, and turned into the fallback
        packet (``failed``: the captured frame with the faces known so far covered)."""
        self._metrics.count("stage_errors")
        self._log_error(stage_name, exc)
        return replace(job, packet=self._covered(job, job.packet), failed=True)

    def _covered(self, job: Job, known: Packet) -> Packet:
        """The captured frame with the faces of ``known`` (the packet the failing stage was
        given) covered, or all of it when no face was known."""
        out = Packet.from_frame(job.frame, job.packet.state)
        faces = WithheldFaces.concat([WithheldFaces.from_faces(known.faces,
                                                               Unswappable.STAGE_ERROR),
                                      known.withheld])
        with self._cover_lock:
            if len(faces) == 0:
                image = self._cover.cover_frame(job.frame.image_bgr)
            else:
                faces = replace(faces, reasons=np.full(len(faces), Unswappable.STAGE_ERROR,
                                                       np.uint8))
                image = self._cover.cover(job.frame.image_bgr, faces, job.frame.index)
        return out.with_fields(image_bgr=image)

    def _log_error(self, name: str, exc: Exception) -> None:
        if self.stopping.is_set():
            # a stop closes the stages once its threads had their time (it returns within
            # about a second): a frame still inside one then fails on it, and goes nowhere
            log.debug("stage %s failed while the run was stopping (%s: %s)", name,
                      type(exc).__name__, exc)
            return
        now = time.perf_counter_ns()
        with self._lock:
            last = self._last_log_ns.get(name)
            due = last is None or now - last >= self._interval_ns
            if due:
                self._last_log_ns[name] = now
        if due:
            shown = ("unswapped" if self._cover.shows_real_faces
                     else "with its faces covered")
            log.error("stage %s failed (%s: %s); sending the frame %s", name,
                      type(exc).__name__, exc, shown, exc_info=log.isEnabledFor(logging.DEBUG))


T = TypeVar("T")

#: How long a pipeline thread waits for room or for an item before it looks at ``stop`` again.
_POLL_S = 0.05


def newest_items(inbox: Mailbox[T], stop: threading.Event, *,
                 room: Callable[[float], bool] | None = None,
                 each_turn: Callable[[], None] | None = None) -> Iterator[T]:
    """The items of ``inbox`` as a pipeline thread takes them, until ``stop`` is set or the
    inbox closes: each turn first calls ``each_turn`` (commands, a pending reload), then, with
    ``room``, takes an item only once ``room(timeout_s)`` says the next hop has room for it
    (else the inbox keeps the newest meanwhile). Each wait is at most 50 ms, so ``stop`` is
    seen within that. The one loop of the scheduler's thread and of each stage worker."""
    while not stop.is_set():
        if each_turn is not None:
            each_turn()
        if room is not None and not room(_POLL_S):
            continue  # frames in flight at capacity: the inbox keeps the newest
        try:
            item = inbox.get(timeout_s=_POLL_S)
        except MailboxClosed:
            return
        if item is not None:
            yield item


class JobThread:
    """What the threads that pass jobs on share: a daemon thread running ``target`` and the
    ``seq`` of the last job passed on, to wait for (a reload waits until no thread still runs
    the old stages). ``start``/``join``: the scheduler's thread; ``done_seq``/``wait_done``:
    any thread. ``_cond`` guards ``_done_seq`` and whatever else a subclass keeps under it."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self._cond = threading.Condition()
        self._done_seq = -1
        self._thread = threading.Thread(target=target, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        if self._thread.ident is not None:  # not started: a stop while the run was starting
            self._thread.join(max(0.0, timeout_s))

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def done_seq(self) -> int:
        """``seq`` of the last job passed on (-1 before the first)."""
        with self._cond:
            return self._done_seq

    def wait_done(self, seq: int, timeout_s: float) -> bool:
        """Wait until job ``seq`` (or a later one) has been passed on (and, see ``_settled``,
        nothing else is pending); False on timeout or once the thread has ended."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._settled(seq) or not self._thread.is_alive(), timeout_s
            ) and self._settled(seq)

    def _settled(self, seq: int) -> bool:
        """Job ``seq`` is passed on; called holding ``_cond``."""
        return self._done_seq >= seq

    def _mark_done(self, seq: int) -> None:
        with self._cond:
            self._done_seq = max(self._done_seq, seq)
            self._cond.notify_all()


class Finisher(Protocol):
    """What the last group's worker hands its jobs to: the end of the chain
    (:class:`~livecam.pipeline.inflight.Finisher`, named here so this module does not import
    the one built on it)."""

    @property
    def closed(self) -> bool: ...

    def wait_room(self, tail: AsyncStage | None, timeout_s: float) -> bool: ...

    def deliver(self, job: Job, timeout_s: float) -> bool: ...

    def end(self) -> None: ...


class StageWorker(JobThread):
    """A thread that runs stage group ``group`` of every job from ``inbox`` and passes it on:
    into ``outbox`` (the next hop), or, for the last group, to ``finisher`` (which puts the
    packet out, or submits it to the job's asynchronous tail), then calls ``on_put`` (not for
    the last group: the finisher reports those). Closes ``outbox`` (ends ``finisher``) when
    ``inbox`` closes (after passing on the last job) or when ``stop`` is set.
    ``start``/``join``: the scheduler's thread; ``done_seq``/``wait_done``: any thread.
    """

    def __init__(self, *, group: int, inbox: Mailbox[Job], outbox: Mailbox[Job] | None = None,
                 finisher: Finisher | None = None, runner: GroupRunner,
                 stop: threading.Event, on_put: Callable[[], None] | None = None) -> None:
        if (outbox is None) == (finisher is None):
            raise ValueError("a stage worker passes jobs to exactly one of outbox, finisher")
        self.group = group
        self._inbox = inbox
        self._outbox = outbox
        self._finisher = finisher
        self._runner = runner
        self._stop = stop
        self._on_put = on_put
        super().__init__(self._run, f"livecam-pipeline-{group + 1}")

    def _run(self) -> None:
        try:
            finisher = self._finisher
            room = None if finisher is None else (
                lambda timeout_s: finisher.wait_room(self._tail_hint, timeout_s))
            for job in newest_items(self._inbox, self._stop, room=room):
                self._tail_hint = job.tail
                job = self._runner.run(job, self.group)
                if not self._pass_on(job):
                    return
                self._mark_done(job.seq)
                if self._on_put is not None and self._finisher is None:
                    self._on_put()
        finally:
            if self._finisher is not None:
                self._finisher.end()
            if self._outbox is not None:
                self._outbox.close()
            with self._cond:
                self._cond.notify_all()

    _tail_hint: AsyncStage | None = None  # the last job's tail: room is asked for it

    def _pass_on(self, job: Job) -> bool:
        while not self._put(job):
            if self._stop.is_set() or (self._outbox is not None and self._outbox.closed) \
                    or (self._finisher is not None and self._finisher.closed):
                return False
        return True

    def _put(self, job: Job) -> bool:
        if self._finisher is not None:
            return self._finisher.deliver(job, timeout_s=0.1)
        assert self._outbox is not None
        return self._outbox.put(job, timeout_s=0.1)
