"""Cheap measurements on one 468-point face mesh: head pose, eye and mouth openness.

All take ``landmarks_xy`` (468, 2) float32 pixels and, for pose, ``landmarks_z`` (468,) float32
(relative depth in the same pixel scale, smaller = nearer, as MediaPipe gives it). They are pure
functions of their inputs and safe to call from any thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# MediaPipe face-mesh indices (468-point topology)
NOSE_TIP = 1
CHIN = 152
FOREHEAD_TOP = 10
EYE_RIGHT_CORNERS = (33, 133)
EYE_LEFT_CORNERS = (362, 263)
EYE_RIGHT_LIDS = ((159, 145), (158, 153), (160, 144))  # (upper, lower) pairs
EYE_LEFT_LIDS = ((386, 374), (385, 380), (387, 373))
MOUTH_CORNERS = (78, 308)
MOUTH_LIPS = ((13, 14), (82, 87), (312, 317))  # inner upper/lower lip pairs

FloatArray = npt.NDArray[np.float32]

# Cheek points at the widest part of the face oval (MediaPipe indices), right and left.
_CHEEK_RIGHT, _CHEEK_LEFT = 234, 454


@dataclass(frozen=True, slots=True)
class HeadPose:
    """Head rotation in degrees: ``yaw`` (+ = turned towards image left), ``pitch``, ``roll``."""

    yaw_deg: float
    pitch_deg: float
    roll_deg: float

    def distance_deg(self, other: HeadPose) -> float:
        """How different two poses are (yaw and pitch dominate what the texture can cover)."""
        return math.hypot(self.yaw_deg - other.yaw_deg, self.pitch_deg - other.pitch_deg)


def head_pose(landmarks_xy: FloatArray, landmarks_z: FloatArray) -> HeadPose:
    """Yaw and pitch from the depth difference across the face; roll from the eye line."""
    right = np.append(landmarks_xy[_CHEEK_RIGHT], landmarks_z[_CHEEK_RIGHT])
    left = np.append(landmarks_xy[_CHEEK_LEFT], landmarks_z[_CHEEK_LEFT])
    top = np.append(landmarks_xy[FOREHEAD_TOP], landmarks_z[FOREHEAD_TOP])
    chin = np.append(landmarks_xy[CHIN], landmarks_z[CHIN])
    across = left - right
    down = chin - top
    roll = math.degrees(math.atan2(float(across[1]), float(across[0])))
    # the cheek-to-cheek vector tilts in depth as the head turns; its length in x shrinks
    yaw = math.degrees(math.atan2(float(across[2]), float(math.hypot(across[0], across[1]))))
    pitch = math.degrees(math.atan2(float(-down[2]), float(math.hypot(down[0], down[1]))))
    return HeadPose(yaw_deg=yaw, pitch_deg=pitch, roll_deg=roll)


def _openness(landmarks_xy: FloatArray, corners: tuple[int, int],
              pairs: tuple[tuple[int, int], ...]) -> float:
    width = float(np.linalg.norm(landmarks_xy[corners[0]] - landmarks_xy[corners[1]]))
    if width < 1e-6:
        return 0.0
    gaps = [float(np.linalg.norm(landmarks_xy[a] - landmarks_xy[b])) for a, b in pairs]
    return float(np.mean(gaps)) / width


def eye_openness(landmarks_xy: FloatArray) -> tuple[float, float]:
    """(right, left) lid gap / eye width: ~0.25-0.35 open, < 0.12 closed (the usual EAR)."""
    return (
        _openness(landmarks_xy, EYE_RIGHT_CORNERS, EYE_RIGHT_LIDS),
        _openness(landmarks_xy, EYE_LEFT_CORNERS, EYE_LEFT_LIDS),
    )


def mouth_openness(landmarks_xy: FloatArray) -> float:
    """Inner-lip gap / mouth width: ~0 closed, > 0.1 visibly open, ~0.5 wide open."""
    return _openness(landmarks_xy, MOUTH_CORNERS, MOUTH_LIPS)


def face_width_px(landmarks_xy: FloatArray) -> float:
    """Cheek-to-cheek distance, px: the scale that mask and blur sizes follow."""
    return float(np.linalg.norm(landmarks_xy[_CHEEK_LEFT] - landmarks_xy[_CHEEK_RIGHT]))
