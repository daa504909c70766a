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

from livecam.types import FloatArray


def _alpha(cutoff_hz: float, dt_s: float) -> float:
    tau = 1.0 / (2.0 * math.pi * cutoff_hz)
    return 1.0 / (1.0 + tau / dt_s)


@dataclass
class _State:
    xyz: np.ndarray  # (K, 3) filtered
    speed_px_s: float  # filtered rigid speed
    velocity: np.ndarray  # (2,) filtered rigid velocity, px/s


class LandmarkSmoother:
    """Per-track One Euro filter over (K, 2) landmarks plus (K,) depth.

    ``min_cutoff_hz``: cutoff for a still face (lower = steadier, more lag at motion onset).
    ``beta``: cutoff increase per px/s of face speed (higher = less lag, more jitter in motion).
    ``derivative_cutoff_hz``: cutoff of the speed estimate.
    Only the pipeline thread may call it.
    """

    def __init__(self, *, min_cutoff_hz: float = 0.3, beta: float = 0.05,
                 derivative_cutoff_hz: float = 1.0) -> None:
        self.min_cutoff_hz = min_cutoff_hz
        self.beta = beta
        self.derivative_cutoff_hz = derivative_cutoff_hz
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
               dt_s: float) -> tuple[FloatArray, FloatArray]:
        """Filtered (K, 2) and (K,) float32 for one track; the first call returns the input."""
        xyz = np.concatenate([landmarks_xy, landmarks_z[:, None]], axis=1).astype(np.float64)
        state = self._states.get(track_id)
        if state is None or state.xyz.shape != xyz.shape or dt_s <= 0:
            self._states[track_id] = _State(xyz, 0.0, np.zeros(2))
            return landmarks_xy.astype(np.float32), landmarks_z.astype(np.float32)
        raw_velocity = (xyz[:, :2] - state.xyz[:, :2]).mean(axis=0) / dt_s
        a_d = _alpha(self.derivative_cutoff_hz, dt_s)
        velocity = a_d * raw_velocity + (1 - a_d) * state.velocity
        speed = float(np.hypot(*velocity))
        cutoff = self.min_cutoff_hz + self.beta * speed
        a = _alpha(cutoff, dt_s)
        filtered = a * xyz + (1 - a) * state.xyz
        self._states[track_id] = _State(filtered, speed, velocity)
        return filtered[:, :2].astype(np.float32), filtered[:, 2].astype(np.float32)
