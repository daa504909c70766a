"""The GPU tick ring: overlaps upload/compute of tick k+1 with download of tick k.

Each tick takes the next :class:`~livecam.gpupipe.slots.Slot` of a ring and queues, on that
slot's stream: upload (pinned -> device: the tick's frames and face rows), the swap program
(a CUDA graph replay where possible), download (device -> pinned: the swapped frames, into
the buffers the caller names, and the ``fits`` flags) and an event. :meth:`GpuScheduler.submit`
returns at once; :meth:`GpuScheduler.collect` waits for the oldest tick. Ticks on different
slots share no state, so they may run on the GPU at the same time (small-kernel work of one
fills SMs the other leaves idle). Usage, from one thread at a time::

    with GpuScheduler(program, shape, device) as sched:
        sched.warmup()                          # capture the graphs before the first frame
        sched.submit(frames_in, frames_out, rows)
        result = sched.collect()                # frames_out now hold the swapped frames

Paste windows: the program pastes each face in a square window of the frame around it
(``advanced.gpu.paste_window_px``); with a second, larger window
(``advanced.gpu.paste_window_large_px``) a tick uses the smallest window that holds all its faces,
found on the host from their keypoints, so the usual faces cost the small window and a face close to
the camera is still swapped (one the largest window cannot hold is reported as not fitting, and
covered).

No allocation happens per tick after the graphs are captured (:meth:`GpuScheduler.warmup`).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import torch

from livecam.gpupipe.graphs import GraphRunner, bucket_for, face_buckets
from livecam.gpupipe.program import SwapProgram
from livecam.gpupipe.rows import TickRows
from livecam.gpupipe.shapes import distinct_windows
from livecam.gpupipe.slots import HandBox, Slot, SlotRing, SlotShape
from livecam.gpupipe.swap.paste import window_for


@dataclass(frozen=True)
class TickResult:
    """One finished tick: ``fits`` (n,) bool per face row (its paste-back window held it; a
    copy), ``host_latency_ms`` from submit to outputs in host memory as the host saw it,
    ``gpu_latency_ms`` the same span by CUDA events (NaN on the CPU), ``window_px`` the
    paste window it used."""

    tick: int
    slot: int
    n_faces: int
    fits: np.ndarray
    host_latency_ms: float
    gpu_latency_ms: float
    window_px: int = 0


class GpuScheduler:
    """Drives a :class:`SwapProgram` over a :class:`SlotRing` (see the module docstring).

    Cheap to construct; :meth:`open` allocates the slots. ``use_graphs`` captures one CUDA
    graph per (slot, bucket, window) (CUDA only). ``windows_px``: the paste windows a tick
    may use (default: the swapper's one; a window is cut to the frame's smaller side, and one
    no larger than a smaller one once cut is dropped: its graphs would be the same work). One
    thread at a time.
    """

    def __init__(self, program: SwapProgram, shape: SlotShape, device: torch.device | str, *,
                 n_slots: int = 3, use_graphs: bool = True,
                 windows_px: tuple[int, ...] = ()) -> None:
        self.program = program
        self.shape = shape
        self.windows_px = _distinct_windows(windows_px or (program.swapper.window_px,), shape)
        self.device = torch.device(device)
        self.n_slots = n_slots
        self.runner = GraphRunner(program, use_graphs=use_graphs)
        self.buckets = face_buckets(shape.max_faces)
        self.ring: SlotRing | None = None
        self._queue: collections.deque[tuple[Slot, int, int]] = collections.deque()
        self._tick = 0
        # padding rows align a benign square (never pasted: valid is False), not stale data
        self._pad_kps = np.array([[0, 0], [64, 0], [32, 32], [0, 64], [64, 64]], np.float32)

    def open(self) -> None:
        if self.ring is None:
            self.ring = SlotRing(self.shape, self.device, self.n_slots)

    def close(self) -> None:
        while self._queue:
            self.collect()
        self.ring = None

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

    def oldest_slot(self) -> Slot:
        """The slot of the oldest tick in flight (its ``wait`` blocks until it is done)."""
        return self._queue[0][0]

    def oldest_done(self) -> bool:
        """Whether the oldest tick in flight has finished (False when none is)."""
        if not self._queue:
            return False
        slot = self._queue[0][0]
        return not slot.cuda or bool(slot.done.query())

    def warmup(self, face_counts: tuple[int, ...] | None = None,
               progress: object = None) -> dict[str, str]:
        """Capture graphs for ``face_counts`` (default: every bucket) on every slot, for
        every paste window, now; returns the modes (see ``GraphRunner.modes``).
        ``progress(done, total)`` is called after each capture (for the log)."""
        self.open()
        assert self.ring is not None
        counts = self.buckets if face_counts is None else tuple(
            sorted({bucket_for(n, self.buckets) for n in face_counts}))
        jobs = [(slot, n, w) for slot in self.ring.slots for n in counts
                for w in self.windows_px]
        for k, (slot, n, w) in enumerate(jobs, start=1):
            self.runner.prepare(slot, n, w)
            if callable(progress):
                progress(k, len(jobs))
        return self.runner.modes

    def submit(self, frames_in: list[torch.Tensor], frames_out: list[torch.Tensor],
               rows: TickRows, ready: list[Any] | None = None,
               hands: list[HandBox | None] | None = None) -> int:
        """Queue one tick: frame k of ``frames_in`` ((H, W, 3) uint8: a host buffer, pinned on
        CUDA, or a device tensor copied after the CUDA event ``ready[k]``) is swapped with the
        ``rows`` whose ``frame_index`` is k and downloaded into ``frames_out[k]`` (host);
        ``hands[k]`` is frame k's hand mask (slots allocated with ``hands``; None: no hand).
        Returns the tick number. The input buffers must not be written and
        the output buffers not read until :meth:`collect` returned this tick. Raises
        RuntimeError when the ring is full (collect first), ValueError for too many frames or
        faces."""
        self.open()
        assert self.ring is not None
        if self.ring_full:
            raise RuntimeError("every slot is in flight: collect() the oldest tick first")
        n = len(rows)
        if not 0 < len(frames_in) == len(frames_out) <= self.shape.n_frames:
            raise ValueError(f"a tick takes 1 to {self.shape.n_frames} frames in and out, got "
                             f"{len(frames_in)} and {len(frames_out)}")
        bucket = bucket_for(n, self.buckets)  # raises past max_faces
        slot = self.ring.next()
        slot.faces_host.write(rows, bucket, self._pad_kps)
        window = self.window_for(rows.kps)
        slot.tick = self._tick
        slot.t_submit_ns = time.perf_counter_ns()
        slot.upload(frames_in, ready, hands)
        with slot.on_stream():
            self.runner.run(slot, bucket, window)
        slot.download(frames_out)
        self._queue.append((slot, n, window))
        self._tick += 1
        return slot.tick

    def collect(self) -> TickResult:
        """Wait for the oldest tick in flight and return it."""
        slot, n, window = self._queue.popleft()
        slot.wait()
        t_ready = time.perf_counter_ns()
        return TickResult(tick=slot.tick, slot=slot.index, n_faces=n,
                          fits=slot.faces_host.numpy["fits"][:n].copy(),
                          host_latency_ms=(t_ready - slot.t_submit_ns) / 1e6,
                          gpu_latency_ms=slot.gpu_time_ms(), window_px=window)

    def window_for(self, kps_n52: np.ndarray) -> int:
        """The paste window for faces with keypoints (n, 5, 2): the smallest of
        :attr:`windows_px` that holds them all (see
        :func:`~livecam.gpupipe.swap.paste.window_for`)."""
        if len(self.windows_px) == 1 or not len(kps_n52):
            return self.windows_px[0]
        return window_for(self.program.swapper.footprints_px(kps_n52), self.windows_px,
                          (self.shape.height_px, self.shape.width_px))


def _distinct_windows(windows_px: tuple[int, ...], shape: SlotShape) -> tuple[int, ...]:
    """:func:`livecam.gpupipe.shapes.distinct_windows` for this slot's frames."""
    return distinct_windows(windows_px, shape.height_px, shape.width_px)
