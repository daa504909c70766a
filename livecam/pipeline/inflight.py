"""The end of the stage chain: finished packets out in frame order, an asynchronous last stage
driven with several frames in flight.

A :class:`Finisher` is where a :class:`~livecam.pipeline.chain.Job` leaves the stages. A job
without an asynchronous tail goes straight into ``outbox`` (the CPU path: exactly as before).
A job whose last stage is an :class:`~livecam.core.stage.AsyncStage` (the GPU pipeline) is
submitted to it and queued; a collector thread takes the results back in submit order
(``AsyncStage.collect``) and puts them in ``outbox``. Latency stays bounded: at most
``tail.capacity`` jobs are in flight, and the pipeline thread asks for room *before* it takes
the next frame (:meth:`Finisher.wait_room`), so the frame it takes is the newest one.

A tail's error on a frame (at submit or at collect) turns that frame into the stage chain's
fallback packet (:meth:`~livecam.pipeline.chain.GroupRunner.fail`), in its place in the order.
Threads: ``deliver``/``wait_room``/``end`` from the thread that finishes jobs (the pipeline
thread, or the last stage worker); the collector is the finisher's own thread; ``in_flight``
and ``wait_done`` from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from livecam.core.mailbox import Mailbox
from livecam.core.metrics import Metrics
from livecam.core.stage import AsyncStage
from livecam.core.types import Packet
from livecam.pipeline.chain import GroupRunner, Job, JobThread

log = logging.getLogger(__name__)

_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class _Queued:
    """A job in flight: ``tail`` is the stage that will return its packet (None: the job is
    finished already and only waits for the ones before it), ``t_submit_ns`` when it went in."""

    job: Job
    tail: AsyncStage | None
    t_submit_ns: int


class Finisher(JobThread):
    """Puts finished jobs' packets in ``outbox`` in order; drives asynchronous tails.

    ``on_put`` is called after each packet is put (the scheduler counts it as processed).
    ``stop`` ends the collector within about ``_POLL_S``.
    """

    def __init__(self, *, outbox: Mailbox[Packet], runner: GroupRunner, metrics: Metrics,
                 stop: threading.Event, on_put: Callable[[], None]) -> None:
        self._outbox = outbox
        self._runner = runner
        self._metrics = metrics
        self._stop = stop
        self._on_put = on_put
        super().__init__(self._collect_loop, "livecam-collect")
        self._queue: deque[_Queued] = deque()  # under _cond
        self._ended = False

    # -- the finishing thread ---------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._outbox.closed

    @property
    def in_flight(self) -> int:
        """Jobs handed over and not yet in ``outbox``."""
        with self._cond:
            return len(self._queue)

    def wait_room(self, tail: AsyncStage | None, timeout_s: float) -> bool:
        """Wait until a job for ``tail`` may be handed over: fewer than ``tail.capacity`` jobs
        in flight (always True without a tail). False after ``timeout_s`` or on stop."""
        if tail is None:
            return True
        capacity = max(1, tail.capacity)
        with self._cond:
            return self._cond.wait_for(
                lambda: len(self._queue) < capacity or self._stop.is_set(), timeout_s
            ) and len(self._queue) < capacity

    def deliver(self, job: Job, timeout_s: float) -> bool:
        """Hand over ``job`` (after its synchronous stages). False if it could not be within
        ``timeout_s`` (no room in flight, or a blocking ``outbox`` full) or the run is
        stopping: call again with the same job."""
        tail = job.tail if not job.failed else None
        with self._cond:
            queued = bool(self._queue)
        if job.tail is None and not queued:
            if not self._outbox.put(job.packet, timeout_s=timeout_s):
                return False
            self._mark_done(job.seq)
            self._on_put()
            return True
        if tail is not None and not self.wait_room(tail, timeout_s):
            return False
        t0 = time.perf_counter_ns()
        if tail is not None:
            try:
                tail.submit(job.packet)
            except Exception as exc:  # the frame goes out as the chain's fallback, in order
                job, tail = self._runner.fail(job, tail.name, exc), None
        with self._cond:
            self._queue.append(_Queued(job, tail, t0))
            self._cond.notify_all()
        return True

    def end(self) -> None:
        """No more jobs: the collector puts what is in flight, then closes ``outbox``."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def _settled(self, seq: int) -> bool:
        """``wait_done``: job ``seq`` (or a later one) is in ``outbox`` and nothing is in
        flight."""
        return self._done_seq >= seq and not self._queue

    # -- the collector thread ---------------------------------------------------------------

    def _collect_loop(self) -> None:
        try:
            while not self._stop.is_set():
                with self._cond:
                    self._cond.wait_for(lambda: bool(self._queue) or self._ended
                                        or self._stop.is_set(), _POLL_S)
                    if not self._queue:
                        if self._ended:
                            return
                        continue
                    head = self._queue[0]
                packet = self._result(head)
                if packet is None:
                    continue  # not ready yet
                while not self._outbox.put(packet, timeout_s=0.1):
                    if self._stop.is_set() or self._outbox.closed:
                        return
                with self._cond:
                    self._queue.popleft()
                self._mark_done(head.job.seq)
                self._on_put()
        finally:
            self._outbox.close()
            with self._cond:
                self._cond.notify_all()

    def _result(self, head: _Queued) -> Packet | None:
        """The head job's packet, or None while its tail is still working."""
        if head.tail is None:
            return head.job.packet
        try:
            packet = head.tail.collect(_POLL_S)
        except Exception as exc:  # that frame's work failed: the fallback, in its place
            packet = self._runner.fail(head.job, head.tail.name, exc).packet
        if packet is not None:
            self._metrics.record_stage_ns(head.tail.name,
                                          time.perf_counter_ns() - head.t_submit_ns)
            # the stage's own split of that frame (the GPU's time), when it keeps one
            for part, ms in (getattr(head.tail, "last_timings_ms", None) or {}).items():
                if ms == ms:  # not NaN (no GPU clock on a CPU)
                    self._metrics.record_stage_ns(f"{head.tail.name}.{part}", int(ms * 1e6))
        return packet
