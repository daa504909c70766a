"""The neural swap with its model on a remote engine (Triton), several frames in flight.

:class:`RemoteSwapStage` runs the steps of :class:`~livecam.swap.neural.NeuralSwapStage`
(the same plan, alignment, feeds, paste-back and covers: it drives that stage's own methods)
as an :class:`~livecam.core.stage.AsyncStage`: ``submit`` plans the frame, aligns its faces
and sends the model requests without waiting; ``collect`` takes the answers back in submit
order and pastes them. So the network round trip of frame k overlaps the analysis, alignment
and requests of frames k+1, k+2, ... (up to ``capacity``, ``advanced.engine.triton_in_flight``); the
runtime's :class:`~livecam.pipeline.inflight.Finisher` keeps the order and asks for room
before it takes a frame, so the frame taken is the newest.

Fail closed exactly as the synchronous stage: a request that fails or misses its deadline
(:class:`~livecam.core.errors.EngineUnavailableError` from the engine's ``result``) covers
every face of that frame meant to be swapped (``NeuralSwapStage.finish_down``); the engine
reconnects in the background as before.

Threads: ``submit`` on the pipeline thread (or the last stage worker), ``collect`` on the
runtime's collector thread (the only one that touches the covers and the paste-back);
``open``/``close`` on the thread that starts or reloads the run, after both have stopped.
"""

from __future__ import annotations

import collections
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from livecam.core.errors import EngineUnavailableError
from livecam.core.types import Packet
from livecam.engines.protocol import RequestEngine
from livecam.swap.neural import NeuralSwapStage, SwapPlan


@dataclass(frozen=True)
class _InFlight:
    """One submitted packet: ``plan`` (the packet itself when there is nothing to do),
    the alignment ``matrices`` (N, 2, 3) of its picked faces and its model ``requests`` (one
    per engine call, in order; none when nothing goes to the model), sent at ``sent_ns``."""

    plan: SwapPlan | Packet
    matrices: np.ndarray | None = None
    requests: tuple[Future[dict[str, np.ndarray]], ...] = ()
    sent_ns: int = 0


class RemoteSwapStage:
    """``stage`` (a neural swap whose model engine takes several requests:
    :class:`~livecam.engines.protocol.RequestEngine`) with up to ``capacity`` frames in
    flight. See the module docstring."""

    name = "swap"
    backend = "triton"

    def __init__(self, stage: NeuralSwapStage, *, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        engine = stage.model.engine
        if not isinstance(engine, RequestEngine):
            raise TypeError(f"{type(engine).__name__} takes one request at a time: a remote "
                            "swap needs an engine with submit/result")
        self.stage = stage
        self._engine: RequestEngine = engine
        self._capacity = capacity
        self._cond = threading.Condition()
        self._queue: collections.deque[_InFlight] = collections.deque()

    @property
    def capacity(self) -> int:
        return self._capacity

    def open(self) -> None:
        self.stage.open()

    def close(self) -> None:
        with self._cond:
            self._queue.clear()
        self.stage.close()

    def __enter__(self) -> RemoteSwapStage:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> dict[str, Any] | None:
        """The engine's link state, requests in flight included (any thread)."""
        return self.stage.health()

    # -- pipeline thread ------------------------------------------------------------------------

    def submit(self, packet: Packet) -> None:
        item = self._send(self.stage.plan(packet))
        with self._cond:
            self._queue.append(item)
            self._cond.notify_all()

    def _send(self, plan: SwapPlan | Packet) -> _InFlight:
        if isinstance(plan, Packet) or plan.down or not plan.picked:
            return _InFlight(plan)
        assert plan.kps_xy is not None and plan.latents is not None
        model = self.stage.model
        crops, matrices = model.align(plan.packet.image_bgr, plan.kps_xy)
        feeds = model.crop_feeds(crops, plan.latents)
        sent_ns = time.perf_counter_ns()
        requests = tuple(self._engine.submit(f) for f in feeds)
        return _InFlight(plan, matrices, requests, sent_ns)

    # -- collector thread -----------------------------------------------------------------------

    def collect(self, timeout_s: float) -> Packet | None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._queue), timeout_s):
                return None
            head = self._queue[0]
        preds: list[np.ndarray] = []
        down = False
        try:
            for request in head.requests:
                outputs = self._engine.result(request, sent_ns=head.sent_ns,
                                              wait_s=max(0.0, deadline - time.monotonic()))
                if outputs is None:
                    return None  # not answered yet, still within its deadline
                preds.append(outputs[self.stage.model.output_name])
        except EngineUnavailableError:
            down = True  # failed or late: that frame's faces are covered
        except BaseException:
            self._pop(head)  # the runtime counts this packet as collected (its fallback)
            raise
        if not self._pop(head):
            return None  # closed meanwhile
        plan = head.plan
        if isinstance(plan, Packet):
            return plan
        if down:
            return self.stage.finish_down(plan)
        if not head.requests:
            return self.stage.finish(plan)
        return self.stage.finish(plan, self.stage.model.faces_from(preds), head.matrices)

    def _pop(self, head: _InFlight) -> bool:
        """Take ``head`` off the queue; False if it is not there any more (closed)."""
        with self._cond:
            if not self._queue or self._queue[0] is not head:
                return False
            self._queue.popleft()
            return True
