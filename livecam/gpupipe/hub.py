"""The GPU swap of every stream of one process: one generator, one ring of slots, ticks that
batch the faces of all streams that have a frame ready.

Each stream's :class:`~livecam.gpupipe.stage.GpuSwapStage` hands over a :class:`SwapRequest`
(its frame in one of its own pinned buffers, the faces' 5 keypoints and latents). The hub
launches a tick whenever a slot of the ring is free and requests wait, taking the oldest
waiting request of each stream (one frame per stream per tick, so a stream's frames stay in
order), as many as the slot holds: with one stream every frame is a tick of its own and up
to ``slots`` ticks overlap on the GPU; with many streams under load, requests gather while
the slots are busy and go out together, so the generator sees the faces of many streams in
one call. A collector thread waits for the ticks in the order they were launched, marks their
requests done, and launches what waits. A request never waits for another stream's consumer:
its frame comes back into its own stream's buffer.

Frame sizes: each size has its own ring (captured in :meth:`GpuSwapHub.prepare` before the
output starts, or on the first frame of a new size, logged). Identities: the hub turns names
into the generator's latents (embeddings cached on disk, latents in memory), shared by the
streams, and made on a worker thread ahead of use (a face whose identity is not ready is
covered, not waited for: :class:`~livecam.swap.prepared.PreparedIdentities`). Lifecycle:
streams ``acquire`` (the first opens the engine) and ``release`` (the last closes it). Any
thread may call the public methods.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from livecam.core.errors import IdentityError
from livecam.core.shared_open import SharedOpen
from livecam.core.types import Unswappable
from livecam.gpupipe.request import SwapRequest, tick_rows
from livecam.gpupipe.slots import FrameBuffers, SlotShape
from livecam.swap.arcface import EmbeddingFn, embedding_of
from livecam.swap.prepared import PreparedIdentities

log = logging.getLogger(__name__)

class GpuSwapHub:
    """The shared GPU swap (see the module docstring).

    ``generator``: an unopened torch-side engine factory's product (``open``, ``close``,
    ``device``, ``inputs``, ``outputs``, ``cuda_graphs``, ``run_torch``), opened by the first
    :meth:`acquire`. ``emap``: () -> the model's (D, D) embedding map (read at open).
    ``source_embedding(name)``: an identity's (512,) ArcFace embedding, None or
    :class:`IdentityError` when it cannot be had. ``n_streams`` streams of up to ``max_faces``
    faces; a tick takes up to ``frames_per_call`` frames (default ``n_streams``) and
    ``faces_per_call`` faces (default ``n_streams`` x ``max_faces``): what is allocated,
    compiled and captured is sized by those two (:mod:`livecam.gpupipe.shapes` sets them from
    the config, whatever the number of streams); ``slots`` ticks in flight (also each
    stream's bound). ``window_px``: the paste
    window; ``window_large_px``: a larger one for the ticks with a face the first cannot hold
    (0: none). ``require_models()`` runs
    first in :meth:`acquire` (a missing model raises :class:`ModelError` naming the fetch).
    ``model_options``: the swap geometry of the model's manifest (``crop_px``, ``template``,
    ``mean``, ``std``), ``pixel_boost_px`` and ``dynamic_faces`` (see
    :func:`~livecam.gpupipe.build.build_program`).
    ``enhancer``: an unopened torch-side engine of the face enhancer (``open``/``close``,
    like ``generator``; no CUDA graphs of its own) run with ``enhancer_options``, or None.
    ``hands``: frames carry hand masks (``SwapRequest.hands``) the paste-back keeps in front.
    Faces carry their loops (``SwapRequest.keep_xy``): the streamer's eyes and mouth where
    kept, and the outline the paste-back stays inside.
    ``collector_thread=False`` (tests) leaves finishing ticks to :meth:`collect_next`.
    ``compile_dir``: compile the swap's parts around the generator, their code cached there
    (see :class:`~livecam.gpupipe.program.SwapProgram`; None: as written). ``fit_check(width,
    height)``: raises when the memory plan of a frame size does not fit (see
    :meth:`check_fits`; None: no check).
    """

    def __init__(self, generator: Any, *, emap: Callable[[], np.ndarray],
                 source_embedding: EmbeddingFn, n_streams: int, max_faces: int,
                 slots: int = 3, use_graphs: bool = True, window_px: int = 640,
                 window_large_px: int = 0,
                 colour_blur_px: float = 0.0, model_options: dict[str, Any] | None = None,
                 require_models: Callable[[], object] | None = None,
                 missing_log_interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 collector_thread: bool = True, enhancer: Any = None,
                 enhancer_options: Any = None, hands: bool = False,
                 compile_dir: Path | None = None,
                 frames_per_call: int | None = None,
                 faces_per_call: int | None = None,
                 fit_check: Callable[[int, int], None] | None = None) -> None:
        self.generator = generator
        self._fit_check = fit_check
        self.compile_dir = compile_dir
        self.enhancer = enhancer
        self.enhancer_options = enhancer_options
        self.hands = hands
        self._emap_fn = emap
        self.source_embedding = source_embedding
        self.n_streams = max(1, n_streams)
        self.max_faces = max_faces
        self.frames_per_call = max(1, frames_per_call or self.n_streams)
        self.faces_per_call = max(max_faces, faces_per_call or self.n_streams * max_faces, 1)
        self.slots = slots
        self.use_graphs = use_graphs
        self.window_px = window_px
        #: the paste windows a tick may use: the usual one, and a larger one for faces that
        #: it cannot hold (0 or not larger: none)
        self.windows_px = (window_px,) + ((window_large_px,) if window_large_px > window_px
                                          else ())
        self.colour_blur_px = colour_blur_px
        self.model_options = dict(model_options or {})
        self.require_models = require_models
        self.missing_log_interval_s = missing_log_interval_s
        self._clock = clock
        self._collector_thread = collector_thread
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._users = SharedOpen(self._lock)
        self._program: Any = None
        self._emap: np.ndarray | None = None
        self._rings: dict[tuple[int, int], Any] = {}
        self._pending: collections.deque[SwapRequest] = collections.deque()
        self._launched: collections.deque[tuple[Any, list[SwapRequest]]] = collections.deque()
        self._collector: threading.Thread | None = None
        self._stopping = False
        self._latents: PreparedIdentities[np.ndarray] = PreparedIdentities(
            self._latent_of, retry_s=missing_log_interval_s, clock=clock)
        self.graph_modes: dict[str, str] = {}
        self.ticks = 0
        #: frames in each of the last ticks (how well the streams batch)
        self.frames_per_tick: collections.deque[int] = collections.deque(maxlen=1000)
        #: the paste window of each of the last ticks (how often faces need the large one)
        self.window_per_tick: collections.deque[int] = collections.deque(maxlen=1000)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def device(self) -> Any:
        return self.generator.device

    @property
    def capacity(self) -> int:
        """Frames one stream may have in flight."""
        return self.slots

    def acquire(self) -> None:
        """A stream starts using the hub; the first opens the engine and the swap program."""
        self._users.acquire(lambda: self._program is not None, self._open)

    def _open(self) -> None:
        from livecam.gpupipe.build import build_program

        if self.require_models is not None:
            self.require_models()
        self.generator.open()
        try:
            if self.enhancer is not None:
                self.enhancer.open()
            self._emap = self._emap_fn()
            self._program = build_program(
                self.generator, device=self.device, window_px=self.window_px,
                colour_blur_px=self.colour_blur_px, enhancer_engine=self.enhancer,
                enhancer=self.enhancer_options, hands=self.hands,
                compile_dir=self.compile_dir, **self.model_options)
        except BaseException:
            self._close_engines()
            raise
        self._stopping = False
        if self._collector_thread:
            self._collector = threading.Thread(target=self._collect_loop,
                                               name="livecam-gpu-collect", daemon=True)
            self._collector.start()
        log.info("GPU swap on %s: %d stream(s); ticks of up to %d frames and %d faces, %d "
                 "slots, CUDA graphs %s", self.device, self.n_streams, self.frames_per_call,
                 self.faces_per_call, self.slots,
                 "on" if self._graphs_on() else "off")

    def release(self) -> None:
        """A stream stops using the hub; the last one closes it (waits for ticks in flight)."""
        with self._users.releasing() as last:
            if not last or self._program is None:
                return
            self._stopping = True
            self._wake.notify_all()
            collector = self._collector
        if collector is not None:
            collector.join(5.0)
        while self._launched and self.collect_next(0.0):
            pass
        with self._lock:
            for sched in self._rings.values():
                sched.close()
            self._rings.clear()
            for request in self._pending:
                request.error = RuntimeError("the GPU swap closed before this frame ran")
                request.done.set()
            self._pending.clear()
            self._program = None
            self._collector = None
            self._latents.close()
        self._close_engines()

    def _close_engines(self) -> None:
        self.generator.close()
        if self.enhancer is not None:
            self.enhancer.close()

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._program is None and self._users.users == 0

    def _graphs_on(self) -> bool:
        return self.use_graphs and getattr(self.device, "type", "cpu") == "cuda"

    # -- frame sizes ---------------------------------------------------------------------------

    def check_fits(self, width_px: int, height_px: int) -> None:
        """Raise when every stream's memory plan at this size exceeds the limit (a size
        already prepared was checked)."""
        if self._fit_check is not None and (height_px, width_px) not in self._rings:
            self._fit_check(width_px, height_px)

    def prepare(self, width_px: int, height_px: int) -> None:
        """Allocate the ring for this frame size and capture its CUDA graphs now (seconds),
        logging the progress. Idempotent per size."""
        self._ring_for(height_px, width_px)

    def _ring_for(self, height_px: int, width_px: int) -> Any:
        # a size already prepared needs no lock: every stream's frame passes here, and the
        # lock is held while a tick is launched (taken for every frame, it
        # kept 12 streams' swap threads waiting here half their time for a dictionary lookup)
        sched = self._rings.get((height_px, width_px))
        if sched is not None:
            return sched
        with self._lock:
            sched = self._rings.get((height_px, width_px))
            if sched is not None:
                return sched
            if self._program is None:
                raise RuntimeError("GpuSwapHub used before acquire()")
            from livecam.gpupipe.scheduler import GpuScheduler

            shape = SlotShape(self.frames_per_call, height_px, width_px,
                              self.faces_per_call, self._program.latent_dim, hands=self.hands)
            sched = GpuScheduler(self._program, shape, self.device, n_slots=self.slots,
                                 use_graphs=self._graphs_on(), windows_px=self.windows_px)
            sched.open()
            if self._graphs_on():
                t0 = time.perf_counter()
                step = max(1, (len(sched.buckets) * self.slots * len(sched.windows_px)) // 4)

                def progress(done: int, total: int) -> None:
                    if done % step == 0 or done == total:
                        log.info("GPU swap %dx%d: CUDA graphs %d of %d captured (%.1f s)",
                                 width_px, height_px, done, total, time.perf_counter() - t0)

                modes = sched.warmup(progress=progress)
                self.graph_modes.update({f"{width_px}x{height_px}/{k}": v
                                         for k, v in modes.items()})
                log.info("GPU swap %dx%d ready in %.1f s (%s)", width_px, height_px,
                         time.perf_counter() - t0,
                         ", ".join(sorted({m.split(" ")[0] for m in modes.values()})))
            self._rings[(height_px, width_px)] = sched
            return sched

    def buffers(self, height_px: int, width_px: int) -> FrameBuffers:
        """A stream's pinned frame buffers for this size (``capacity`` of them)."""
        return FrameBuffers(height_px, width_px, self.capacity,
                            pinned=getattr(self.device, "type", "cpu") == "cuda")

    # -- identities ----------------------------------------------------------------------------

    def latent(self, name: str) -> np.ndarray | Unswappable:
        """The generator's (D,) source latent for identity ``name``, or why there is none this
        frame: ``IDENTITY_LOADING`` while it is made on the identity thread (only a first use
        of a name waits for it), ``IDENTITY_MISSING`` when it cannot be had (logged, tried
        again after ``missing_log_interval_s``). A known identity is a dict read: no stream
        waits for another's new identity."""
        return self._latents.get(name)

    def prepare_identities(self, names: tuple[str, ...]) -> None:
        """Start making the latents of ``names`` (those a user can switch to, the likeliest
        first) ahead of use."""
        self._latents.ahead(names)

    def _latent_of(self, name: str) -> np.ndarray:
        from livecam.swap.inswapper import latents_from_embeddings

        try:
            embedding = embedding_of(self.source_embedding, name)
        except IdentityError as exc:
            log.warning("identity %r is unavailable: %s", name, exc)
            raise
        emap = self._emap
        if emap is None:
            raise RuntimeError("the GPU swap closed while an identity was prepared")
        latent = latents_from_embeddings(embedding[None], emap)[0]
        return latent.astype(np.float32)

    # -- ticks ---------------------------------------------------------------------------------

    def submit(self, request: SwapRequest) -> None:
        """Queue ``request``; it runs in the next tick a slot is free for (now, if one is).
        Its ``done`` is set when its frame is back (or its tick failed: ``error``)."""
        h, w = request.size_hw
        self._ring_for(h, w)  # a new size is prepared here (logged), on the caller's thread
        request.t_submit_ns = time.perf_counter_ns()
        with self._lock:
            if self._program is None:
                raise RuntimeError("GpuSwapHub.submit after close")
            self._pending.append(request)
            self._launch()

    def _launch(self) -> None:
        """Start ticks while slots are free and requests wait (hub lock held)."""
        while self._pending:
            size = self._pending[0].size_hw
            sched = self._rings[size]
            if sched.ring_full:
                return
            taken: list[SwapRequest] = []
            left: list[SwapRequest] = []  # the requests that wait on, in their order
            streams: set[int] = set()
            faces = 0
            limit, n_frames = sched.shape.max_faces, sched.shape.n_frames
            pending = self._pending
            while pending:
                request = pending.popleft()
                if request.size_hw != size or request.stream in streams:
                    left.append(request)
                    continue
                if len(taken) >= n_frames or faces + len(request.kps) > limit:
                    pending.appendleft(request)
                    break
                taken.append(request)
                streams.add(request.stream)
                faces += len(request.kps)
            # one pass: the passed-over requests go back in front, in order (a remove() per
            # taken request compared the dataclasses field by field from the front)
            pending.extendleft(reversed(left))
            try:
                self._start_tick(sched, taken)
            except Exception as exc:  # the tick could not start: those frames fail, not all
                log.error("GPU swap tick failed to start (%s: %s)", type(exc).__name__, exc)
                for request in taken:
                    request.error = exc
                    request.done.set()

    def _start_tick(self, sched: Any, requests: list[SwapRequest]) -> None:
        rows = tick_rows(requests)
        sched.submit([r.frame_in for r in requests],
                     [r.buffers.outputs[r.index] for r in requests], rows,
                     [r.frame_ready for r in requests], hands=[r.hands for r in requests])
        self._launched.append((sched, requests))
        self.ticks += 1
        self._wake.notify_all()

    def _collect_loop(self) -> None:
        while not (self._stopping and not self._launched):
            self.collect_next(0.1)

    def collect_next(self, timeout_s: float) -> bool:
        """Finish the oldest tick in flight: wait for it (up to ``timeout_s`` for one to be
        launched), mark its requests done, launch what waits. False when none was in flight.
        The collector thread calls it; nothing else should while that thread runs."""
        with self._lock:
            self._wake.wait_for(lambda: bool(self._launched) or self._stopping, timeout_s)
            if not self._launched:
                return False
            sched, requests = self._launched[0]
            slot = sched.oldest_slot()
        failure: Exception | None = None
        try:
            slot.wait()  # outside the lock: streams keep submitting meanwhile
        except Exception as exc:  # a device error surfaces here first
            failure = exc
        with self._lock:
            self._launched.popleft()
            try:
                result = sched.collect()  # pops the tick (raises again after a failure)
            except Exception as exc:
                failure = failure or exc
            if failure is not None:  # a failed tick fails its frames, the hub goes on
                log.error("GPU swap tick failed (%s: %s)", type(failure).__name__, failure)
                for request in requests:
                    request.error = failure
                    request.done.set()
                return True
            start = 0
            now_ns = time.perf_counter_ns()
            for request in requests:
                n = len(request.kps)
                request.fits = result.fits[start:start + n]
                start += n
                request.gpu_latency_ms = result.gpu_latency_ms
                request.host_latency_ms = (now_ns - request.t_submit_ns) / 1e6
                request.done.set()
            self.frames_per_tick.append(len(requests))
            self.window_per_tick.append(result.window_px)
            if not self._stopping:
                self._launch()
        return True

