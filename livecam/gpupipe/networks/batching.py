"""Calls of several threads served in batches by the callers themselves (no thread of its own).

:class:`Batcher` serves the streams' follower calls of
:class:`~livecam.gpupipe.networks.shared.SharedFaceNetworks`: a caller that finds nothing running
runs every call pending then, its own among them, so a lone caller waits for nothing but its
own work; calls that come while a batch runs wait for it to end, and the first of their callers
to wake runs the next batch with all of them.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from livecam.analysis.mesh import MeshResult
from livecam.analysis.roi import Roi
from livecam.gpupipe.networks.calls import Detection


class Request:
    """One stream's call: detect its frame and/or run the mesh on ``rois`` of it. The batch
    fills ``found`` (detections, when asked) and ``meshes``, or ``error``. ``picture``: the
    frame is a picture built on the device (an edge strip), in the pictures' stacks."""

    __slots__ = ("detect", "done", "error", "found", "meshes", "picture", "rois", "size", "slot",
                 "uploaded")

    def __init__(self, slot: int, size: tuple[int, int], *, detect: bool,
                 rois: Sequence[Roi], uploaded: Any, picture: bool = False) -> None:
        self.slot = slot
        self.picture = picture
        self.size = size
        self.detect = detect
        self.rois = rois
        self.uploaded = uploaded  # CUDA event: the frame is in its place (None on a CPU)
        self.found: list[Detection] | None = None
        self.meshes: list[MeshResult | None] = []
        self.error: BaseException | None = None
        self.done = False


def upload_events(requests: Sequence[Request]) -> list[Any]:
    """The distinct ``uploaded`` events of ``requests`` (by identity, in order; None left
    out): what a batch waits on before it reads their frames. A frame's edge-strip pictures
    all carry one event (the pictures built, :meth:`~livecam.gpupipe.networks.client.
    StreamFaceNetworks.detect_strips`): waiting on it once per picture made a batch of 16
    streams' frames and strips about a hundred waits, each a torch call that lets go of the
    GIL and queues to take it back on the one thread every stream's batch runs on. (16
    streams on an H100 ran no faster for it, within the runs' spread: docs/performance.md.)"""
    seen: dict[int, Any] = {}
    for r in requests:
        if r.uploaded is not None:
            seen.setdefault(id(r.uploaded), r.uploaded)
    return list(seen.values())


class Batcher:
    """Requests served in batches by their own callers: one that finds nothing running runs
    every request pending then (its own among them); the others wait, and when a batch ends
    the first of them to wake with its request not done runs the next batch. ``sizes`` keeps
    the requests in each of the last batches, ``spans`` when each ran (``time.perf_counter``
    start and end: how much of the time the streams' one batch at a time takes)."""

    def __init__(self, run: Callable[[list[Request]], None]) -> None:
        self._run = run
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        self._arrived = threading.Condition(lock)  # for wait_for_pending
        self._pending: list[Request] = []
        self._busy = False
        self.sizes: collections.deque[int] = collections.deque(maxlen=1000)
        self.spans: collections.deque[tuple[float, float]] = collections.deque(maxlen=1000)

    def call(self, request: Request) -> None:
        """Serve ``request`` (in this thread or another's batch); raises its error."""
        self.call_all((request,))

    def call_all(self, requests: Sequence[Request]) -> None:
        """Serve ``requests`` in one batch (they are queued at once); raises the first
        error."""
        with self._cond:
            self._pending.extend(requests)
            self._arrived.notify_all()
            while not all(r.done for r in requests):
                if self._busy:
                    self._cond.wait()
                    continue
                batch, self._pending = self._pending, []
                self._busy = True
                self._cond.release()
                started = time.perf_counter()
                try:
                    self.sizes.append(len(batch))
                    self._run(batch)
                except BaseException as exc:  # each caller raises it, none waits forever
                    for r in batch:
                        r.error = r.error or exc
                finally:
                    self.spans.append((started, time.perf_counter()))
                    for r in batch:
                        r.done = True
                    self._cond.acquire()
                    self._busy = False
                    self._cond.notify_all()
        for request in requests:
            if request.error is not None:
                raise request.error

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """No batch runs inside (graph capture on the batches' streams)."""
        with self._cond:
            while self._busy:
                self._cond.wait()
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def wait_for_pending(self, n: int, *, timeout_s: float) -> bool:
        """Wait until ``n`` calls wait for the next batch (False after ``timeout_s``)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self._pending) >= n, timeout_s)
