"""What a stream hands the GPU swap hub for one frame (:class:`SwapRequest`), and the face
rows of a tick made from several streams' requests (:func:`tick_rows`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from livecam.analysis.keepgil import joined
from livecam.gpupipe.rows import TickRows
from livecam.gpupipe.slots import FrameBuffers, HandBox


@dataclass
class SwapRequest:
    """One frame of one stream for the GPU: ``buffers.inputs[index]`` holds the frame (the
    stream wrote it), or ``frame_dev`` does (a device tensor the follower's networks kept,
    valid after the CUDA event ``frame_ready``); the swapped frame lands in
    ``buffers.outputs[index]``; ``kps`` (n, 5, 2) float32 px and ``latents`` (n, D) float32
    per face; ``keep_xy``/``keep_soft`` each face's kept eyes and mouth
    (:func:`livecam.gpupipe.swap.keep.loop_rows_batch`) or None; ``hands`` the frame's hand
    mask or None. The hub fills ``fits`` (n,) bool, ``error`` (when the tick failed) and the
    latencies, then sets ``done``."""

    stream: int
    buffers: FrameBuffers
    index: int
    kps: np.ndarray
    latents: np.ndarray
    done: threading.Event = field(default_factory=threading.Event)
    fits: np.ndarray | None = None
    error: BaseException | None = None
    host_latency_ms: float = float("nan")
    gpu_latency_ms: float = float("nan")
    t_submit_ns: int = 0
    frame_dev: Any = None
    frame_ready: Any = None
    hands: HandBox | None = None
    keep_xy: np.ndarray | None = None
    keep_soft: np.ndarray | None = None

    @property
    def size_hw(self) -> tuple[int, int]:
        return self.buffers.size_hw

    @property
    def frame_in(self) -> Any:
        return self.frame_dev if self.frame_dev is not None else self.buffers.inputs[self.index]


def tick_rows(requests: list[SwapRequest]) -> TickRows:
    """The face rows of one tick: request k's faces with ``frame_index`` k, in order; the kept
    eyes and mouth rows where any request has them (zeros for those without). Made on the
    hub's launching thread for every tick, so it keeps the GIL (see
    :mod:`livecam.analysis.keepgil`): one request's arrays are its rows as they are; several
    are joined piece by piece."""
    index = np.array([k for k, r in enumerate(requests) for _ in range(len(r.kps))], np.int64)
    keep: dict[str, np.ndarray] = {}
    if any(r.keep_xy is not None for r in requests):
        from livecam.gpupipe.swap.keep import LOOPS, POINTS

        keep["keep_xy"] = joined([
            r.keep_xy if r.keep_xy is not None
            else np.zeros((len(r.kps), LOOPS, POINTS, 2), np.float32) for r in requests],
            np.float32)
        keep["keep_soft"] = joined([
            r.keep_soft if r.keep_soft is not None else np.zeros(len(r.kps), np.float32)
            for r in requests], np.float32)
    return TickRows(frame_index=index, kps=joined([r.kps for r in requests], np.float32),
                    latents=joined([r.latents for r in requests], np.float32),
                    valid=np.ones(len(index), bool), **keep)
