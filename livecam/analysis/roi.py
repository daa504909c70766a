"""Regions of interest for the face mesh, computed exactly as MediaPipe's own face mesh graph does.

MediaPipe's ``FaceDetectionFrontDetectionToRoi`` and ``FaceLandmarkLandmarksToRoi`` subgraphs turn
a detection (or the previous frame's landmarks) into a rotated square: centre of the box, rotation
that makes the eye line horizontal, side = 1.5 x the box's long side. Doing the same here means
the landmarks we get on a crop equal MediaPipe's whole-image face mesh (see tests/analysis).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from livecam.analysis.keepgil import box_of, extent_of
from livecam.core.types import FloatArray

# Face mesh indices (MediaPipe canonical face model) of the two outer eye corners that
# FaceLandmarkLandmarksToRoi uses for rotation: 33 is on the image-left eye, 263 image-right.
MESH_ROTATION_START = 33
MESH_ROTATION_END = 263
ROI_SCALE = 1.5


@dataclass(frozen=True, slots=True)
class Roi:
    """A rotated square in image pixels: centre, side length and rotation (radians, CCW
    positive as in MediaPipe's ``NormalizedRect.rotation``)."""

    center_x_px: float
    center_y_px: float
    size_px: float
    rotation_rad: float

    def bounds_xyxy(self) -> tuple[float, float, float, float]:
        """Axis-aligned bounding box of the rotated square."""
        half = 0.5 * self.size_px * (abs(math.cos(self.rotation_rad)) +
                                     abs(math.sin(self.rotation_rad)))
        return (self.center_x_px - half, self.center_y_px - half,
                self.center_x_px + half, self.center_y_px + half)

    def shifted(self, dx_px: float, dy_px: float) -> Roi:
        return Roi(self.center_x_px + dx_px, self.center_y_px + dy_px, self.size_px,
                   self.rotation_rad)


def _normalize_radians(angle: float) -> float:
    return angle - 2 * math.pi * math.floor((angle + math.pi) / (2 * math.pi))


def _rotation(x0: float, y0: float, x1: float, y1: float) -> float:
    # DetectionsToRectsCalculator: target angle 0, y axis pointing down.
    return _normalize_radians(0.0 - math.atan2(-(y1 - y0), x1 - x0))


def roi_from_detection(box_xyxy: np.ndarray, keypoints_xy: np.ndarray) -> Roi:
    """ROI for a BlazeFace detection: box (4,) px and keypoints (6, 2) px (BlazeFace order)."""
    x1, y1, x2, y2 = (float(v) for v in box_xyxy)
    rot = _rotation(float(keypoints_xy[0, 0]), float(keypoints_xy[0, 1]),
                    float(keypoints_xy[1, 0]), float(keypoints_xy[1, 1]))
    side = max(x2 - x1, y2 - y1) * ROI_SCALE
    return Roi(0.5 * (x1 + x2), 0.5 * (y1 + y2), side, rot)


def roi_from_landmarks(landmarks_xy: np.ndarray) -> Roi:
    """ROI for tracking from one face's mesh landmarks (K, 2) px, as MediaPipe's tracking mode."""
    return _roi(landmarks_xy, *extent_of(landmarks_xy))


def box_and_roi_from_landmarks(landmarks_xy: np.ndarray) -> tuple[FloatArray, Roi]:
    """:func:`box_from_landmarks` and :func:`roi_from_landmarks` of one face's landmarks
    (K, 2) px from one pass over them (the same values as each alone)."""
    x_lo, y_lo, x_hi, y_hi = extent_of(landmarks_xy)
    box = np.array([float(x_lo), float(y_lo), float(x_hi), float(y_hi)], np.float32)
    return box, _roi(landmarks_xy, x_lo, y_lo, x_hi, y_hi)


def _roi(landmarks_xy: np.ndarray, x_lo: Any, y_lo: Any, x_hi: Any, y_hi: Any) -> Roi:
    # the sums and differences stay in the landmarks' dtype (numpy scalars), as they were
    ax, ay = landmarks_xy[MESH_ROTATION_START].tolist()
    bx, by = landmarks_xy[MESH_ROTATION_END].tolist()
    rot = _rotation(ax, ay, bx, by)
    side = float(max(x_hi - x_lo, y_hi - y_lo)) * ROI_SCALE
    return Roi(float(x_lo + x_hi) * 0.5, float(y_lo + y_hi) * 0.5, side, rot)


def boxes_from_landmarks(landmarks_xy: np.ndarray) -> FloatArray:
    """Axis-aligned boxes (N, 4) float32 xyxy px around landmarks (N, K, 2) px."""
    # face by face on 1-D columns, then one array from the Python floats: (N, K) reductions
    # over axis 1 and writes into columns of the output each let go of the GIL (see keepgil)
    return np.array([box_of(face) for face in landmarks_xy], np.float32).reshape(-1, 4)


def box_from_landmarks(landmarks_xy: np.ndarray) -> FloatArray:
    """Box (4,) float32 xyxy px around one face's landmarks (K, 2) px: one row of
    :func:`boxes_from_landmarks`."""
    return np.array(box_of(landmarks_xy), np.float32)
