"""The face rows of one GPU tick (:class:`TickRows`): host arrays that the requests of several
streams are joined into (:func:`livecam.gpupipe.request.tick_rows`), written into a slot
(:mod:`livecam.gpupipe.slots`) and run by the scheduler (:mod:`livecam.gpupipe.scheduler`).
It sits below all three so none of them imports another to name it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TickRows"]


@dataclass(frozen=True)
class TickRows:
    """The face rows of one tick (host arrays): ``frame_index`` (n,) int64 (the face's frame,
    0 .. frames in the tick - 1), ``kps`` (n, 5, 2) float32 px in ArcFace order,
    ``latents`` (n, D) float32, ``valid`` (n,) bool; ``keep_xy`` (n, LOOPS, POINTS, 2) and
    ``keep_soft`` (n,) float32: the streamer's kept eyes and mouth
    (:func:`livecam.gpupipe.swap.keep.loop_rows_batch`), None: nothing kept."""

    frame_index: np.ndarray
    kps: np.ndarray
    latents: np.ndarray
    valid: np.ndarray
    keep_xy: np.ndarray | None = None
    keep_soft: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.frame_index)
