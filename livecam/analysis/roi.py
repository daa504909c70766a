"""Regions of interest for the face mesh, computed exactly as MediaPipe's own face mesh graph does.

MediaPipe's ``FaceDetectionFrontDetectionToRoi`` and ``FaceLandmarkLandmarksToRoi`` subgraphs turn
a detection (or the previous frame's landmarks) into a rotated square: centre of the box, rotation
that makes the eye line horizontal, side = 1.5 x the box's long side. Doing the same here means
the landmarks we get on a crop equal MediaPipe's whole-image face mesh (see tests/analysis).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

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
    lo = landmarks_xy.min(axis=0)
    hi = landmarks_xy.max(axis=0)
    a = landmarks_xy[MESH_ROTATION_START]
    b = landmarks_xy[MESH_ROTATION_END]
    rot = _rotation(float(a[0]), float(a[1]), float(b[0]), float(b[1]))
    side = float(max(hi[0] - lo[0], hi[1] - lo[1])) * ROI_SCALE
    return Roi(float(lo[0] + hi[0]) * 0.5, float(lo[1] + hi[1]) * 0.5, side, rot)


def boxes_from_landmarks(landmarks_xy: np.ndarray) -> FloatArray:
    """Axis-aligned boxes (N, 4) float32 xyxy px around landmarks (N, K, 2) px."""
    if len(landmarks_xy) == 0:
        return np.zeros((0, 4), np.float32)
    lo = landmarks_xy.min(axis=1)
    hi = landmarks_xy.max(axis=1)
    return np.concatenate([lo, hi], axis=1).astype(np.float32)
