"""The GPU frame scheduler: overlaps upload/compute of tick k+1 with download/send of tick k.

One *tick* is a group of frames (one per input stream) processed together. Each tick takes the
next :class:`~livecam.gpupipe.slots.Slot` of a ring and queues, on that slot's stream:
upload (pinned -> device), a wait for the previous tick's compute (the ROI state chains from
tick to tick), the frame program (a CUDA graph replay where possible), download (device ->
pinned) and an event. The host returns at once; while the GPU runs tick k+1 the host collects
tick k. Only the analysis (the ROI state) is ordered between ticks, so tick k+1's detector,
face mesh and alignment run on the GPU at the same time as tick k's generator and paste-back
(see :mod:`livecam.gpupipe.graphs`). Usage, from one thread::

    with GpuScheduler(program, shape, device) as sched:
        for frame in source:
            if sched.ring_full:
                send(sched.collect())       # oldest tick; its arrays are valid until reused
            sched.submit(fill, n_faces)     # fill(slot) writes slot.frames_in_host etc.
        while sched.in_flight:
            send(sched.collect())

No allocation happens per tick after the graphs are captured (:meth:`GpuScheduler.warmup`).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import torch

from livecam.core.types import Faces
from livecam.gpupipe.graphs import GraphRunner, bucket_for, face_buckets
from livecam.gpupipe.program import PRESENCE_THRESHOLD, FrameProgram
from livecam.gpupipe.slots import Slot, SlotRing, SlotShape


@dataclass(frozen=True)
class TickResult:
    """One finished tick. Arrays are views of the slot's pinned host buffers, valid until the
    scheduler submits to that slot again (``n_slots`` ticks later).

    ``frames_bgr`` (B, H, W, 3) uint8; ``frame_index`` (n,) int64, the frame of each face;
    ``landmarks_px`` (n, 468, 3) float32; ``presence`` (n,);
    ``fits`` (n,) bool; ``det_boxes_xyxy`` (B, D, 4), ``det_scores`` (B, D), ``det_valid``
    (B, D), fresh when ``detected``; ``host_latency_ms`` from submit (upload queued) to
    outputs in host memory as seen by the host; ``gpu_latency_ms`` the same span measured by
    CUDA events (NaN on CPU).
    """

    tick: int
    slot: int
    n_faces: int
    detected: bool
    frames_bgr: np.ndarray
    frame_index: np.ndarray
    landmarks_px: np.ndarray
    presence: np.ndarray
    roi_next: np.ndarray
    fits: np.ndarray
    det_boxes_xyxy: np.ndarray
    det_scores: np.ndarray
    det_valid: np.ndarray
    host_latency_ms: float
    gpu_latency_ms: float


    def faces(self, frame: int = 0, *, min_presence: float = PRESENCE_THRESHOLD) -> Faces:
        """The faces the mesh found in frame ``frame`` of this tick, as :class:`Faces` for the
        host-side tracker: boxes around the landmarks, presence as score, keypoints in
        BlazeFace order from the mesh, ``track_ids`` -1. Copies out of the slot's buffers."""
        from livecam.analysis.landmarks import six_keypoints

        keep = (self.frame_index == frame) & (self.presence >= min_presence)
        lm = np.ascontiguousarray(self.landmarks_px[keep], dtype=np.float32)
        if len(lm) == 0:
            return Faces.empty()
        xy = lm[..., :2]
        boxes = np.concatenate([xy.min(axis=1), xy.max(axis=1)], axis=1)
        return Faces(boxes_xyxy=boxes, scores=self.presence[keep].astype(np.float32),
                     keypoints_xy=six_keypoints(xy), landmarks_xy=xy.copy(),
                     landmarks_z=lm[..., 2].copy(),
                     track_ids=np.full(len(lm), -1, np.int64))


class GpuScheduler:
    """Drives a :class:`FrameProgram` over a :class:`SlotRing` (see the module docstring).

    Cheap to construct; :meth:`open` allocates the slots. ``use_graphs`` captures one CUDA
    graph per (slot, bucket) (CUDA only). Only one thread uses a scheduler.
    """

    def __init__(self, program: FrameProgram, shape: SlotShape, device: torch.device | str, *,
                 n_slots: int = 2, use_graphs: bool = True) -> None:
        self.program = program
        self.shape = shape
        self.device = torch.device(device)
        self.n_slots = n_slots
        self.runner = GraphRunner(program, use_graphs=use_graphs)
        self.buckets = face_buckets(shape.max_faces)
        self.ring: SlotRing | None = None
        self._queue: collections.deque[tuple[Slot, int, bool]] = collections.deque()
        self._last: Slot | None = None
        self._tick = 0

    def open(self) -> None:
        if self.ring is None:
            self.ring = SlotRing(self.shape, self.device, self.n_slots)

    def close(self) -> None:
        while self._queue:
            self.collect()
        self.ring = None
        self._last = None

    def __enter__(self) -> GpuScheduler:
        self.open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    @property
    def ring_full(self) -> bool:
        return len(self._queue) >= self.n_slots

    def warmup(self, face_counts: tuple[int, ...] | None = None,
               detect: tuple[bool, ...] = (True, False)) -> dict[str, str]:
        """Capture graphs for ``face_counts`` (default: every bucket) and the detection flags
        on every slot now; returns the modes (see ``GraphRunner.modes``)."""
        self.open()
        assert self.ring is not None
        counts = self.buckets if face_counts is None else tuple(
            bucket_for(n, self.buckets) for n in face_counts)
        for slot in self.ring.slots:
            for n in counts:
                for flag in detect:
                    self.runner.prepare(slot, n, flag)
        return self.runner.modes

    def submit(self, fill: Callable[[Slot], Any], n_faces: int, *, detect: bool = True) -> int:
        """Queue one tick with ``n_faces`` face slots in use; returns its tick number.
        ``detect`` runs the detector this tick (the app does it every few ticks; the detection
        outputs of the slot keep older values otherwise, see ``TickResult.detected``).

        ``fill(slot)`` writes the inputs into the slot's host buffers first
        (``slot.frames_in_host``, ``slot.faces_host.*``; rows past ``n_faces`` are ignored).
        Raises RuntimeError when the ring is full (collect first).
        """
        self.open()
        assert self.ring is not None
        if self.ring_full:
            raise RuntimeError("every slot is in flight: collect() the oldest tick first")
        bucket = bucket_for(n_faces, self.buckets)
        slot = self.ring.next()
        fill(slot)
        if bucket > n_faces:  # padding face slots: compute runs, paste is masked off
            slot.faces_host.valid[n_faces:bucket] = False
        slot.tick = self._tick
        slot.t_submit_ns = time.perf_counter_ns()
        slot.upload()
        with slot.on_stream():
            if slot.cuda and self._last is not None:
                # only the analysis chains (ROI state); the rest of the previous tick overlaps
                slot.stream.wait_event(self._last.computed)
            self.runner.run(slot, bucket, detect)  # records slot.computed after the analysis
        slot.download()
        self._queue.append((slot, n_faces, detect))
        self._last = slot
        self._tick += 1
        return slot.tick

    def collect(self) -> TickResult:
        """Wait for the oldest tick in flight and return it."""
        slot, n, detected = self._queue.popleft()
        slot.wait()
        t_ready = time.perf_counter_ns()
        fh = slot.faces_host
        return TickResult(
            tick=slot.tick, slot=slot.index, n_faces=n, detected=detected,
            frames_bgr=slot.frames_out_host.numpy(), frame_index=fh.frame_index[:n].numpy(),
            landmarks_px=fh.landmarks[:n].numpy(), presence=fh.presence[:n].numpy(),
            roi_next=fh.roi_next[:n].numpy(), fits=fh.fits[:n].numpy(),
            det_boxes_xyxy=fh.det_boxes.numpy(), det_scores=fh.det_scores.numpy(),
            det_valid=fh.det_valid.numpy(),
            host_latency_ms=(t_ready - slot.t_submit_ns) / 1e6,
            gpu_latency_ms=slot.gpu_time_ms())
