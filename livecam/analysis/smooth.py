"""One Euro smoothing of face landmarks, one filter state per track.

One Euro (Casiez et al., CHI 2012): a low-pass whose cutoff rises with speed, so a still face
is held very still and a moving one is followed with little lag. All landmarks of a face share
one cutoff driven by the face's rigid speed (the mean landmark velocity), which is estimated from
all 468 points at once and so is far less noisy than any one point's speed: a per-point cutoff
would open up on noise alone. Expressions (mouth opening) still pass: each point is filtered,
only the cutoff is shared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from livecam.analysis.keepgil import copy_into, row_chunks
from livecam.core.types import FloatArray


def column_means(xy: np.ndarray) -> np.ndarray:
    """``xy.mean(axis=0)`` of a (K, 2) array, bit for bit, in under half the time.

    ``mean`` over axis 0 adds the rows in order (not pairwise: the reduced axis is not the
    contiguous one) and divides by K; the running sum's last row (``cumsum``) is that same
    sum in that same order, without the reduction's 2-wide inner loops and ``mean``'s Python
    wrapper (tests/analysis/test_smooth.py pins the equality).
    """
    return np.add.accumulate(xy, axis=0)[-1] / len(xy)


def _float64_column_means(xy: np.ndarray) -> tuple[float, float]:
    """:func:`column_means` of a float64 (K, 2) array as Python floats: the division by K in
    Python's float64 arithmetic (numpy's, bit for bit) without another small array."""
    sx, sy = np.add.accumulate(xy, axis=0)[-1].tolist()
    return sx / len(xy), sy / len(xy)


def _alpha(cutoff_hz: float, dt_s: float) -> float:
    tau = 1.0 / (2.0 * math.pi * cutoff_hz)
    return 1.0 / (1.0 + tau / dt_s)


@dataclass(slots=True)
class _State:
    xy: np.ndarray  # (K, 2) float64 filtered, updated in place
    z: np.ndarray  # (K,) float64 filtered, updated in place
    speed_px_s: float  # filtered rigid speed
    velocity_px_s: tuple[float, float]  # filtered rigid velocity


class LandmarkSmoother:
    """Per-track One Euro filter over (K, 2) landmarks plus (K,) depth.

    ``min_cutoff_hz``: cutoff for a still face (lower = steadier, more lag at motion onset).
    ``beta``: cutoff increase per px/s of face speed (higher = less lag, more jitter in motion).
    ``derivative_cutoff_hz``: cutoff of the speed estimate.
    ``max_lag``: the filtered face may trail the raw one by at most this fraction of the face
    width (its rigid offset is clamped there): a face that starts moving fast, or a live
    frame far from the last one processed, would otherwise be swapped beside itself, showing
    part of the real face. A still face's jitter is far below it. 0 = no clamp.
    Only the pipeline thread may call it.
    """

    def __init__(self, *, min_cutoff_hz: float = 0.3, beta: float = 0.05,
                 derivative_cutoff_hz: float = 1.0, max_lag: float = 0.0) -> None:
        self.min_cutoff_hz = min_cutoff_hz
        self.beta = beta
        self.derivative_cutoff_hz = derivative_cutoff_hz
        self.max_lag = max_lag
        self._states: dict[int, _State] = {}

    def reset(self, track_id: int | None = None) -> None:
        """Forget one track's history (a new track), or every track's."""
        if track_id is None:
            self._states.clear()
        else:
            self._states.pop(track_id, None)

    def keep_only(self, track_ids: set[int]) -> None:
        """Drop the state of tracks that no longer exist (bounded memory)."""
        for tid in [t for t in self._states if t not in track_ids]:
            del self._states[tid]

    def smooth(self, track_id: int, landmarks_xy: np.ndarray, landmarks_z: np.ndarray,
               dt_s: float, *, out: tuple[np.ndarray, np.ndarray] | None = None,
               ) -> tuple[FloatArray, FloatArray]:
        """Filtered (K, 2) and (K,) float32 for one track; the first call returns the input.

        ``out``: (K, 2) and (K,) float32 arrays to write them into (rows of the caller's
        (N, K, 2) and (N, K) batch: no copy to stack them), returned; new arrays when None.
        """
        xy_out, z_out = out if out is not None else (
            np.empty(landmarks_xy.shape, np.float32), np.empty(landmarks_z.shape, np.float32))
        state = self._states.get(track_id)
        if state is None or state.xy.shape != landmarks_xy.shape or dt_s <= 0:
            self._states[track_id] = _State(
                copy_into(np.empty(landmarks_xy.shape), landmarks_xy),
                copy_into(np.empty(landmarks_z.shape), landmarks_z), 0.0, (0.0, 0.0))
            return copy_into(xy_out, landmarks_xy), copy_into(z_out, landmarks_z)
        # x' = x + a (raw - x), in place on the state, in pieces of at most 500 numbers and
        # with the float32 input cast first on its own: a (K, 2) ufunc, or one mixing float32
        # with float64, lets numpy go of the GIL (see keepgil). Same operations, same bits.
        pieces = row_chunks(len(landmarks_xy), 2)
        delta = np.empty(state.xy.shape)  # float64 (K, 2)
        for s in pieces:
            np.subtract(np.positive(landmarks_xy[s], out=delta[s]), state.xy[s], out=delta[s])
        mean_dx, mean_dy = _float64_column_means(delta)
        raw_vx, raw_vy = mean_dx / dt_s, mean_dy / dt_s
        a_d = _alpha(self.derivative_cutoff_hz, dt_s)
        vx = a_d * raw_vx + (1 - a_d) * state.velocity_px_s[0]
        vy = a_d * raw_vy + (1 - a_d) * state.velocity_px_s[1]
        speed = math.hypot(vx, vy)
        a = _alpha(self.min_cutoff_hz + self.beta * speed, dt_s)
        for s in pieces:
            np.add(state.xy[s], np.multiply(delta[s], a, out=delta[s]), out=state.xy[s])
        dz = np.positive(landmarks_z, out=np.empty(state.z.shape))  # (K,): one piece
        np.add(state.z, np.multiply(np.subtract(dz, state.z, out=dz), a, out=dz), out=state.z)
        state.speed_px_s, state.velocity_px_s = speed, (vx, vy)
        if self.max_lag > 0:
            self._clamp_lag(state, landmarks_xy)
        return copy_into(xy_out, state.xy), copy_into(z_out, state.z)

    def _clamp_lag(self, state: _State, raw_xy: np.ndarray) -> None:
        # the means' difference in Python floats: the float32 mean of float32 landmarks less
        # the float64 one, as numpy's mixed subtraction gives it, without its cast
        (rx, ry), (sx, sy) = column_means(raw_xy).tolist(), _float64_column_means(state.xy)
        lag_x, lag_y = rx - sx, ry - sy
        lag_px = float(np.hypot(lag_x, lag_y))  # numpy's hypot: math.hypot may differ by 1 ulp
        xs = raw_xy[:, 0]
        limit_px = self.max_lag * float(np.maximum.reduce(xs) - np.minimum.reduce(xs))
        if lag_px > limit_px > 0:
            keep = 1.0 - limit_px / lag_px
            shift = np.array([lag_x * keep, lag_y * keep])
            for s in row_chunks(len(state.xy), 2):
                np.add(state.xy[s], shift, out=state.xy[s])
